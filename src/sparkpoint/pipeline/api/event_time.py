"""Event time: record timestamps and the pipeline's watermark (docs/pipeline.md, "Event
time and timers").

A :class:`WatermarkStrategy` says how to read a record's timestamp and how far out of
order records may come. The driver keeps, per source split, the largest timestamp seen
so far; a split's watermark is that minus the allowed out-of-orderness, and the
pipeline's watermark is the minimum over the splits that are not idle. Watermarks move
at epoch boundaries: the epoch that reads records sees the watermark made by the epochs
before it, fires the event-time timers it passed, and counts records at or below it as
late. The per-split maxima are operator state of the source, so a restored job goes on
from the watermark of its checkpoint, never from the beginning of time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

#: The watermark before any record, and after the end of a bounded input.
MIN_WATERMARK = -(2**63)
MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True, slots=True)
class WatermarkStrategy:
    """``timestamp(record)`` gives a record's event time in milliseconds (an int).
    Records may come up to ``max_out_of_orderness_ms`` behind the largest timestamp of
    their split without being late. A split with no new record for ``idle_timeout_ms``
    (processing time) stops holding the watermark back until it has records again
    (None: a split is never idle)."""

    timestamp: Callable[[Any], int]
    max_out_of_orderness_ms: int = 0
    idle_timeout_ms: int | None = None

    def __post_init__(self) -> None:
        if not callable(self.timestamp):
            raise TypeError(
                f"WatermarkStrategy: timestamp must be callable, got {self.timestamp!r}"
            )
        if self.max_out_of_orderness_ms < 0:
            raise ValueError(
                f"WatermarkStrategy: max_out_of_orderness_ms {self.max_out_of_orderness_ms} "
                "must not be negative"
            )
        if self.idle_timeout_ms is not None and self.idle_timeout_ms <= 0:
            raise ValueError(
                f"WatermarkStrategy: idle_timeout_ms {self.idle_timeout_ms} must be positive"
            )

    def timestamp_of(self, record: Any) -> int:
        ts = self.timestamp(record)
        if isinstance(ts, bool) or not isinstance(ts, int):
            raise TypeError(
                f"the timestamp of a record must be an int of milliseconds, got "
                f"{type(ts).__name__} {ts!r} for {record!r:.200}"
            )
        return ts


def split_of(order: Any) -> str | None:
    """The source split of a record from its order (runtime/stage_plan.py): ``(split, position,
    …)``, or ``(0, that order, row)`` after a DataFrame stage that kept the order column;
    None when a DataFrame stage dropped it (the record then moves no split's watermark)."""
    while isinstance(order, tuple) and order:
        head = order[0]
        if isinstance(head, str):
            return head
        if head == 0 and len(order) > 1:
            order = order[1]
            continue
        return None
    return None


def carried_timestamp(order: Any) -> int | None:
    """The timestamp a record of a later keyed stage carries: the first item of its
    order ``(timestamp, partition, n, …)`` (tasks.timed_outputs), looked for inside the
    order a DataFrame stage kept (``(0, order, row)``; ``(1, (), row)``: dropped)."""
    while (
        isinstance(order, tuple)
        and len(order) == 3
        and order[0] in (0, 1)
        and isinstance(order[1], tuple)
        and isinstance(order[2], bytes)
    ):
        if order[0] == 1:
            return None
        order = order[1]
    ts = order[0] if isinstance(order, tuple) and order else None
    return None if ts is None or ts == MIN_WATERMARK else int(ts)


def merge_maxima(into: dict[str, int], more: dict[str, int]) -> None:
    for split, ts in more.items():
        if ts > into.get(split, MIN_WATERMARK):
            into[split] = ts


@dataclass
class WatermarkTracker:
    """The driver's view of event time: per split, the largest timestamp seen and when
    (processing time) the split last had records."""

    strategy: WatermarkStrategy
    maxima: dict[str, int] = field(default_factory=dict)
    last_active_ms: dict[str, int] = field(default_factory=dict)
    #: Set once a bounded input has ended: every event-time timer is due.
    ended: bool = False
    current: int = MIN_WATERMARK
    #: The watermarks of the epochs before, newest first, one per later keyed stage:
    #: keyed stage n runs an epoch behind stage n - 1, so what stage n - 1 emitted as its
    #: watermark passed is not late for stage n (as Flink sends a window's result before
    #: the watermark that fired it).
    lagged: list[int] = field(default_factory=list)
    depth: int = 0
    #: Epochs run since the input ended.
    flushed: int = 0
    #: A pipeline of several sources: per source uid, its strategy (its splits are named
    #: ``<uid>/<split>``); the others go by ``strategy``.
    input_strategies: dict[str, WatermarkStrategy] = field(default_factory=dict)
    #: A pipeline of several sources: the split-name prefixes (``<uid>/``) of the
    #: sources that have ended; their splits no longer hold the watermark back.
    ended_sources: tuple[str, ...] = ()

    def stage_watermark(self, stage: int) -> int:
        """The watermark keyed stage ``stage`` runs the next epoch under."""
        if stage == 0:
            return self.current
        return self.lagged[stage - 1] if stage - 1 < len(self.lagged) else MIN_WATERMARK

    @property
    def drained(self) -> bool:
        """The input ended and every keyed stage has run under the last watermark."""
        return self.ended and self.flushed > self.depth

    def observe(self, splits: Iterable[str], maxima: dict[str, int], now_ms: int) -> None:
        """An epoch read ``splits`` (its ranges) and saw these per-split maxima."""
        if self.depth:
            self.lagged = [self.current, *self.lagged][: self.depth]
        if self.ended:
            self.flushed += 1
        for split in splits:
            self.maxima.setdefault(split, MIN_WATERMARK)
            self.last_active_ms.setdefault(split, now_ms)
        for split, ts in maxima.items():
            self.last_active_ms[split] = now_ms
            if ts > self.maxima.get(split, MIN_WATERMARK):
                self.maxima[split] = ts
        self.current = max(self.current, self._computed(now_ms))

    def end_of_input(self) -> None:
        self.ended = True
        self.current = MAX_WATERMARK

    def _strategy_of(self, split: str) -> WatermarkStrategy:
        if not self.input_strategies:
            return self.strategy
        return self.input_strategies.get(split.partition("/")[0], self.strategy)

    def _computed(self, now_ms: int) -> int:
        """The smallest watermark of the splits that are not idle: with several sources
        the smallest of theirs, each split by its own source's strategy."""
        if self.ended:
            return MAX_WATERMARK
        active = []
        for split, ts in self.maxima.items():
            if self.ended_sources and split.startswith(self.ended_sources):
                continue  # as Flink's finished source, whose last watermark is the maximum
            strategy = self._strategy_of(split)
            timeout = strategy.idle_timeout_ms
            if timeout is None or now_ms - self.last_active_ms.get(split, now_ms) < timeout:
                ooo = strategy.max_out_of_orderness_ms
                active.append(MIN_WATERMARK if ts == MIN_WATERMARK else ts - ooo - 1)
        if not active:
            return self.current  # all idle (or none yet): hold, as Flink does
        return min(active)

    def snapshot(self) -> list[tuple[str, int]]:
        """Operator-state elements of the source: ``(split, max timestamp)``; a split
        named ``""`` carries the watermark itself (it never goes back on restore), ``#n``
        the n-th lagged one."""
        lagged = [(f"#{n + 1}", w) for n, w in enumerate(self.lagged)]
        return [("", self.current), *lagged, *sorted(self.maxima.items())]

    def restore(self, elements: Iterable[tuple[str, int]], now_ms: int) -> None:
        lagged: dict[int, int] = {}
        for split, ts in elements:
            if split == "":
                self.current = max(self.current, ts)
                self.ended = self.current == MAX_WATERMARK
            elif split.startswith("#"):
                lagged[int(split[1:])] = ts
            else:
                self.maxima[split] = max(ts, self.maxima.get(split, MIN_WATERMARK))
                self.last_active_ms[split] = now_ms
        # A checkpoint of a job with fewer keyed stages: a new stage starts where the
        # last one it had was (never ahead of the stage before it).
        for n in range(1, self.depth + 1):
            self.lagged.append(lagged.get(n, self.lagged[-1] if self.lagged else self.current))
