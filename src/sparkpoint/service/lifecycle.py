"""The end of a job (docs/architecture.md §11): what goes when no coordinator will
ever resume it.

A job is over for the whole cluster once it is FINISHED (stopped with a savepoint),
CANCELED or FAILED. Its registry record says so first (the term writes it on the status
change); then, in this order, the store's pointers go in one fenced transaction (their
files are deleted in the background: savepoints stay, they belong to the user), then the
job's remaining ``chk-<id>`` directories, then the counter, and last the registry record.
A leader that dies in between leaves a record that still says the job is over, and the
next leader, on recovery, finishes the removal: every step is idempotent.
"""

from __future__ import annotations

import logging

from sparkpoint.checkpoint import CheckpointPointer, JobStatus
from sparkpoint.coordinator import CleanupWorker
from sparkpoint.counter import CheckpointIDCounter
from sparkpoint.ha import HAError
from sparkpoint.storage import CheckpointStorage
from sparkpoint.store import CompletedCheckpointStore, JobRegistry

log = logging.getLogger(__name__)


class BackgroundDiscarder:
    """Hands each discard to the cleanup worker, so ending a job never waits on deletes."""

    def __init__(self, cleanup: CleanupWorker, storage: CheckpointStorage) -> None:
        self._cleanup = cleanup
        self._storage = storage

    def discard(self, pointer: CheckpointPointer) -> None:
        self._cleanup.discard_checkpoint(self._storage, pointer)


def end_job(
    job_id: str,
    status: JobStatus,
    *,
    store: CompletedCheckpointStore,
    counter: CheckpointIDCounter,
    registry: JobRegistry,
    storage: CheckpointStorage,
    cleanup: CleanupWorker,
) -> None:
    """Remove a globally terminal job's store, files, counter and registry record.
    Coordination errors propagate (the caller steps down; the next leader finishes)."""
    if not status.is_globally_terminal:
        raise ValueError(f"job {job_id} is {status.value}, not over: nothing is removed")
    try:
        next_id: int | None = counter.get()
    except HAError:
        next_id = None  # already removed by an earlier, interrupted end
    store.shutdown(status, BackgroundDiscarder(cleanup, storage))
    if next_id is not None:
        # Nothing of the job is pending or retained any more: every chk-<id> it was given
        # is garbage, whatever its age.
        def sweep(below: int = next_id) -> None:
            storage.collect_orphans(
                job_id, retained_ids=set(), next_checkpoint_id=below, dry_run=False
            )

        cleanup.submit(f"delete the checkpoint directories of ended job {job_id}", sweep)
    counter.shutdown(status)
    registry.remove(job_id)
    log.info("job %s is %s: its checkpoints, counter and registry record are removed",
             job_id, status.value)  # fmt: skip
