"""The Kafka → Kafka orders job rescaled live while it runs, asked from outside (the CLI and
the REST API) on real coordinator replicas, with executors in their own JVMs
(local-cluster): 4 → 2 → 6 with the leading coordinator killed -9 in the middle of the
second rescale, and 4 → 2 on the on-disk state backend with the active driver killed -9 in
the middle of it and its warm standby taking over at the new parallelism. Afterwards the
job's record in ZooKeeper (its graph's parallelism, the request applied), the checkpoints
(planned at the old parallelism, taken since at the new one) and the output topic (every
record once, every key's running count 1..n: the keyed state went along unbroken)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkpoint.client import CoordinatorClient
from sparkpoint.client.errors import Unavailable
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.cli.main import main
from sparkpoint.ops.devcluster.kafka import LocalKafka
from sparkpoint.ops.drills.kill_driver import standby_ready
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import JobRecord, ZooKeeperJobRegistry
from tests.examples import kafka_support as ks
from tests.examples import processes
from tests.examples.test_kafka_faults import LOCAL_CLUSTER, completed, finish_exactly_once
from tests.service.support import ReplicaProcess, wait_leader
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def rescale_cli(cluster: list[ReplicaProcess], job: str, *args: str) -> dict[str, Any]:
    at = [a for r in cluster for a in ("--coordinator", f"127.0.0.1:{r.port}")]
    result = CliRunner().invoke(main, ["jobs", "rescale", "--job", job, *args, *at, "--json"])
    assert result.exit_code == 0, result.output
    reply: dict[str, Any] = json.loads(result.output)
    return reply


def applied(cluster: list[ReplicaProcess], job: str, request_id: str) -> dict[str, Any] | None:
    """The job's request ``request_id`` once its driver reported it applied."""
    with CoordinatorClient([f"127.0.0.1:{r.port}" for r in cluster], retry_for_s=2) as client:
        try:
            last = client.job(job).get("rescale") or {}
        except Unavailable:
            return None
    ok = last.get("request_id") == request_id and last.get("state") == "applied"
    return last if ok else None


def rescaling_to(driver: processes.DriverProcess, parallelism: int) -> bool:
    """The driver runs a rescale to ``parallelism``: its checkpoint at the boundary is
    under way."""
    return any(r.get("rescaling") == parallelism for r in driver.reports())


def record(observer: ZooKeeperConnection, job: str) -> JobRecord:
    found = ZooKeeperJobRegistry(observer, None).get(job)
    assert found is not None
    return found


def parallelism_of(storage: CheckpointStorage, job: str, checkpoint_id: int) -> set[int]:
    metadata = storage.read_metadata(storage.checkpoint_directory(job, checkpoint_id))
    return {op.parallelism for op in metadata.operator_states.values()}


def test_rescaled_4_2_6_by_the_cli_with_the_leader_killed_mid_rescale(
    tmp_path: Path, replicas: Any, kafka: LocalKafka, observer: ZooKeeperConnection
) -> None:
    cluster: list[ReplicaProcess] = [replicas(n) for n in ("a", "b")]
    wait_leader(cluster, timeout=300)
    job, source, out = ks.fresh_topics(kafka, partitions=4)
    published = ks.publish(kafka, source, 0, 300)
    addresses = ",".join(f"127.0.0.1:{r.port}" for r in cluster)
    driver = processes.start_kafka_orders_driver(
        tmp_path / "job", kafka, job, source, out,
        "--coordinator", addresses, "--parallelism", "4", *LOCAL_CLUSTER,
    )  # fmt: skip
    try:
        wait_until(lambda: completed(driver) >= 1, timeout=600, message="a first checkpoint")
        down = rescale_cli(cluster, job, "--parallelism", "2", "--wait", "--timeout", "600")
        assert (down["state"], down["parallelism"]) == ("applied", 2), down
        published += ks.publish(kafka, source, 300, 60)

        up = rescale_cli(cluster, job, "--parallelism", "6")
        assert up["state"] == "pending"
        wait_until(lambda: rescaling_to(driver, 6), timeout=600, message="the driver rescales")
        leader = wait_leader(cluster, timeout=300)
        leader.kill()  # kill -9, mid-rescale
        cluster = [r for r in cluster if r is not leader]
        wait_leader(cluster, timeout=300)
        done = wait_until(
            lambda: applied(cluster, job, up["request_id"]),
            timeout=600,
            message="the rescale to 6 applied under the next leader",
            interval=0.5,
        )
        published += ks.publish(kafka, source, 360, 60)
        finish_exactly_once(driver, kafka, out, published)
    finally:
        if driver.proc.poll() is None:
            driver.kill()

    assert len([r for r in driver.reports() if r.get("event") == "started"]) == 1
    stored = record(observer, job)
    assert {op.parallelism for op in stored.graph.operators} == {6}
    assert stored.rescale is not None and stored.rescale.state == "applied"
    assert down["checkpoint_id"] < done["checkpoint_id"]
    # The checkpoints taken since are at 6 (the ones each rescale was planned from are
    # subsumed and deleted by then).
    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    latest = max(storage.list_checkpoints(job, completed_only=True))
    assert latest > done["checkpoint_id"] and parallelism_of(storage, job, latest) == {6}


def test_active_driver_killed_mid_rescale_the_standby_goes_on_at_the_new_parallelism(
    tmp_path: Path,
    replicas: Any,
    kafka: LocalKafka,
    observer: ZooKeeperConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPARKPOINT_STATE_BACKEND", "rocksdb")  # both drivers' keyed state
    cluster: list[ReplicaProcess] = [replicas(n) for n in ("a", "b")]
    wait_leader(cluster, timeout=300)
    job, source, out = ks.fresh_topics(kafka, partitions=4)
    published = ks.publish(kafka, source, 0, 300)
    addresses = ",".join(f"127.0.0.1:{r.port}" for r in cluster)
    work = tmp_path / "job"
    common = ("--coordinator", addresses, "--parallelism", "4", *LOCAL_CLUSTER)
    active = processes.start_kafka_orders_driver(work, kafka, job, source, out, *common)
    drivers = [active]
    try:
        wait_until(lambda: completed(active) >= 1, timeout=600, message="a first checkpoint")
        standby = processes.start_kafka_orders_driver(
            work, kafka, job, source, out, *common, "--standby"
        )
        drivers.append(standby)
        wait_until(
            lambda: standby_ready([r.address for r in cluster], job),
            timeout=600,
            message="the standby waits, warm",
        )
        with CoordinatorClient(addresses.split(","), retry_for_s=30) as client:
            asked = client.rescale(job, 2)  # the REST API
        wait_until(lambda: rescaling_to(active, 2), timeout=600, message="the driver rescales")
        active.kill()  # kill -9, its JVMs too, mid-rescale
        published += ks.publish(kafka, source, 300, 60)
        done = wait_until(
            lambda: applied(cluster, job, asked["request_id"]),
            timeout=600,
            message="the standby runs at 2 and reports it",
            interval=0.5,
        )
        finish_exactly_once(standby, kafka, out, published)
    finally:
        for driver in drivers:
            if driver.proc.poll() is None:
                driver.kill()

    stored = record(observer, job)
    assert {op.parallelism for op in stored.graph.operators} == {2}
    assert stored.rescale is not None and stored.rescale.state == "applied"
    storage = CheckpointStorage(str(tmp_path / "checkpoints"))
    latest = max(storage.list_checkpoints(job, completed_only=True))
    assert latest > done["checkpoint_id"] and parallelism_of(storage, job, latest) == {2}
