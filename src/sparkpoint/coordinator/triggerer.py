"""Creating a checkpoint: an id from the counter, a directory from storage, a pending
checkpoint and its trigger notice."""

from __future__ import annotations

from sparkpoint.checkpoint import CheckpointKind, JobGraph
from sparkpoint.coordinator.errors import CoordinatorStoppedError, TriggerFailedError
from sparkpoint.coordinator.options import CheckpointingOptions
from sparkpoint.coordinator.pending import PendingCheckpoint
from sparkpoint.coordinator.storage_api import STORAGE_FAILURES, CheckpointStorageLike
from sparkpoint.coordinator.transitions import Transitions
from sparkpoint.coordinator.trigger_rules import next_due_after_trigger
from sparkpoint.counter import CheckpointIDCounter


class Triggerer:
    """Starts checkpoints; the caller holds the transitions' ``trigger_lock`` (but not ``lock``,
    which is taken here only around in-memory changes, never across the I/O)."""

    def __init__(
        self,
        *,
        graph: JobGraph,
        options: CheckpointingOptions,
        counter: CheckpointIDCounter,
        storage: CheckpointStorageLike,
        transitions: Transitions,
    ) -> None:
        self._graph = graph
        self._options = options
        self._counter = counter
        self._storage = storage
        self._transitions = transitions

    def create(
        self,
        kind: CheckpointKind,
        now: int,
        *,
        periodic: bool = False,
        target_dir: str | None = None,
        stop_job: bool = False,
    ) -> PendingCheckpoint | None:
        """Create one checkpoint. Ids come only from the counter: its coordination errors
        propagate and no checkpoint exists then. A periodic checkpoint whose directory
        cannot be prepared is a counted failure (None is returned); a requested one raises
        :class:`TriggerFailedError`."""
        job_id, transitions = self._graph.job_id, self._transitions
        checkpoint_id = self._counter.get_and_increment()
        try:
            if kind is CheckpointKind.SAVEPOINT:
                location = self._storage.init_savepoint(job_id, target_dir)
            else:
                location = self._storage.init_checkpoint(job_id, checkpoint_id)
        except STORAGE_FAILURES as exc:
            reason = f"preparing the directory of checkpoint {checkpoint_id} failed: {exc}"
            with transitions.lock:
                transitions.trigger_failed(checkpoint_id, kind, now, reason, periodic=periodic)
                if periodic:
                    transitions.next_due_ms = next_due_after_trigger(self._options, now)
            if periodic:
                return None
            raise TriggerFailedError(f"job {job_id}: {reason}") from exc
        pending = PendingCheckpoint(
            graph=self._graph,
            checkpoint_id=checkpoint_id,
            kind=kind,
            trigger_timestamp_ms=now,
            location=location,
            stop_job=stop_job,
        )
        with transitions.lock:
            if transitions.stopped:  # stopped while the directory was being prepared
                transitions.cleanup.submit(f"discard checkpoint {checkpoint_id}", location.discard)
                if periodic:
                    return None
                raise CoordinatorStoppedError(f"job {job_id}: the coordinator was stopped")
            transitions.triggered(pending, str(location.directory))
            if periodic:
                transitions.next_due_ms = next_due_after_trigger(self._options, now)
        return pending
