"""Coordination errors from the counter or the store never produce a completion: the
checkpoint is aborted and the error propagates so the service can step down."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sparkpoint.checkpoint import CompletedCheckpoint, JobStatus
from sparkpoint.coordinator import (
    AbortNotice,
    CheckpointFinishedError,
    CheckpointStatus,
    CompletionNotice,
    CoordinatorStoppedError,
    TriggerNotice,
)
from sparkpoint.ha.errors import FencedError, NotConnectedError, PossiblyAppliedError
from sparkpoint.storage import CheckpointLocation, CommittedMetadata

from .support import Harness, RecordingStorage, keyed_state, make_harness, metadata_path


def _fenced() -> FencedError:
    return FencedError("leader epoch moved on", expected_epoch=3, current_epoch=4)


def _ack_last(h: Harness, cid: int):  # type: ignore[no-untyped-def]
    uid, i = sorted(h.graph.acknowledging_subtasks)[-1]
    return h.coordinator.acknowledge(cid, uid, i, keyed_state(i, h.graph.operator(uid).parallelism))


@pytest.mark.parametrize(
    "error",
    [_fenced(), NotConnectedError("no quorum"), PossiblyAppliedError("dropped mid-write")],
)
def test_a_failing_counter_creates_no_checkpoint(harness: Harness, error: Exception) -> None:
    h = harness
    h.counter.fail_with = error  # type: ignore[assignment]
    h.clock.advance(1000)
    with pytest.raises(type(error)):
        h.coordinator.tick()
    assert h.coordinator.pending_checkpoint_ids() == []
    assert h.coordinator.drain_notifications() == []
    assert h.checkpoint_dirs() == []
    with pytest.raises(type(error)):
        h.coordinator.trigger_savepoint()
    assert h.coordinator.job_status is JobStatus.RUNNING  # not the job's fault


@pytest.mark.parametrize("error", [_fenced(), NotConnectedError("ZooKeeper unreachable")])
def test_a_refused_store_write_aborts_and_propagates(harness: Harness, error: Exception) -> None:
    h = harness
    cid = h.trigger_next()
    h.ack_all(cid, skip=1)
    h.store.fail_with = error  # type: ignore[assignment]
    with pytest.raises(type(error)):
        _ack_last(h, cid)
    assert h.store.get_all() == []
    notices = h.coordinator.drain_notifications()
    assert not any(isinstance(n, CompletionNotice) for n in notices)
    assert isinstance(notices[-1], AbortNotice) and notices[-1].checkpoint_id == cid
    with pytest.raises(CheckpointFinishedError):
        _ack_last(h, cid)
    assert h.coordinator.stats.to_dict()["counts"]["completed"] == 0  # type: ignore[index]
    assert h.coordinator.job_status is JobStatus.RUNNING
    assert h.coordinator.cleanup.wait_idle(10)
    assert h.checkpoint_dirs() == []  # nothing refers to it: deleted


def test_possibly_applied_neither_completes_nor_aborts(harness: Harness) -> None:
    h = harness
    cid = h.trigger_next()
    h.ack_all(cid, skip=1)
    h.store.fail_with = PossiblyAppliedError("connection lost during the transaction")
    h.store.apply_first = True
    with pytest.raises(PossiblyAppliedError):
        _ack_last(h, cid)
    [pointer] = h.store.get_all()  # it did land; the next leader's recovery will see it
    notices = h.coordinator.drain_notifications()
    assert not any(isinstance(n, CompletionNotice | AbortNotice) for n in notices)
    assert h.coordinator.pending_checkpoint_ids() == []
    assert h.coordinator.cleanup.wait_idle(10)
    assert metadata_path(pointer).exists()  # its files are kept


def test_stop_aborts_every_pending_checkpoint(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 2, max_concurrent=3)
    ids = [h.trigger_next() for _ in range(3)]
    h.coordinator.drain_notifications()
    assert h.coordinator.stop("leadership lost") == ids
    assert h.coordinator.job_status is JobStatus.SUSPENDED
    aborts = h.coordinator.drain_notifications()
    assert [(a.checkpoint_id, a.reason) for a in aborts] == [  # type: ignore[union-attr]
        (i, "leadership lost") for i in ids
    ]
    with pytest.raises(CoordinatorStoppedError):
        h.coordinator.acknowledge(ids[0], "op0", 0, keyed_state(0, 2))
    h.clock.advance(10_000)
    assert h.coordinator.tick().triggered is None
    assert h.coordinator.stop() == []  # idempotent
    assert h.coordinator.close(10)
    assert h.store.get_all() == [] and h.checkpoint_dirs() == []


class _GatedLocation:
    """A real location whose `_metadata` commit waits until the test opens the gate."""

    def __init__(self, inner: CheckpointLocation, storage: _GatedStorage) -> None:
        self._inner, self._storage = inner, storage
        self.directory, self.metadata_uri = inner.directory, inner.metadata_uri

    def commit_metadata(self, checkpoint: CompletedCheckpoint) -> CommittedMetadata:
        self._storage.entered.set()
        assert self._storage.gate.wait(30)
        return self._inner.commit_metadata(checkpoint)

    def discard(self) -> None:
        self._inner.discard()


class _GatedStorage(RecordingStorage):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.entered, self.gate = threading.Event(), threading.Event()

    def init_checkpoint(self, job_id: str, checkpoint_id: int) -> CheckpointLocation:
        location = super().init_checkpoint(job_id, checkpoint_id)
        return _GatedLocation(location, self)  # type: ignore[return-value]


def test_stop_during_finalisation_keeps_the_checkpoint_out_of_the_store(tmp_path: Path) -> None:
    # The service stops coordinators from its leadership thread while a request thread may
    # be finalising: the only place this design needs two threads.
    storage = _GatedStorage(tmp_path / "checkpoints")
    h = make_harness(tmp_path, 2, 3, storage=storage)
    cid = h.trigger_next()
    h.ack_all(cid, skip=1)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(_ack_last(h, cid)))
    worker.start()
    assert storage.entered.wait(30)
    assert h.coordinator.stop("leadership lost") == []  # finalising: left to its finaliser
    storage.gate.set()
    worker.join(30)
    [result] = results
    assert result.status is CheckpointStatus.FAILED  # type: ignore[attr-defined]
    assert h.store.get_all() == []
    kinds = [type(n) for n in h.coordinator.drain_notifications()]
    assert kinds == [TriggerNotice, AbortNotice]
    assert h.coordinator.close(10)
    assert h.checkpoint_dirs() == []
