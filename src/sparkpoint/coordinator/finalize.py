"""Finalising a fully acknowledged checkpoint: steps 2 and 3 of DESIGN.md section 4.

Step 2 writes `_metadata` (temporary name, then rename, by storage); step 3 adds the
pointer to the store in one fenced step that also subsumes the oldest retained pointers.
Failures that only fail this checkpoint become :class:`FinalizationFailed`; coordination
errors (fenced, not connected, possibly applied) propagate untouched for the coordinator
to abort the checkpoint and step down.
"""

from __future__ import annotations

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.coordinator.pending import PendingCheckpoint
from sparkpoint.coordinator.storage_api import STORAGE_FAILURES
from sparkpoint.store import (
    CheckpointStoreError,
    CompletedCheckpointStore,
    DuplicateCheckpointError,
)


class FinalizationFailed(Exception):
    """This checkpoint failed; nothing of it is in the store.

    ``discard_location``: its directory is this checkpoint's alone and may be deleted (not
    so when the store already holds a checkpoint with the same id, whose files they are).
    """

    def __init__(self, reason: str, *, discard_location: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.discard_location = discard_location


def write_metadata(pending: PendingCheckpoint, completion_ms: int) -> CheckpointPointer:
    """Commit `_metadata` and return the pointer the store will keep."""
    completed = pending.to_completed(completion_ms)
    try:
        committed = pending.location.commit_metadata(completed)
    except STORAGE_FAILURES as exc:
        raise FinalizationFailed(
            f"writing _metadata of checkpoint {pending.checkpoint_id} failed: {exc}",
            discard_location=True,
        ) from exc
    return CheckpointPointer(
        job_id=completed.job_id,
        checkpoint_id=completed.checkpoint_id,
        kind=completed.kind,
        trigger_timestamp_ms=completed.trigger_timestamp_ms,
        completion_timestamp_ms=completed.completion_timestamp_ms,
        metadata_uri=str(committed.uri),
        state_size=completed.state_size,
        metadata_checksum=str(committed.checksum),
    )


def publish(store: CompletedCheckpointStore, pointer: CheckpointPointer) -> list[CheckpointPointer]:
    """Add ``pointer`` to the store; return the pointers it subsumed.

    No discarder is passed: subsumed files are deleted by the coordinator only after the
    completion notice is queued (step 5 comes after step 4).
    """
    try:
        return store.add_checkpoint_and_subsume_oldest(pointer, None)
    except CheckpointStoreError as exc:
        raise FinalizationFailed(
            f"the store refused checkpoint {pointer.checkpoint_id}: {exc}",
            discard_location=not isinstance(exc, DuplicateCheckpointError),
        ) from exc
