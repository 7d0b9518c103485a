"""When the next periodic checkpoint may start: a pure decision over a snapshot of state.

Kept free of I/O and clocks so every rule (interval, minimum pause, maximum concurrent) is
tested with plain numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sparkpoint.coordinator.options import CheckpointingOptions
from sparkpoint.coordinator.pending import CheckpointStatus, PendingCheckpoint


@dataclass(frozen=True, slots=True)
class TriggerState:
    """What the decision needs to know, in milliseconds of the coordinator's clock."""

    now_ms: int
    next_due_ms: int
    pending_periodic: int
    last_completion_ms: int | None


@dataclass(frozen=True, slots=True)
class TriggerDecision:
    """``trigger``: start one now. Otherwise ``reason`` says why not and ``retry_at_ms``
    when the answer may change by time alone (``None``: only when a checkpoint finishes)."""

    trigger: bool
    reason: str
    retry_at_ms: int | None


def decide(options: CheckpointingOptions, state: TriggerState) -> TriggerDecision:
    """Apply Flink's periodic-trigger rules in Flink's order.

    >>> opts = CheckpointingOptions(interval_ms=1000, min_pause_ms=300)
    >>> decide(opts, TriggerState(1000, 1000, 0, 900))
    TriggerDecision(trigger=False, reason='minimum pause', retry_at_ms=1200)
    """
    if state.now_ms < state.next_due_ms:
        return TriggerDecision(False, "not due", state.next_due_ms)
    if state.pending_periodic >= options.max_concurrent:
        return TriggerDecision(False, "too many concurrent checkpoints", None)
    if state.last_completion_ms is not None and options.min_pause_ms > 0:
        earliest = state.last_completion_ms + options.min_pause_ms
        if state.now_ms < earliest:
            return TriggerDecision(False, "minimum pause", earliest)
    return TriggerDecision(True, "due", None)


def next_due_after_trigger(options: CheckpointingOptions, triggered_at_ms: int) -> int:
    """The interval counts from the moment a checkpoint actually started, so a delayed
    checkpoint does not cause a burst of catch-up checkpoints."""
    return triggered_at_ms + options.interval_ms


def next_tick_ms(
    pending: Iterable[PendingCheckpoint], timeout_ms: int, retry_at_ms: int | None
) -> int | None:
    """When the coordinator must look again: the first expiry of a checkpoint still
    collecting acknowledgements, or when a refused trigger may be allowed (None: only
    when something else happens)."""
    deadlines = [
        p.trigger_timestamp_ms + timeout_ms
        for p in pending
        if p.status is CheckpointStatus.IN_PROGRESS
    ]
    if retry_at_ms is not None:
        deadlines.append(retry_at_ms)
    return min(deadlines) if deadlines else None
