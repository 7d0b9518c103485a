"""Pending checkpoints by id, and a bounded memory of finished ones.

Remembering how recent checkpoints ended lets a late acknowledgement be told "finished"
(a 409 for the REST layer) rather than "unknown" (a 404), without keeping every id forever.
"""

from __future__ import annotations

from collections import OrderedDict

from sparkpoint.coordinator.errors import CheckpointFinishedError, UnknownCheckpointError
from sparkpoint.coordinator.pending import CheckpointStatus, PendingCheckpoint

#: How many finished checkpoint ids are remembered by their outcome.
FINISHED_MEMORY = 1024


class CheckpointTracker:
    """Not thread-safe: the coordinator guards it with its lock."""

    def __init__(self, job_id: str) -> None:
        self._job_id = job_id
        self._pending: dict[int, PendingCheckpoint] = {}
        self._finished: OrderedDict[int, CheckpointStatus] = OrderedDict()
        self._lowest_triggered: int | None = None
        self._highest_triggered: int | None = None

    def add(self, pending: PendingCheckpoint) -> None:
        cid = pending.checkpoint_id
        self._pending[cid] = pending
        self._lowest_triggered = cid if self._lowest_triggered is None else self._lowest_triggered
        self._highest_triggered = max(cid, self._highest_triggered or cid)

    def note_triggered_id(self, checkpoint_id: int, status: CheckpointStatus) -> None:
        """An id used up by a trigger that failed before becoming pending."""
        if self._lowest_triggered is None:
            self._lowest_triggered = checkpoint_id
        self._highest_triggered = max(checkpoint_id, self._highest_triggered or checkpoint_id)
        self._remember(checkpoint_id, status)

    def finish(self, checkpoint_id: int, status: CheckpointStatus) -> PendingCheckpoint | None:
        """Forget a pending checkpoint and remember how it ended."""
        pending = self._pending.pop(checkpoint_id, None)
        if pending is not None:
            pending.status = status
        self._remember(checkpoint_id, status)
        return pending

    def get(self, checkpoint_id: int) -> PendingCheckpoint:
        """The pending checkpoint, or the typed reason why there is none."""
        if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int):
            raise UnknownCheckpointError(
                f"job {self._job_id}: checkpoint id {checkpoint_id!r} is not an integer"
            )
        pending = self._pending.get(checkpoint_id)
        if pending is not None:
            return pending
        status = self._finished.get(checkpoint_id)
        if status is None and self._was_triggered_here(checkpoint_id):
            status = CheckpointStatus.FAILED  # finished so long ago its outcome is forgotten
        if status is not None:
            raise CheckpointFinishedError(
                f"job {self._job_id}: checkpoint {checkpoint_id} already finished ({status.value})",
                checkpoint_id=checkpoint_id,
                status=status.value,
            )
        raise UnknownCheckpointError(
            f"job {self._job_id}: no checkpoint {checkpoint_id} was triggered by this coordinator",
            checkpoint_id=checkpoint_id,
        )

    def pending(self) -> list[PendingCheckpoint]:
        """Pending checkpoints, oldest first."""
        return [self._pending[cid] for cid in sorted(self._pending)]

    def __len__(self) -> int:
        return len(self._pending)

    def _remember(self, checkpoint_id: int, status: CheckpointStatus) -> None:
        self._finished[checkpoint_id] = status
        while len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)

    def _was_triggered_here(self, checkpoint_id: int) -> bool:
        low, high = self._lowest_triggered, self._highest_triggered
        return low is not None and high is not None and low <= checkpoint_id <= high
