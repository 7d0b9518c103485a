"""The restore plan of a driver run: which checkpoint to restore, and who reads what."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer, CompletedCheckpoint, JobGraph
from sparkpoint.recovery import RestorePlan, plan_restore
from sparkpoint.recovery.loading import (
    LoadedCheckpoint,
    SkippedCheckpoint,
    load_checkpoint,
    load_latest_checkpoint,
)
from sparkpoint.runs.errors import InvalidRequestError
from sparkpoint.runs.messages import Restored, RestoreMode
from sparkpoint.runs.session import JobSession
from sparkpoint.storage import CheckpointStorage
from sparkpoint.storage.uri import parse


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
                "claimed": self.restored.claimed,
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
    mode: RestoreMode | None = None,
) -> PlannedRestore:
    """Plan the restore of ``session``'s job at ``graph``'s parallelism.

    ``pointer`` None: the newest readable retained checkpoint. ``mode`` None: claim that
    one, restore a given pointer with no-claim (:func:`check_claimable`). Afterwards the
    job's counter is above the restored id, and its coordinator records the restore — which
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
    if mode is None:
        mode = RestoreMode.CLAIM if pointer is None else RestoreMode.NO_CLAIM
    claimed = mode is RestoreMode.CLAIM
    # The job's own store lists only the job's own checkpoints: the latest one is its own.
    if claimed and pointer is not None:
        check_claimable(checkpoint, loaded.metadata_uri, storage, session.job_id)
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
    restored = Restored(
        checkpoint.checkpoint_id, checkpoint.kind, loaded.metadata_uri, plan, claimed
    )
    return PlannedRestore(restored, tuple(loaded.skipped))


def check_claimable(
    checkpoint: CompletedCheckpoint, metadata_uri: str, storage: CheckpointStorage, job_id: str
) -> None:
    """Refuse to let job ``job_id`` claim ``checkpoint`` unless it is one of its own.

    Only a checkpoint of the job itself, in the job's own checkpoint directory, can be
    claimed: a job's collector counts only its own checkpoints' references to its own
    ``shared/``, so a checkpoint that went on from another job's files (or from this job's
    in another directory) would lose them to that job's collector. The error names both.
    """
    own_directory = storage.job_directory(job_id)
    if (
        checkpoint.kind is CheckpointKind.CHECKPOINT
        and checkpoint.job_id == job_id
        and parse(metadata_uri).is_under(parse(own_directory))
    ):
        return
    what = "savepoint" if checkpoint.kind is CheckpointKind.SAVEPOINT else "checkpoint"
    raise InvalidRequestError(
        f"restore mode claim: {metadata_uri} is a {what} of job {checkpoint.job_id!r}, not "
        f"one of job {job_id!r} in its own checkpoint directory {own_directory}; job "
        f"{job_id!r} cannot own its files (they stay job {checkpoint.job_id!r}'s, whose "
        f"collector may delete them): restore it with restore mode {RestoreMode.NO_CLAIM.value}"
    )
