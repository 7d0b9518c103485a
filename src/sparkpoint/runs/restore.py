"""The restore plan of a driver run: which checkpoint to restore, and who reads what."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import CheckpointPointer, JobGraph
from sparkpoint.recovery import RestorePlan, plan_restore
from sparkpoint.recovery.loading import (
    LoadedCheckpoint,
    SkippedCheckpoint,
    load_checkpoint,
    load_latest_checkpoint,
)
from sparkpoint.runs.errors import InvalidRequestError
from sparkpoint.runs.messages import Restored
from sparkpoint.runs.session import JobSession
from sparkpoint.storage import CheckpointStorage


@dataclass(frozen=True, slots=True)
class PlannedRestore:
    """``restored`` None: nothing to restore (a first start)."""

    restored: Restored | None
    skipped: tuple[SkippedCheckpoint, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        if self.restored is None:
            return {"restored": None, "plan": None}
        return {
            "restored": {
                "checkpoint_id": self.restored.checkpoint_id,
                "kind": self.restored.kind.value,
                "metadata_uri": self.restored.metadata_uri,
                "skipped": [
                    {
                        "checkpoint_id": s.checkpoint_id,
                        "metadata_uri": s.metadata_uri,
                        "reason": s.reason,
                    }
                    for s in self.skipped
                ],
            },
            "plan": self.restored.plan.to_dict(),
        }


def plan_run_restore(
    session: JobSession,
    storage: CheckpointStorage,
    graph: JobGraph,
    *,
    run_id: str,
    pointer: str | None,
    allow_non_restored_state: bool,
) -> PlannedRestore:
    """Plan the restore of ``session``'s job at ``graph``'s parallelism.

    ``pointer`` None: the newest readable retained checkpoint. Afterwards the job's
    counter is above the restored id, and its coordinator records the restore — which
    also keeps the restored checkpoint's files from the orphan collector until a newer
    checkpoint completes. Raises the recovery errors (validation, unreadable checkpoint),
    and ``SupersededRunError`` when ``run_id`` is not the job's current driver run.
    """
    if graph.job_id != session.job_id:
        raise InvalidRequestError(
            f"the graph is of job {graph.job_id!r}, the request is for job {session.job_id!r}"
        )
    # A coordinator this one replaced settled before this session read the store (the
    # registration waits for it); one that an earlier run of this coordinator fully
    # acknowledged may still be reaching the store, and the plan must see its outcome:
    # restoring an older one would replay what that checkpoint's sink commits.
    session.check_run(run_id)
    session.coordinator.await_finalizations()
    loaded: LoadedCheckpoint | None
    if pointer is None:
        loaded = load_latest_checkpoint(session.store, storage, session.job_id)
    else:
        loaded = load_checkpoint(storage, pointer)
    if loaded is None:
        return PlannedRestore(None)
    checkpoint = loaded.checkpoint
    plan: RestorePlan = plan_restore(checkpoint, graph, allow_non_restored_state)
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
            checkpointed_size=checkpoint.checkpointed_size,
        ),
        int(time.time() * 1000),
    )
    restored = Restored(checkpoint.checkpoint_id, checkpoint.kind, loaded.metadata_uri, plan)
    return PlannedRestore(restored, tuple(loaded.skipped))
