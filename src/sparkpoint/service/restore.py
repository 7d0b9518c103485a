"""The restore-plan request: which checkpoint to restore, and who reads what from it."""

from __future__ import annotations

import time
from typing import Any

from sparkpoint.checkpoint import CheckpointPointer, JobGraph
from sparkpoint.recovery import plan_restore
from sparkpoint.recovery.loading import LoadedCheckpoint, load_checkpoint, load_latest_checkpoint
from sparkpoint.service.errors import InvalidRequestError
from sparkpoint.service.session import JobSession
from sparkpoint.storage import CheckpointStorage


def restore_plan(
    session: JobSession,
    storage: CheckpointStorage,
    graph: JobGraph,
    *,
    run_id: str,
    pointer: str | None,
    allow_non_restored_state: bool,
) -> dict[str, Any]:
    """Plan the restore of ``session``'s job at ``graph``'s parallelism.

    ``pointer`` None: the newest readable retained checkpoint (None when there is none:
    a first start). Afterwards the job's counter is above the restored id and its stats
    record the restore. Raises the recovery errors (validation, unreadable checkpoint), and
    ``SupersededRunError`` when ``run_id`` is not the job's current driver run.
    """
    if graph.job_id != session.job_id:
        raise InvalidRequestError(
            f"the graph is of job {graph.job_id!r}, the request is for job {session.job_id!r}"
        )
    # The run's registration aborted what earlier runs left pending; one an earlier run
    # fully acknowledged may still be reaching the store, and the restore must see it:
    # restoring an older one would replay what that checkpoint's sink commits.
    session.check_run(run_id)
    session.coordinator.await_finalizations()
    loaded: LoadedCheckpoint | None
    if pointer is None:
        loaded = load_latest_checkpoint(session.store, storage, session.job_id)
    else:
        loaded = load_checkpoint(storage, pointer)
    if loaded is None:
        return {"restored": None, "plan": None}
    checkpoint = loaded.checkpoint
    plan = plan_restore(checkpoint, graph, allow_non_restored_state)
    session.coordinator.set_counter_above(checkpoint.checkpoint_id)
    session.coordinator.record_restored(
        CheckpointPointer(
            job_id=checkpoint.job_id,
            checkpoint_id=checkpoint.checkpoint_id,
            kind=checkpoint.kind,
            trigger_timestamp_ms=checkpoint.trigger_timestamp_ms,
            completion_timestamp_ms=checkpoint.completion_timestamp_ms,
            metadata_uri=loaded.metadata_uri,
            state_size=checkpoint.state_size,
        ),
        int(time.time() * 1000),
    )
    return {
        "restored": {
            "checkpoint_id": checkpoint.checkpoint_id,
            "kind": checkpoint.kind.value,
            "metadata_uri": loaded.metadata_uri,
            "skipped": [
                {
                    "checkpoint_id": s.checkpoint_id,
                    "metadata_uri": s.metadata_uri,
                    "reason": s.reason,
                }
                for s in loaded.skipped
            ],
        },
        "plan": plan.to_dict(),
    }
