"""`sparkpoint kafka start|status|stop` as a user runs them: a real KRaft broker from
Kafka's own jars, in processes that outlive the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from sparkpoint.ops.devcluster.kafka import KafkaLaunchError, LocalKafka
from tests.ops.cli.test_zookeeper_cli import sparkpoint


@pytest.mark.slow
def test_start_status_stop(tmp_path: Path) -> None:
    started = sparkpoint("kafka", "start", "--dir", str(tmp_path), "--json")
    assert started.returncode == 0, started.stderr
    bootstrap = json.loads(started.stdout)["bootstrap"]
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        cluster = admin.describe_cluster().result(30)
        assert len(cluster.nodes) == 1 and cluster.controller is not None
        status = sparkpoint("kafka", "status", "--dir", str(tmp_path), "--json")
        assert status.returncode == 0, status.stderr
        assert [n["serving"] for n in json.loads(status.stdout)["nodes"]] == [True]
        again = sparkpoint("kafka", "start", "--dir", str(tmp_path))
        assert again.returncode == 1 and "is running" in again.stderr
    finally:
        stopped = sparkpoint("kafka", "stop", "--dir", str(tmp_path))
    assert stopped.returncode == 0, stopped.stderr
    down = sparkpoint("kafka", "status", "--dir", str(tmp_path), "--json")
    assert down.returncode == 1
    assert [n["pid"] for n in json.loads(down.stdout)["nodes"]] == [None]


def test_bad_arguments_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(KafkaLaunchError, match="nodes must be 1 or 3, not 2"):
        LocalKafka(tmp_path, nodes=2)
    result = sparkpoint("kafka", "stop", "--dir", str(tmp_path / "none"))
    assert result.returncode == 1 and "no Kafka was started from" in result.stderr
