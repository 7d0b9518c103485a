"""The one rule both store implementations share: what an add may do, what it subsumes."""

from __future__ import annotations

from collections.abc import Sequence

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.store.api import CheckpointOrderError, DuplicateCheckpointError


def check_can_add(retained: Sequence[CheckpointPointer], pointer: CheckpointPointer) -> None:
    """Refuse a duplicate id or an id not above the newest retained one."""
    for existing in retained:
        if existing.checkpoint_id == pointer.checkpoint_id:
            raise DuplicateCheckpointError(
                f"job {pointer.job_id}: checkpoint {pointer.checkpoint_id} is already in the store"
            )
    if retained and pointer.checkpoint_id < retained[-1].checkpoint_id:
        raise CheckpointOrderError(
            f"job {pointer.job_id}: checkpoint {pointer.checkpoint_id} is not above the latest "
            f"retained checkpoint {retained[-1].checkpoint_id}"
        )


def subsumed_by_adding(
    retained: Sequence[CheckpointPointer], max_retained: int
) -> list[CheckpointPointer]:
    """The oldest pointers that fall out when one more is added to ``retained``."""
    overflow = len(retained) + 1 - max_retained
    return list(retained[: max(overflow, 0)])


def validate_max_retained(max_retained: int) -> int:
    if isinstance(max_retained, bool) or not isinstance(max_retained, int) or max_retained < 1:
        raise ValueError(f"max_retained must be an integer >= 1, got {max_retained!r}")
    return max_retained
