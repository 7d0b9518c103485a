"""Fenced transactions against a real server: the epoch decides, nothing else."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from sparkpoint.ha import ConflictError, Fence, FencedError, Op, ZooKeeperConnection, read_epoch
from sparkpoint.ha.fencing import bump_epoch


def _fenced_total() -> float:
    return REGISTRY.get_sample_value("sparkpoint_fenced_writes_total") or 0.0


def test_write_with_current_epoch_applies(zk_conn: ZooKeeperConnection) -> None:
    epoch = read_epoch(zk_conn)
    fence = Fence(zk_conn, epoch)
    path = f"{zk_conn.paths.base}/probe"
    fence.commit([Op.create(path, b"one")], "test write")
    assert zk_conn.client.get(path)[0] == b"one"


def test_write_after_epoch_moved_is_refused_whole(zk_conn: ZooKeeperConnection) -> None:
    epoch = read_epoch(zk_conn)
    told: list[FencedError] = []
    fence = Fence(zk_conn, epoch, on_fenced=told.append)
    path = f"{zk_conn.paths.base}/probe"
    fence.commit([Op.create(path, b"before")], "first write")

    new_epoch = bump_epoch(zk_conn, epoch, b'{"instance_id": "usurper"}')
    assert new_epoch == epoch + 1
    before = _fenced_total()
    with pytest.raises(FencedError) as caught:
        fence.commit(
            [Op.set(path, b"after"), Op.create(f"{path}-2", b"x")], "write of a deposed leader"
        )
    assert caught.value.expected_epoch == epoch
    assert caught.value.current_epoch == new_epoch
    # Nothing of the transaction landed, the owner was told once, and it was counted.
    assert zk_conn.client.get(path)[0] == b"before"
    assert zk_conn.client.exists(f"{path}-2") is None
    assert len(told) == 1
    assert _fenced_total() == before + 1
    # Once fenced, always fenced: the next write is refused without reaching ZooKeeper.
    with pytest.raises(FencedError):
        fence.commit([Op.set(path, b"again")], "retry")
    assert zk_conn.client.get(path)[0] == b"before"
    assert len(told) == 1


def test_conflict_inside_transaction_changes_nothing(zk_conn: ZooKeeperConnection) -> None:
    fence = Fence(zk_conn, read_epoch(zk_conn))
    path = f"{zk_conn.paths.base}/cas"
    fence.commit([Op.create(path, b"v0")], "create")
    with pytest.raises(ConflictError, match="BadVersionError"):
        fence.commit([Op.create(f"{path}-side", b"x"), Op.set(path, b"v1", version=7)], "stale cas")
    assert zk_conn.client.exists(f"{path}-side") is None
    assert zk_conn.client.get(path)[0] == b"v0"


def test_epoch_bump_is_compare_and_set(zk_conn: ZooKeeperConnection, connect) -> None:
    other = connect()
    seen = read_epoch(zk_conn)
    assert bump_epoch(other, seen, b"{}") == seen + 1
    with pytest.raises(ConflictError):
        bump_epoch(zk_conn, seen, b"{}")  # at most one contender wins a given epoch
