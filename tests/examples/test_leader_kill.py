"""Exactly-once from RabbitMQ to PostgreSQL through the HA coordinator service while the
leading coordinator is killed with kill -9, twice: real ZooKeeper, real coordinator
processes, a real driver process."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from sparkpoint.ops.devcluster.system_servers import PostgresServer, RabbitMQServer
from tests.examples import processes, support
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def test_leader_killed_twice_mid_stream(
    tmp_path: Path, replicas: object, rabbitmq: RabbitMQServer, postgres: PostgresServer
) -> None:
    # Three replicas, all known to the driver: after two kills one is left to lead.
    cluster: list[ReplicaProcess] = [replicas(name) for name in ("a", "b", "c")]  # type: ignore[operator]
    wait_leader(cluster, timeout=300)
    support.reset_table(postgres)
    job_id, queue = support.fresh_names()
    published = support.publish_range(rabbitmq, queue, 0, 240)
    addresses = ",".join(f"127.0.0.1:{r.port}" for r in cluster)
    driver = processes.start_orders_driver(
        tmp_path / "job", rabbitmq, postgres, job_id, queue, "--coordinator", addresses
    )
    try:
        for kill in range(2):
            done = driver.latest().get("last_completed") or 0
            wait_until(
                lambda done=done: (driver.latest().get("last_completed") or 0) > done,
                timeout=600,
                message=f"a checkpoint completed before kill {kill + 1}",
            )
            leader = wait_leader(cluster, timeout=300)
            leader.kill()  # kill -9
            published += support.publish_range(rabbitmq, queue, 240 + 30 * kill, 30)
            cluster = [r for r in cluster if r is not leader]
            wait_leader(cluster, timeout=300)
        wait_until(
            lambda: support.row_count(postgres) >= len(published),
            timeout=600,
            message="every message committed",
        )
        done = driver.latest().get("last_completed") or 0
        wait_until(
            lambda: (driver.latest().get("last_completed") or 0) >= done + 2,
            timeout=300,
            message="two more completed checkpoints",
        )
    finally:
        driver.proc.send_signal(signal.SIGTERM)
        code = driver.wait(timeout=120)
    assert code == 0, driver.log.read_text()[-4000:]
    starts = [r for r in driver.reports() if r.get("event") == "started"]
    assert len(starts) == 1, "the driver kept running through both failovers"
    support.verified(postgres, published)
