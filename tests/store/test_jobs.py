"""The job registry in ZooKeeper: fenced writes, readable by anyone."""

from __future__ import annotations

import pytest

from sparkpoint.checkpoint import JobGraph, JobStatus, OperatorSpec
from sparkpoint.ha import Fence, FencedError, ZooKeeperConnection, read_epoch
from sparkpoint.ha.fencing import bump_epoch
from sparkpoint.store import JobRecord, StandaloneJobRegistry, ZooKeeperJobRegistry


def record(job_id: str) -> JobRecord:
    graph = JobGraph(job_id, (OperatorSpec("src", 2, 128), OperatorSpec("sum", 4, 128, keyed=True)))
    return JobRecord(graph=graph, checkpoint_config={"interval": "10 s"})


@pytest.mark.parametrize("kind", ["standalone", "zookeeper"])
def test_put_get_list_remove(kind: str, zk_conn: ZooKeeperConnection) -> None:
    registry = (
        StandaloneJobRegistry()
        if kind == "standalone"
        else ZooKeeperJobRegistry(zk_conn, Fence(zk_conn, read_epoch(zk_conn)))
    )
    registry.put(record("b"))
    registry.put(record("a"))
    registry.put(record("a").with_status(JobStatus.FAILING, "too many failed checkpoints"))
    assert [r.job_id for r in registry.list()] == ["a", "b"]
    got = registry.get("a")
    assert got is not None and got.status is JobStatus.FAILING
    assert got.graph == record("a").graph
    registry.remove("a")
    registry.remove("a")
    assert registry.get("a") is None


@pytest.mark.parametrize("kind", ["standalone", "zookeeper"])
def test_job_ids_name_every_registered_job_in_order(
    kind: str, zk_conn: ZooKeeperConnection
) -> None:
    registry = (
        StandaloneJobRegistry()
        if kind == "standalone"
        else ZooKeeperJobRegistry(zk_conn, Fence(zk_conn, read_epoch(zk_conn)))
    )
    assert registry.job_ids() == []
    registry.put(record("b"))
    registry.put(record("a"))
    assert registry.job_ids() == ["a", "b"]
    registry.remove("a")
    assert registry.job_ids() == ["b"]


def test_deposed_leader_cannot_register(zk_conn: ZooKeeperConnection) -> None:
    epoch = read_epoch(zk_conn)
    registry = ZooKeeperJobRegistry(zk_conn, Fence(zk_conn, epoch))
    bump_epoch(zk_conn, epoch, b"{}")
    with pytest.raises(FencedError):
        registry.put(record("x"))
    assert ZooKeeperJobRegistry(zk_conn, None).list() == []


def test_unreadable_job_record_is_skipped_and_reported(zk_conn: ZooKeeperConnection) -> None:
    registry = ZooKeeperJobRegistry(zk_conn, Fence(zk_conn, read_epoch(zk_conn)))
    registry.put(record("good"))
    zk_conn.client.create(zk_conn.paths.job("bad"), b"{nope")
    assert [r.job_id for r in registry.list()] == ["good"]
    assert registry.unreadable == [zk_conn.paths.job("bad")]
