"""When a job is over for the whole cluster, its ZooKeeper nodes (store, registry record)
and its checkpoint directories go; its savepoint stays, and so does its id counter (a job
registered again under the same id continues its ids). A leader that died while
removing them leaves the rest to the next one. Real ZooKeeper, real service, real files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkpoint.checkpoint import JobStatus
from sparkpoint.client import Conflict, CoordinatorClient, NotFound
from sparkpoint.counter.zookeeper import encode_count
from sparkpoint.ha import ZooKeeperConnection
from sparkpoint.ops.devcluster.zookeeper import LocalZooKeeper
from sparkpoint.service import Service
from sparkpoint.store import JobRecord
from tests.coordinator.support import keyed_state
from tests.support.waiting import wait_until

from .support import make_graph, start_in_process

JOB = "orders"


def start(tmp_path: Path, quorum: str, cluster_id: str) -> Service:
    return start_in_process(tmp_path, quorum, cluster_id, {"state.checkpoints.num-retained": "2"})


@pytest.fixture
def service(tmp_path: Path, zk_server: LocalZooKeeper, cluster_id: str) -> Iterator[Service]:
    svc = start(tmp_path, zk_server.connect_string, cluster_id)
    yield svc
    svc.stop()


#: What an ended job leaves in ZooKeeper: its counter, so that its ids never repeat.
ENDED = {"registry": False, "counter": True, "store": False}


def job_nodes(conn: ZooKeeperConnection) -> dict[str, bool]:
    paths = {
        "registry": conn.paths.job(JOB),
        "counter": conn.paths.counter(JOB),
        "store": conn.paths.job_checkpoints(JOB),
    }
    return {name: conn.client.exists(path) is not None for name, path in paths.items()}


def test_a_job_stopped_with_a_savepoint_leaves_only_its_savepoint(
    service, observer, tmp_path
) -> None:
    graph = make_graph(JOB)
    acks = [
        (op.uid, i, keyed_state(i, op.parallelism))
        for op in graph.operators
        for i in range(op.parallelism)
    ]
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": 3_600_000})
        for _ in range(3):
            cid = client.trigger_checkpoint(JOB)
            assert client.acknowledge(JOB, cid, acks)["status"] == "completed"
        assert job_nodes(observer) == {"registry": True, "counter": True, "store": True}
        assert sorted(p.name for p in job_dir.glob("chk-*")) == ["chk-2", "chk-3"]

        sid = client.trigger_savepoint(JOB, None, stop=True)
        assert client.acknowledge(JOB, sid, acks)["status"] == "completed"
        assert client.heartbeat(JOB, 0).job_status == JobStatus.FINISHED.value

        wait_until(
            lambda: job_nodes(observer) == ENDED,
            timeout=60,
            message="registry record and store of the finished job removed",
        )
        wait_until(
            lambda: not list(job_dir.glob("chk-*")),
            timeout=60,
            message="the finished job's checkpoint directories deleted",
        )
        (savepoint,) = (tmp_path / "savepoints").glob("savepoint-*")
        assert (savepoint / "_metadata").is_file()
        # The driver still hears how its job ended, and the job id can be used again.
        assert client.heartbeat(JOB, 0).job_status == JobStatus.FINISHED.value
        assert client.register_job(graph, {"interval_ms": 3_600_000})["status"] == "RUNNING"
        assert client.trigger_checkpoint(JOB) > sid  # its ids continue


def test_the_next_leader_finishes_removing_a_job_that_ended(
    tmp_path, zk_server, cluster_id, observer
) -> None:
    # What a leader that died after writing FINISHED, before removing anything, leaves.
    record = JobRecord(make_graph(JOB), {}, JobStatus.FINISHED, "stopped with savepoint 4")
    observer.client.create(observer.paths.job(JOB), record.to_bytes(), makepath=True)
    observer.client.create(observer.paths.counter(JOB), encode_count(5), makepath=True)
    observer.client.create(observer.paths.job_checkpoints(JOB), b"", makepath=True)
    leftover = tmp_path / "checkpoints" / JOB / "chk-3"
    leftover.mkdir(parents=True)
    (leftover / "count-0-0").write_bytes(b"s")

    service = start(tmp_path, zk_server.connect_string, cluster_id)
    try:
        wait_until(
            lambda: job_nodes(observer) == ENDED,
            timeout=60,
            message="the ended job's nodes removed by the new leader",
        )
        wait_until(lambda: not leftover.exists(), timeout=60, message="its chk-3 deleted")
    finally:
        service.stop()


def test_a_cancelled_job_leaves_only_its_id_counter_in_zookeeper(
    service, observer, tmp_path
) -> None:
    graph = make_graph(JOB)
    acks = [
        (op.uid, i, keyed_state(i, op.parallelism))
        for op in graph.operators
        for i in range(op.parallelism)
    ]
    job_dir = tmp_path / "checkpoints" / JOB
    with CoordinatorClient(service.address, retry_for_s=10) as client:
        client.register_job(graph, {"interval_ms": 3_600_000})
        for _ in range(2):
            client.acknowledge(JOB, client.trigger_checkpoint(JOB), acks)
        pending = client.trigger_checkpoint(JOB)
        assert (job_dir / f"chk-{pending}").is_dir()

        reply = client.cancel_job(JOB)
        assert reply == {"job_id": JOB, "status": "CANCELED", "aborted": [pending]}
        wait_until(
            lambda: job_nodes(observer) == ENDED,
            timeout=60,
            message="registry record and store of the cancelled job removed",
        )
        wait_until(
            lambda: not list(job_dir.glob("chk-*")),
            timeout=60,
            message="the cancelled job's checkpoint directories deleted",
        )
        assert client.heartbeat(JOB, 0).job_status == JobStatus.CANCELED.value
        with pytest.raises(Conflict):
            client.acknowledge(JOB, pending, acks)
        assert client.cancel_job(JOB)["aborted"] == []  # again: changes nothing
        with pytest.raises(NotFound):
            client.cancel_job("never-registered")
