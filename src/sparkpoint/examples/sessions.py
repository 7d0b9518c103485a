"""Sessionization: event-time session windows over the click stream, with out-of-order
and late events.

Each user's clicks form sessions that end after ``gap_ms`` without a click; a session's
result is ``{"key": user, "start", "end", "value": {"clicks", "amount"}}`` (``end`` is
the last click's time plus the gap). Clicks come up to ``out_of_order_ms`` out of order
(the watermark allows for that), and some come far too late: those go to the side
output ``late``, a sink of their own.

:func:`expected_sessions` computes the same sessions and late clicks offline, from the
same records and the epochs they are read in (watermarks move at epoch boundaries):
the tests compare it with what the sinks committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.pipeline import (
    LATE,
    MIN_WATERMARK,
    AggregateFunction,
    ClickEventSource,
    EventTimeSessionWindows,
    Pipeline,
    TransactionalFileSink,
    WatermarkStrategy,
)

GAP_MS = 10_000
OUT_OF_ORDER_MS = 2_000


def event_time(event: dict[str, Any]) -> int:
    return int(event["ts"])


def user_of(event: dict[str, Any]) -> str:
    return str(event["user"])


class SessionSummary(AggregateFunction):
    """Clicks and amount of one session."""

    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: dict[str, Any], accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + 1, accumulator[1] + value["amount"])

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])

    def get_result(self, accumulator: tuple[int, int]) -> dict[str, int]:
        return {"clicks": accumulator[0], "amount": accumulator[1]}


def sessions_pipeline(
    job_id: str,
    source: ClickEventSource,
    out: str,
    late_out: str,
    *,
    parallelism: int = 4,
    gap_ms: int = GAP_MS,
    out_of_order_ms: int = OUT_OF_ORDER_MS,
) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(source)
        .assign_timestamps(WatermarkStrategy(event_time, max_out_of_orderness_ms=out_of_order_ms))
        .key_by(user_of)
        .window(EventTimeSessionWindows(gap_ms), aggregate=SessionSummary(), uid="sessions")
        .sink(TransactionalFileSink(out))
        .side_output(LATE, TransactionalFileSink(late_out))
    )


def epoch_watermarks(
    records: Iterable[tuple[str, int, dict[str, Any]]], per_split: int, out_of_order_ms: int
) -> dict[int, int]:
    """The watermark each epoch runs under (epoch n reads positions ``[(n-1)*per_split,
    n*per_split)`` of every split): the minimum over splits of the largest timestamp of
    the epochs before, less the out-of-orderness and 1."""
    by_split: dict[str, list[int]] = {}
    for split, _, event in records:  # each split's records come in position order
        by_split.setdefault(split, []).append(event_time(event))
    epochs = max(-(-len(ts) // per_split) for ts in by_split.values())
    marks = {1: MIN_WATERMARK}
    highest = {split: MIN_WATERMARK for split in by_split}
    for epoch in range(1, epochs):
        for split, stamps in by_split.items():
            seen = stamps[(epoch - 1) * per_split : epoch * per_split]
            if seen:
                highest[split] = max(highest[split], *seen)
        low = min(highest.values())
        previous = marks[epoch]
        marks[epoch + 1] = max(previous, low if low == MIN_WATERMARK else low - out_of_order_ms - 1)
    return marks


def expected_sessions(
    records: Iterable[tuple[str, int, dict[str, Any]]],
    per_split: int,
    *,
    gap_ms: int = GAP_MS,
    out_of_order_ms: int = OUT_OF_ORDER_MS,
) -> tuple[dict[tuple[str, int, int], dict[str, int]], list[dict[str, Any]]]:
    """Offline: ``({(user, start, end): {"clicks", "amount"}}, late clicks)``. A click
    read in epoch n is late when its own session window ``[ts, ts + gap)`` ended at or
    before the watermark epoch n runs under (the input keeps late clicks far from any
    open session, which the caller checks)."""
    records = list(records)
    marks = epoch_watermarks(records, per_split, out_of_order_ms)
    taken: dict[str, list[dict[str, Any]]] = {}
    late = []
    for _, position, event in records:
        watermark = marks[position // per_split + 1]
        if event_time(event) + gap_ms - 1 <= watermark:
            late.append(event)
        else:
            taken.setdefault(user_of(event), []).append(event)
    sessions: dict[tuple[str, int, int], dict[str, int]] = {}
    for user, events in taken.items():
        events.sort(key=event_time)
        group: list[dict[str, Any]] = []
        for event in [*events, None]:
            if group and (event is None or event_time(event) - event_time(group[-1]) >= gap_ms):
                start, end = event_time(group[0]), event_time(group[-1]) + gap_ms
                sessions[user, start, end] = {
                    "clicks": len(group),
                    "amount": sum(e["amount"] for e in group),
                }
                group = []
            if event is not None:
                group.append(event)
    return sessions, late
