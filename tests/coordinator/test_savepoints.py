"""Savepoints: a target directory, never subsumed or discarded, outside retention unless
they stop the job; stop-with-savepoint ends triggering for the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkpoint.checkpoint import CheckpointKind, JobStatus
from sparkpoint.coordinator import (
    AbortNotice,
    CheckpointStatus,
    CompletionNotice,
    CoordinatorStoppedError,
    TriggerFailedError,
    TriggerNotice,
    TriggerRejectedError,
)

from .support import make_harness, metadata_path


def test_savepoint_goes_to_its_target_and_outlives_retention(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 2, max_retained=1)
    target = tmp_path / "user-savepoints"
    sid = h.coordinator.trigger_savepoint(str(target))
    [notice] = h.coordinator.drain_notifications()
    assert isinstance(notice, TriggerNotice) and notice.kind is CheckpointKind.SAVEPOINT
    assert Path(notice.directory).parent == target
    result = h.ack_all(sid)
    assert result.status is CheckpointStatus.COMPLETED and result.pointer is not None
    savepoint = result.pointer
    assert savepoint.is_savepoint and metadata_path(savepoint).parent == Path(notice.directory)
    assert h.store.get_all() == []  # savepoints are outside retention
    completions = [
        n for n in h.coordinator.drain_notifications() if isinstance(n, CompletionNotice)
    ]
    assert [c.kind for c in completions] == [CheckpointKind.SAVEPOINT]

    for _ in range(3):  # later checkpoints subsume each other, never the savepoint
        h.ack_all(h.trigger_next())
    assert h.coordinator.close(10)
    assert metadata_path(savepoint).exists()
    assert sid not in h.storage.discarded
    assert h.coordinator.stats.to_dict()["latest"]["savepoint"]["id"] == sid  # type: ignore[index]


def test_savepoint_uses_the_default_directory(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1)
    sid = h.coordinator.trigger_savepoint()
    pointer = h.ack_all(sid).pointer
    assert pointer is not None
    assert metadata_path(pointer).parent.parent == tmp_path / "savepoints"
    assert h.coordinator.close(10)


def test_a_savepoint_that_cannot_be_prepared_raises(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1)
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    with pytest.raises(TriggerFailedError, match="preparing the directory"):
        h.coordinator.trigger_savepoint(str(blocker))
    assert h.coordinator.job_status is JobStatus.RUNNING  # savepoints are not counted
    assert h.coordinator.drain_notifications() == []
    assert h.coordinator.close(10)


def test_a_savepoint_ignores_max_concurrent(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, max_concurrent=1)
    cid = h.trigger_next()
    sid = h.coordinator.trigger_savepoint()
    h.ack_all(sid)
    h.ack_all(cid)  # the savepoint did not subsume the older checkpoint
    assert [p.checkpoint_id for p in h.store.get_all()] == [cid]
    assert h.coordinator.close(10)


def test_stop_with_savepoint_ends_triggering(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, interval_ms=100, max_concurrent=2)
    cid = h.trigger_next()
    sid = h.coordinator.trigger_savepoint(stop=True)
    h.clock.advance(1000)
    assert h.coordinator.tick().triggered is None  # paused while the stop runs
    with pytest.raises(TriggerRejectedError, match="in progress"):
        h.coordinator.trigger_savepoint()
    h.ack_all(sid)
    assert h.coordinator.job_status is JobStatus.FINISHED
    notices = h.coordinator.drain_notifications()
    aborted = [n for n in notices if isinstance(n, AbortNotice)]
    assert [a.checkpoint_id for a in aborted] == [cid]
    assert f"stopped with savepoint {sid}" in aborted[0].reason
    h.clock.advance(10_000)
    assert h.coordinator.tick().triggered is None
    with pytest.raises(TriggerRejectedError, match="FINISHED"):
        h.coordinator.trigger_checkpoint()
    # The stop's savepoint is retained (the sinks committed at it: a job resumed after a
    # leader loss must start there), and like every savepoint it is never discarded.
    assert [(p.checkpoint_id, p.kind) for p in h.store.get_all()] == [
        (sid, CheckpointKind.SAVEPOINT)
    ]
    assert h.coordinator.close(10)
    assert sid not in h.storage.discarded


def test_a_failed_stop_with_savepoint_resumes_triggering(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1, interval_ms=100)
    sid = h.coordinator.trigger_savepoint(stop=True)
    h.clock.advance(100)
    assert h.coordinator.tick().triggered is None
    h.coordinator.decline(sid, "op0", 0, "cannot")
    assert h.coordinator.job_status is JobStatus.RUNNING
    assert h.coordinator.tick().triggered == sid + 1
    assert h.coordinator.close(10)


def test_no_savepoint_after_stop(tmp_path: Path) -> None:
    h = make_harness(tmp_path, 1)
    h.coordinator.stop("leadership lost")
    with pytest.raises(CoordinatorStoppedError):
        h.coordinator.trigger_savepoint()
    assert h.coordinator.close(10)
