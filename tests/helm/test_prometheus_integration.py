"""A real Prometheus server scrapes real coordinators (`sparkpoint coordinator run` against
a real ZooKeeper) and evaluates the real alert rules: with a leader, nothing fires; with
every coordinator stopped, SparkpointNoLeader fires, seen through Prometheus' HTTP API.

One change to the rules file for the test's sake: SparkpointNoLeader's `for` is cut from
its production value to a few seconds (its expression is the file's, unchanged; the
promtool unit tests cover the `for`)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from sparkpoint.ops.devcluster.zookeeper import free_port
from tests.helm.artifacts import ALERTS, tool
from tests.service.support import Driver, ReplicaProcess, make_graph, wait_leader
from tests.support.waiting import wait_until

SCRAPE_JOB = "sparkpoint"
PIPELINE = "clicks"
TEST_FOR = "3s"


class Prometheus:
    def __init__(self, directory: Path, targets: list[str]) -> None:
        rules = yaml.safe_load(ALERTS.read_text())
        for group in rules["groups"]:
            for rule in group["rules"]:
                if rule["alert"] == "SparkpointNoLeader":
                    rule["for"] = TEST_FOR
        (directory / "alerts.yaml").write_text(yaml.safe_dump(rules))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": ["alerts.yaml"],
            "scrape_configs": [{"job_name": SCRAPE_JOB, "static_configs": [{"targets": targets}]}],
        }  # fmt: skip
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log_path = directory / "prometheus.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [tool("prometheus"), f"--config.file={directory / 'prometheus.yml'}",
                 f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address={self.url.removeprefix('http://')}"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"prometheus exited:\n{self.log_path.read_text()}"
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        reply.raise_for_status()
        return reply.json()["data"]["result"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/api/v1/alerts", timeout=5)
        reply.raise_for_status()
        return [a for a in reply.json()["data"]["alerts"] if a["labels"]["alertname"] == name]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


@pytest.fixture
def coordinators(replicas) -> list[ReplicaProcess]:
    return [replicas(name) for name in ("c0", "c1")]


@pytest.fixture
def prometheus(tmp_path: Path, coordinators: list[ReplicaProcess]) -> Iterator[Prometheus]:
    directory = tmp_path / "prometheus"
    directory.mkdir()
    server = Prometheus(directory, [f"127.0.0.1:{c.port}" for c in coordinators])
    try:
        wait_until(server.ready, timeout=60, message="prometheus to be ready", interval=0.2)
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_no_leader_fires_when_every_coordinator_stops(
    coordinators: list[ReplicaProcess], prometheus: Prometheus
) -> None:
    wait_leader(coordinators)
    driver = Driver([c.address for c in coordinators], make_graph(PIPELINE)).start()
    try:
        # Prometheus sees one leader, and the pipeline's job id as `job_id`.
        wait_until(
            lambda: prometheus.query(
                f'sparkpoint_checkpoints_completed_total{{job="{SCRAPE_JOB}",'
                f' job_id="{PIPELINE}"}} > 0'
            ),
            timeout=60, message="completed checkpoints of the pipeline in Prometheus",
            interval=0.2,
        )  # fmt: skip
    finally:
        driver.stop()
    leaders = prometheus.query(f'sum(sparkpoint_is_leader{{job="{SCRAPE_JOB}"}})')
    assert [float(r["value"][1]) for r in leaders] == [1.0]
    # Before the election both replicas reported 0, so the alert may have gone pending;
    # with a leader scraped it clears at the next evaluation.
    wait_until(
        lambda: prometheus.alerts("SparkpointNoLeader") == [],
        timeout=30, message="SparkpointNoLeader inactive while a leader is scraped",
        interval=0.2,
    )  # fmt: skip
    assert prometheus.alerts("SparkpointMultipleLeaders") == []

    for coordinator in coordinators:
        coordinator.signal(signal.SIGTERM)
    for coordinator in coordinators:
        assert coordinator.proc.wait(30) == 0, coordinator.log()

    firing = wait_until(
        lambda: [a for a in prometheus.alerts("SparkpointNoLeader") if a["state"] == "firing"],
        timeout=60, message="SparkpointNoLeader firing in Prometheus", interval=0.2,
    )  # fmt: skip
    (alert,) = firing
    assert alert["labels"]["job"] == SCRAPE_JOB
    assert alert["labels"]["severity"] == "critical"
    assert alert["annotations"]["runbook_url"] == "docs/operations.md#sparkpointnoleader"
