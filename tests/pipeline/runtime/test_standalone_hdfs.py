"""The shape users run in production: a real Spark standalone cluster (a Master and two
Workers from pyspark's own ``spark-class``, each Worker in a network namespace of its
own), the HA coordinator on the real ZooKeeper, checkpoints on a real HDFS. A Worker and
its executor are killed with SIGKILL mid-run; the job goes on with the other one, its
checkpoints keep completing on HDFS, and the output is exactly once."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.config import load_config
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.service import Service, start_service
from sparkpoint.storage import CheckpointStorage
from tests.pipeline import processes, support
from tests.support.hdfs import own_cluster
from tests.support.standalone import StandaloneCluster, Worker, standalone_cluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

JOB = "clicks"  # run_clicks's default job id
#: Enough users that each subtask's state is above the inline threshold: the executors
#: in the namespaces write their state files to HDFS themselves.
USERS = 2000
PER_SPLIT = 800


def frozen_mid_task(worker: Worker) -> set[int]:
    """Freeze the Worker and its executor (SIGSTOP); keep them frozen only if a task is
    in flight there, so the kill that follows lands in the middle of an epoch's task."""
    worker.signal(signal.SIGSTOP)
    running = worker.tasks_in_flight()
    if not running:
        worker.signal(signal.SIGCONT)
    return running


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    with standalone_cluster(tmp_path / "spark", workers=2) as cluster:
        yield cluster


@pytest.fixture
def checkpoint_dir(tmp_path: Path, spark_cluster: StandaloneCluster) -> Iterator[str]:
    """A directory on an HDFS of the test's own, bound where the namespaces reach it."""
    with own_cluster(
        tmp_path / "hdfs", host=spark_cluster.address, datanodes=2, replication=2
    ) as hdfs:
        yield f"{hdfs.webhdfs_uri}/tmp/ckpt"


@pytest.fixture
def service(zk_server: LocalZooKeeper, cluster_id: str, checkpoint_dir: str) -> Iterator[Service]:
    config = load_config(
        overrides={
            "high-availability.zookeeper.quorum": zk_server.connect_string,
            "high-availability.cluster-id": cluster_id,
            "rest.port": "0",
            "rest.auth.enabled": "false",
            "state.checkpoints.dir": checkpoint_dir,
            # Few retained: discards on HDFS run all along, and must agree with ZooKeeper.
            "state.checkpoints.num-retained": "3",
            # A checkpoint the lost executor was taking is declined, not fatal.
            "execution.checkpointing.tolerable-failed-checkpoints": "5",
        },
        environ={},
    )
    service = start_service(config)
    try:
        wait_until(service.replica.is_ready, timeout=30, message="the coordinator leads")
        yield service
    finally:
        service.stop()


def test_worker_killed_mid_run_on_a_standalone_cluster_with_hdfs(
    tmp_path: Path,
    spark_cluster: StandaloneCluster,
    service: Service,
    checkpoint_dir: str,
    observer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The driver binds and advertises the address the executors in the namespaces reach.
    monkeypatch.setenv("SPARK_LOCAL_IP", spark_cluster.address)
    work = tmp_path / "job"
    driver = processes.start_driver(
        work,
        "--coordinator", service.address.split("://", 1)[1],
        "--users", str(USERS),
        master=spark_cluster.master_url,
        per_split=PER_SPLIT,
    )  # fmt: skip
    try:
        wait_until(
            lambda: (
                (driver.latest().get("last_completed") or 0) >= 1
                and all(processes.executor_pids(w.proc.pid) for w in spark_cluster.workers)
            ),
            timeout=240,
            message="a checkpoint on HDFS, an executor on each Worker",
        )
        victim = spark_cluster.workers[0]
        wait_until(
            lambda: frozen_mid_task(victim),
            timeout=120,
            message="a task of the job in flight on the victim's executor",
        )
        before = driver.latest()
        victim.kill()  # the Worker JVM, its executor and that executor's Python workers
        assert driver.proc.poll() is None, "the driver must not have stopped"
        wait_until(
            lambda: (driver.latest().get("last_completed") or 0) > before["last_completed"],
            timeout=240,
            message="checkpoints completing again on the surviving Worker",
        )
        assert driver.wait(timeout=300) == 0, driver.log.read_text()[-4000:]
    finally:
        if driver.proc.poll() is None:
            driver.kill()
    final = driver.latest()
    assert final.get("event") == "finished" and final["epoch"] > before["epoch"]
    starts = [r for r in driver.reports() if r.get("event") == "started"]
    assert len(starts) == 1 and starts[0]["restored_from"] is None  # the same run went on
    assert processes.committed(work / "out") == processes.expected(PER_SPLIT, USERS)
    assert support.retained(observer, JOB)
    # Each retained checkpoint names state files (the executors in the namespaces wrote
    # them to HDFS), all there at their sizes; no other checkpoint has a `_metadata`.
    storage = CheckpointStorage(checkpoint_dir)
    support.assert_hdfs_matches_zookeeper(storage, observer, JOB)
    # The check can fail: a state file of a retained checkpoint gone from HDFS is caught.
    latest = max(support.retained(observer, JOB))
    [first, *_] = storage.verify(storage.read_metadata(storage.checkpoint_directory(JOB, latest)))
    storage.filesystem(first.path).delete(first.path)
    with pytest.raises(AssertionError):
        support.assert_hdfs_matches_zookeeper(storage, observer, JOB)
