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
        self._finished: OrderedDict[int, tuple[CheckpointStatus, str | None]] = OrderedDict()

    def add(self, pending: PendingCheckpoint) -> None:
        self._pending[pending.checkpoint_id] = pending

    def note_triggered_id(self, checkpoint_id: int, reason: str) -> None:
        """An id used up by a trigger that failed before becoming pending."""
        self._remember(checkpoint_id, CheckpointStatus.FAILED, reason)

    def finish(
        self, checkpoint_id: int, status: CheckpointStatus, reason: str | None = None
    ) -> PendingCheckpoint | None:
        """Forget a pending checkpoint and remember how it ended (and why, if it failed)."""
        pending = self._pending.pop(checkpoint_id, None)
        if pending is not None:
            pending.status = status
        self._remember(checkpoint_id, status, reason)
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
        finished = self._finished.get(checkpoint_id)
        if finished is not None:
            status, reason = finished
            why = f": {reason}" if reason else ""
            raise CheckpointFinishedError(
                f"job {self._job_id}: checkpoint {checkpoint_id} already finished "
                f"({status.value}{why})",
                checkpoint_id=checkpoint_id,
                status=status.value,
            )
        # Also the answer for an id finished so long ago that its outcome was forgotten.
        raise UnknownCheckpointError(
            f"job {self._job_id}: checkpoint {checkpoint_id} is not known to this coordinator",
            checkpoint_id=checkpoint_id,
        )

    def pending(self) -> list[PendingCheckpoint]:
        """Pending checkpoints, oldest first."""
        return [self._pending[cid] for cid in sorted(self._pending)]

    def __len__(self) -> int:
        return len(self._pending)

    def _remember(self, checkpoint_id: int, status: CheckpointStatus, reason: str | None) -> None:
        self._finished[checkpoint_id] = (status, reason)
        while len(self._finished) > FINISHED_MEMORY:
            self._finished.popitem(last=False)
