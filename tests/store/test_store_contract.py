"""One contract, two implementations: the standalone store and the ZooKeeper store."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer, JobStatus
from sparkpoint.ha import Fence, FencedError, HAError, ZooKeeperConnection, read_epoch
from sparkpoint.ha.fencing import bump_epoch
from sparkpoint.store import (
    CheckpointOrderError,
    CheckpointStoreError,
    CompletedCheckpointStore,
    DuplicateCheckpointError,
    StandaloneCompletedCheckpointStore,
    ZooKeeperCompletedCheckpointStore,
)

JOB = "job-1"


def pointer(checkpoint_id: int, kind: CheckpointKind = CheckpointKind.CHECKPOINT, job: str = JOB):
    return CheckpointPointer(
        job_id=job,
        checkpoint_id=checkpoint_id,
        kind=kind,
        trigger_timestamp_ms=1000 * checkpoint_id,
        completion_timestamp_ms=1000 * checkpoint_id + 5,
        metadata_uri=f"file:///cp/{job}/chk-{checkpoint_id}/_metadata",
        state_size=checkpoint_id,
    )


class Discarded:
    def __init__(self) -> None:
        self.ids: list[int] = []

    def discard(self, p: CheckpointPointer) -> None:
        self.ids.append(p.checkpoint_id)


@pytest.fixture(params=["standalone", "zookeeper"])
def make_store(request: pytest.FixtureRequest, zk_conn: ZooKeeperConnection) -> Iterator[object]:
    def make(max_retained: int = 1) -> CompletedCheckpointStore:
        if request.param == "standalone":
            return StandaloneCompletedCheckpointStore(max_retained)
        fence = Fence(zk_conn, read_epoch(zk_conn))
        return ZooKeeperCompletedCheckpointStore(zk_conn, JOB, fence, max_retained=max_retained)

    yield make


def test_retention_keeps_exactly_the_newest(make_store) -> None:
    store = make_store(3)
    discarded = Discarded()
    subsumed_ids = []
    for i in range(1, 8):
        subsumed_ids += [
            p.checkpoint_id for p in store.add_checkpoint_and_subsume_oldest(pointer(i), discarded)
        ]
    assert [p.checkpoint_id for p in store.get_all()] == [5, 6, 7]
    assert store.get_latest().checkpoint_id == 7
    assert subsumed_ids == discarded.ids == [1, 2, 3, 4]
    assert [p.checkpoint_id for p in store.recover()] == [5, 6, 7]


def test_savepoints_are_never_discarded(make_store) -> None:
    store = make_store(1)
    discarded = Discarded()
    store.add_checkpoint_and_subsume_oldest(pointer(1, CheckpointKind.SAVEPOINT), discarded)
    subsumed = store.add_checkpoint_and_subsume_oldest(pointer(2), discarded)
    assert [p.checkpoint_id for p in subsumed] == [1]
    assert discarded.ids == []


def test_duplicate_and_out_of_order_adds_are_refused(make_store) -> None:
    store = make_store(2)
    store.add_checkpoint_and_subsume_oldest(pointer(5))
    with pytest.raises(DuplicateCheckpointError, match="already"):
        store.add_checkpoint_and_subsume_oldest(pointer(5))
    with pytest.raises(CheckpointOrderError, match="not above"):
        store.add_checkpoint_and_subsume_oldest(pointer(4))
    assert [p.checkpoint_id for p in store.recover()] == [5]


def test_shutdown_keeps_pointers_unless_globally_terminal(make_store, zk_conn) -> None:
    store = make_store(2)
    store.add_checkpoint_and_subsume_oldest(pointer(1))
    store.add_checkpoint_and_subsume_oldest(pointer(2))
    discarded = Discarded()
    if isinstance(store, ZooKeeperCompletedCheckpointStore):
        store.shutdown(JobStatus.SUSPENDED, discarded)
        assert [p.checkpoint_id for p in store.recover()] == [1, 2]
        store.shutdown(JobStatus.CANCELED, discarded)
        assert store.recover() == []
        assert zk_conn.client.exists(zk_conn.paths.job_checkpoints(JOB)) is None
    else:
        store.shutdown(JobStatus.CANCELED, discarded)
        assert store.get_all() == []
    assert discarded.ids == [1, 2]


def _zk_store(
    conn: ZooKeeperConnection, max_retained: int = 2, job: str = JOB
) -> ZooKeeperCompletedCheckpointStore:
    return ZooKeeperCompletedCheckpointStore(
        conn, job, Fence(conn, read_epoch(conn)), max_retained=max_retained
    )


def test_recover_skips_corrupt_and_mislabelled_pointers(
    zk_conn: ZooKeeperConnection, caplog: pytest.LogCaptureFixture
) -> None:
    # A job id of its own: the counter is process-wide, and a coordinator another test ran
    # in this process may end (and so drop the series of) the shared one meanwhile.
    job = "job-unreadable-pointers"
    store = _zk_store(zk_conn, 5, job)
    for i in (1, 2, 3):
        store.add_checkpoint_and_subsume_oldest(pointer(i, job=job))
    paths = zk_conn.paths
    zk_conn.client.set(paths.checkpoint(job, 2), b"\x00garbage")
    zk_conn.client.create(paths.checkpoint(job, 9), pointer(8, job=job).to_bytes())  # wrong id
    zk_conn.client.create(f"{paths.job_checkpoints(job)}/not-an-id", b"{}")
    unreadable = "sparkpoint_store_unreadable_pointers_total"
    before = REGISTRY.get_sample_value(unreadable, {"job_id": job}) or 0

    # The logger named: a drill run in this process quiets this one (cli_drill).
    with caplog.at_level(logging.WARNING, logger="sparkpoint.store.zookeeper"):
        recovered = _zk_store(zk_conn, 5, job).recover()
    assert [p.checkpoint_id for p in recovered] == [1, 3]
    after = REGISTRY.get_sample_value(unreadable, {"job_id": job})
    assert after == before + 3
    assert "skipping unreadable checkpoint pointer" in caplog.text


def test_pointer_vanished_behind_the_stores_back(zk_conn: ZooKeeperConnection) -> None:
    store = _zk_store(zk_conn, 1)
    store.add_checkpoint_and_subsume_oldest(pointer(1))
    zk_conn.client.delete(zk_conn.paths.checkpoint(JOB, 1))
    # The add would delete a pointer that is gone: refused whole, store re-read, nothing added.
    with pytest.raises(CheckpointStoreError, match="nothing was changed"):
        store.add_checkpoint_and_subsume_oldest(pointer(2))
    assert zk_conn.client.exists(zk_conn.paths.checkpoint(JOB, 2)) is None
    assert store.get_all() == []
    store.add_checkpoint_and_subsume_oldest(pointer(2))
    assert [p.checkpoint_id for p in store.recover()] == [2]


def test_recover_lists_again_when_a_newer_checkpoint_subsumes_while_it_reads(
    zk_conn: ZooKeeperConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader adds checkpoint 2 (and removes 1, in one transaction) after a reader
    listed 1 and before it read it: the reader must answer [2], never an empty store."""
    leader = _zk_store(zk_conn, 1)
    leader.add_checkpoint_and_subsume_oldest(pointer(1))
    reader = ZooKeeperCompletedCheckpointStore(zk_conn, JOB, None)
    real_get = zk_conn.client.get
    to_add = [pointer(2)]
    interleaved: list[str] = []

    def get_after_the_leaders_add(path: str, *args: object, **kwargs: object) -> object:
        if to_add:  # the leader's real add, on the real server, between list and read
            interleaved.append(path)
            leader.add_checkpoint_and_subsume_oldest(to_add.pop())
        return real_get(path, *args, **kwargs)

    monkeypatch.setattr(zk_conn.client, "get", get_after_the_leaders_add)
    assert [p.checkpoint_id for p in reader.recover()] == [2]
    assert interleaved == [zk_conn.paths.checkpoint(JOB, 1)]
    to_add.append(pointer(3))
    assert [p.checkpoint_id for p in reader.read_incrementally({})] == [3]
    assert interleaved[-1] == zk_conn.paths.checkpoint(JOB, 2)


def test_deposed_leader_cannot_add(zk_conn: ZooKeeperConnection) -> None:
    epoch = read_epoch(zk_conn)
    store = ZooKeeperCompletedCheckpointStore(zk_conn, JOB, Fence(zk_conn, epoch), max_retained=1)
    store.add_checkpoint_and_subsume_oldest(pointer(1))
    bump_epoch(zk_conn, epoch, b"{}")
    with pytest.raises(FencedError):
        store.add_checkpoint_and_subsume_oldest(pointer(2))
    assert [p.checkpoint_id for p in _zk_store(zk_conn).recover()] == [1]


def test_read_only_store_refuses_writes(zk_conn: ZooKeeperConnection) -> None:
    _zk_store(zk_conn).add_checkpoint_and_subsume_oldest(pointer(1))
    reader = ZooKeeperCompletedCheckpointStore(zk_conn, JOB, None)
    assert [p.checkpoint_id for p in reader.recover()] == [1]
    with pytest.raises(HAError, match="read-only"):
        reader.add_checkpoint_and_subsume_oldest(pointer(2))


def test_wrong_job_is_refused(zk_conn: ZooKeeperConnection) -> None:
    with pytest.raises(CheckpointStoreError, match="job other"):
        _zk_store(zk_conn).add_checkpoint_and_subsume_oldest(pointer(1, job="other"))
