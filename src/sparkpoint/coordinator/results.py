"""What the coordinator's calls report back."""

from __future__ import annotations

from dataclasses import dataclass

from sparkpoint.checkpoint import CheckpointPointer
from sparkpoint.coordinator.pending import CheckpointStatus


@dataclass(frozen=True, slots=True)
class AckResult:
    """What an accepted acknowledgement led to. ``status`` is IN_PROGRESS (``remaining``
    acknowledgements still owed), COMPLETED (``pointer`` is durable in the store, or the
    savepoint's `_metadata` is written) or FAILED (finalisation failed: ``reason``)."""

    checkpoint_id: int
    status: CheckpointStatus
    remaining: int
    pointer: CheckpointPointer | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one ``tick`` did, and when to call it next (None: nothing is scheduled by time
    alone; call again on the service's regular timer)."""

    triggered: int | None
    expired: tuple[int, ...]
    next_tick_ms: int | None
