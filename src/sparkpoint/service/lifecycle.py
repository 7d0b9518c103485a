"""The end of a job (docs/architecture.md §11): what goes when no coordinator will
ever resume it.

A job is over for the whole cluster once it is FINISHED (stopped with a savepoint),
CANCELED or FAILED. Its registry record says so first (the term writes it on the status
change); then, in this order, the store's pointers go in one fenced transaction (their
files are deleted in the background: savepoints stay, they belong to the user), then the
job's remaining ``chk-<id>`` directories and the files of its ``shared/`` (incremental
keyed state: no checkpoint of it is left to reference them, and savepoints are always
full), and last the registry record. A leader that dies in between leaves a record that
still says the job is over, and the next leader, on recovery, finishes the removal:
every step is idempotent. A deletion that fails is retried by the term's orphan
collector while the ended job's session lasts (service/orphans.py).

``shared/`` is only emptied of files written before the job ended: a job registered
again under the same id uploads into the same directory, but only after its
registration, which follows the end (and the new run references nothing of the old
one: it starts afresh or from a savepoint).

The checkpoint-id counter stays: a job registered again under the same id is a new
incarnation whose ids continue where the last one's ended. So a deletion queued for an
ended incarnation (a subsumed checkpoint, the sweep below the counter it read) names
only ids that the new incarnation never uses, however late a slow storage runs it.
"""

from __future__ import annotations

import logging
import time

from sparkpoint.checkpoint import CheckpointPointer, JobStatus
from sparkpoint.coordinator.cleanup import Cleanup
from sparkpoint.counter import CheckpointIDCounter
from sparkpoint.ha import HAError
from sparkpoint.storage import CheckpointStorage
from sparkpoint.storage.shared_files import remove_ended_job_shared_files
from sparkpoint.store import CompletedCheckpointStore, JobRegistry

log = logging.getLogger(__name__)


class BackgroundDiscarder:
    """Hands each discard to the cleanup worker, so ending a job never waits on deletes."""

    def __init__(self, cleanup: Cleanup, storage: CheckpointStorage) -> None:
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
    cleanup: Cleanup,
    ended_ms: int | None = None,
) -> None:
    """Remove a globally terminal job's store, files and registry record (its counter
    stays, see the module docstring). ``ended_ms``: when it ended (now by default); the
    shared files written until then go. Coordination errors propagate (the caller steps
    down; the next leader finishes)."""
    if not status.is_globally_terminal:
        raise ValueError(f"job {job_id} is {status.value}, not over: nothing is removed")
    ended = time.time_ns() // 1_000_000 if ended_ms is None else ended_ms
    try:
        next_id: int | None = counter.get()
    except HAError:
        next_id = None  # removed by an earlier release that still removed counters
    store.shutdown(status, BackgroundDiscarder(cleanup, storage))
    if next_id is not None:
        # Nothing of the job is pending or retained any more: every chk-<id> it was given
        # is garbage, whatever its age.
        def sweep(below: int = next_id) -> None:
            storage.collect_orphans(
                job_id, retained_ids=set(), next_checkpoint_id=below, dry_run=False
            )

        cleanup.submit(f"delete the checkpoint directories of ended job {job_id}", sweep)

    def sweep_shared() -> None:
        removed = remove_ended_job_shared_files(storage, job_id, ended_ms=ended)
        log.info("deleted %d shared files of ended job %s", len(removed), job_id)

    cleanup.submit(f"delete the shared files of ended job {job_id}", sweep_shared)
    registry.remove(job_id)
    log.info("job %s is %s: its checkpoints, shared files and registry record are removed "
             "(ids continue if it is registered again)", job_id, status.value)  # fmt: skip
