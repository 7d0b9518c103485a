"""Finalising a fully acknowledged checkpoint: steps 2 to 5 of the completion order
(docs/architecture.md, section 4).

Step 2 writes `_metadata` (temporary name, then rename, by storage); step 3 adds the
pointer to the store in one fenced step that also subsumes the oldest retained pointers;
steps 4 and 5 (completion notice, then deletion of what was subsumed) are the
:class:`~sparkpoint.coordinator.transitions.Transitions`' ``completed``. Failures that only
fail this checkpoint become :class:`FinalizationFailed`; coordination errors (fenced, not
connected, possibly applied) abort the checkpoint and propagate so the service steps down.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.coordinator.errors import CheckpointFinishedError
from sparkpoint.coordinator.pending import CheckpointStatus, PendingCheckpoint
from sparkpoint.coordinator.results import AckResult
from sparkpoint.coordinator.storage_api import STORAGE_FAILURES
from sparkpoint.coordinator.transitions import Transitions
from sparkpoint.ha.errors import HAError, PossiblyAppliedError
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
        checkpointed_size=completed.checkpointed_size,
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


class Finalizer:
    """Runs steps 2 to 5 for one fully acknowledged checkpoint at a time.

    ``finalize_lock`` is held for the whole I/O so pointers reach the store in id order;
    ``lock`` only around the in-memory checks and transitions.
    """

    def __init__(
        self, *, transitions: Transitions, store: CompletedCheckpointStore, clock: Callable[[], int]
    ) -> None:
        self._transitions = transitions
        self._store = store
        self._clock = clock

    def finalize_if_complete(self, checkpoint_id: int | None) -> None:
        """Finalise a checkpoint that needs no acknowledgement (a graph in which no
        operator acknowledges completes as soon as it is triggered)."""
        if checkpoint_id is None:
            return
        with self._transitions.lock:
            try:
                pending = self._transitions.tracker.get(checkpoint_id)
            except CheckpointFinishedError:
                return
            if pending.status is not CheckpointStatus.IN_PROGRESS:
                return
            if not pending.is_fully_acknowledged:
                return
            pending.status = CheckpointStatus.FINALIZING
        self.finalize(pending, time.perf_counter())

    def finalize(self, pending: PendingCheckpoint, started: float) -> AckResult:
        """Finalise ``pending`` (already marked FINALIZING). ``started`` is the
        ``perf_counter`` of the last acknowledgement's arrival, for the finalise metric."""
        transitions, cid = self._transitions, pending.checkpoint_id
        with transitions.finalize_lock:
            with transitions.lock:
                reason = transitions.why_not_finalize(pending)
                if reason is not None:
                    transitions.abort(pending, reason, self._clock())
                    return AckResult(cid, CheckpointStatus.FAILED, 0, reason=reason)
            try:
                pointer = write_metadata(pending, self._clock())
                with transitions.lock:
                    # Checked again right before the store: a coordinator stopped meanwhile
                    # (leadership lost) must not publish.
                    reason = transitions.why_not_finalize(pending)
                    if reason is not None:
                        raise FinalizationFailed(reason, discard_location=True)
                # A stop-with-savepoint enters the store: its completion commits the sinks,
                # so it is where a recovery must start should the job be resumed (a leader
                # lost before the job's end was recorded); an intermediate savepoint commits
                # nothing and stays outside retention.
                retained = not pending.is_savepoint or pending.stop_job
                subsumed = publish(self._store, pointer) if retained else []
            except FinalizationFailed as exc:
                with transitions.lock:
                    transitions.abort(
                        pending,
                        exc.reason,
                        self._clock(),
                        count_failure=not transitions.stopped,
                        discard=exc.discard_location,
                    )
                return AckResult(cid, CheckpointStatus.FAILED, 0, reason=exc.reason)
            except PossiblyAppliedError as exc:
                # The pointer may be in the store: neither completion nor abort is told, and
                # its files stay; the next leader's store recovery decides.
                with transitions.lock:
                    reason = f"outcome of adding checkpoint {cid} to the store is unknown: {exc}"
                    transitions.abort(pending, reason, self._clock(), notify=False, discard=False)
                raise
            except HAError as exc:
                # After PossiblyAppliedError (a subclass, caught above): ZooKeeper refused the
                # write in a reply, or it was never sent. Nothing was written; the files are
                # ours alone.
                with transitions.lock:
                    reason = f"checkpoint {cid} not added to the store: {exc}"
                    transitions.abort(pending, reason, self._clock())
                raise
            except BaseException as exc:
                with transitions.lock:
                    reason = f"finalising checkpoint {cid} failed unexpectedly: {exc!r}"
                    transitions.abort(pending, reason, self._clock(), discard=False)
                raise
            transitions.metrics.finalized(time.perf_counter() - started)
            with transitions.lock:
                transitions.completed(pending, pointer, subsumed, self._clock())
        return AckResult(cid, CheckpointStatus.COMPLETED, 0, pointer=pointer)
