"""Event-time windows on keyed state and timers (docs/pipeline.md, "Windows").

A window is ``[start, end)``; it fires when the watermark passes ``end - 1`` (an
event-time timer of the key) and is dropped once the watermark passes ``end - 1 +
allowed_lateness_ms``. A record that comes after its window fired but before it is
dropped updates it and fires it again at once (as Flink's event-time trigger does); a
record too late for every window it belongs to goes to the side output ``"late"``.
A key's windows are one map state (``windows``: ``(start, end)`` → contents), so they
are checkpointed, restored and rescaled with the key like any other state.

>>> p = (Pipeline("sessions")                                            # doctest: +SKIP
...      .source(ClickEventSource())
...      .assign_timestamps(WatermarkStrategy(lambda e: e["ts"], max_out_of_orderness_ms=2000))
...      .key_by(lambda e: e["user"])
...      .window(EventTimeSessionWindows(gap_ms=30_000), aggregate=Count())
...      .sink(TransactionalFileSink("/tmp/sessions")))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sparkpoint.pipeline.api.event_time import MAX_WATERMARK
from sparkpoint.pipeline.api.functions import Context, KeyedProcessFunction, RuntimeContext
from sparkpoint.pipeline.api.keyed_state import MapStateDescriptor
from sparkpoint.statefiles.keys import Key

#: The side output of records too late for all their windows.
LATE = "late"


@dataclass(frozen=True, slots=True, order=True)
class TimeWindow:
    start: int
    end: int

    @property
    def max_timestamp(self) -> int:
        return self.end - 1

    def overlaps(self, other: TimeWindow) -> bool:
        return self.start < other.end and other.start < self.end


class WindowAssigner:
    """The windows a record of timestamp ``ts`` belongs to."""

    merging = False

    def assign(self, ts: int) -> list[TimeWindow]:
        raise NotImplementedError


def _positive(owner: str, **values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{owner}: {name} must be a positive int of ms, got {value!r}")


@dataclass(frozen=True, slots=True)
class TumblingEventTimeWindows(WindowAssigner):
    """Windows of ``size_ms``, back to back, aligned to the epoch (plus ``offset_ms``)."""

    size_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _positive("TumblingEventTimeWindows", size_ms=self.size_ms)

    def assign(self, ts: int) -> list[TimeWindow]:
        start = ts - (ts - self.offset_ms) % self.size_ms
        return [TimeWindow(start, start + self.size_ms)]


@dataclass(frozen=True, slots=True)
class SlidingEventTimeWindows(WindowAssigner):
    """Windows of ``size_ms`` starting every ``slide_ms``: a record is in ``size/slide``."""

    size_ms: int
    slide_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        _positive("SlidingEventTimeWindows", size_ms=self.size_ms, slide_ms=self.slide_ms)

    def assign(self, ts: int) -> list[TimeWindow]:
        last = ts - (ts - self.offset_ms) % self.slide_ms
        windows = []
        start = last
        while start > ts - self.size_ms:
            windows.append(TimeWindow(start, start + self.size_ms))
            start -= self.slide_ms
        return windows


@dataclass(frozen=True, slots=True)
class EventTimeSessionWindows(WindowAssigner):
    """A key's session ends after ``gap_ms`` without records: each record opens
    ``[ts, ts + gap)`` and windows that overlap merge (a record exactly ``gap_ms``
    after the last one of a session starts a new session)."""

    gap_ms: int
    merging = True

    def __post_init__(self) -> None:
        _positive("EventTimeSessionWindows", gap_ms=self.gap_ms)

    def assign(self, ts: int) -> list[TimeWindow]:
        return [TimeWindow(ts, ts + self.gap_ms)]


class AggregateFunction:
    """Incremental aggregation: one accumulator per window. ``merge`` is needed by
    session windows (two sessions joined by a record between them)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, a: Any, b: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.merge (session windows need it)")


class ProcessWindowFunction:
    """Sees all of a window's records at once (they are kept in state until it fires)."""

    def process(self, key: Key, window: TimeWindow, elements: list[Any]) -> Iterable[Any]:
        raise NotImplementedError


class _Contents:
    """What a window keeps, for each of the three kinds of window function."""

    def __init__(
        self,
        reduce: Callable[[Any, Any], Any] | None,
        aggregate: AggregateFunction | None,
        process: ProcessWindowFunction | None,
    ) -> None:
        given = [f for f in (reduce, aggregate, process) if f is not None]
        if len(given) != 1:
            raise ValueError("a window takes exactly one of reduce=, aggregate= or process=")
        if aggregate is not None and not isinstance(aggregate, AggregateFunction):
            raise TypeError(f"aggregate= takes an AggregateFunction, got {aggregate!r}")
        if process is not None and not isinstance(process, ProcessWindowFunction):
            raise TypeError(f"process= takes a ProcessWindowFunction, got {process!r}")
        self.reduce, self.aggregate, self.process = reduce, aggregate, process

    def first(self, value: Any) -> Any:
        if self.aggregate is not None:
            return self.aggregate.add(value, self.aggregate.create_accumulator())
        return value if self.reduce is not None else [value]

    def add(self, contents: Any, value: Any) -> Any:
        if self.aggregate is not None:
            return self.aggregate.add(value, contents)
        if self.reduce is not None:
            return self.reduce(contents, value)
        return [*contents, value]

    def merge(self, a: Any, b: Any) -> Any:
        if self.aggregate is not None:
            return self.aggregate.merge(a, b)
        if self.reduce is not None:
            return self.reduce(a, b)
        return [*a, *b]

    def emit(self, key: Key, window: TimeWindow, contents: Any, ctx: Context) -> None:
        if self.process is not None:
            for out in self.process.process(key, window, list(contents)):
                ctx.collect(out)
            return
        value = contents
        if self.aggregate is not None:
            value = self.aggregate.get_result(contents)
        ctx.collect({"key": key, "start": window.start, "end": window.end, "value": value})


class WindowOperator(KeyedProcessFunction):
    """The keyed function ``Pipeline.window`` makes."""

    def __init__(
        self,
        assigner: WindowAssigner,
        *,
        reduce: Callable[[Any, Any], Any] | None = None,
        aggregate: AggregateFunction | None = None,
        process: ProcessWindowFunction | None = None,
        allowed_lateness_ms: int = 0,
    ) -> None:
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(f"window takes a window assigner, got {assigner!r}")
        if allowed_lateness_ms < 0:
            raise ValueError(f"allowed_lateness_ms {allowed_lateness_ms} must not be negative")
        self.assigner = assigner
        self.contents = _Contents(reduce, aggregate, process)
        self.allowed_lateness_ms = allowed_lateness_ms

    def open(self, ctx: RuntimeContext) -> None:
        self.windows = ctx.get_map_state(MapStateDescriptor("windows"))

    def _cleanup_time(self, window: TimeWindow) -> int:
        return min(window.max_timestamp + self.allowed_lateness_ms, MAX_WATERMARK)

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        if ctx.timestamp is None:
            raise RuntimeError(
                "windows need event time: give the pipeline assign_timestamps(WatermarkStrategy(…))"
            )
        watermark = ctx.current_watermark()
        assigned = self.assigner.assign(ctx.timestamp)
        if self.assigner.merging:
            assigned = [self._merge(w, value, watermark) for w in assigned]
        taken = False
        for window in assigned:
            if window is None or self._cleanup_time(window) <= watermark:
                continue  # too late for this window
            taken = True
            if not self.assigner.merging:
                bounds = (window.start, window.end)
                found = self.windows.get(bounds)
                self.windows.put(
                    bounds,
                    self.contents.first(value)
                    if found is None
                    else self.contents.add(found, value),
                )
            if window.max_timestamp <= watermark:
                # Late, but allowed: the window fired already; fire it again with this.
                self.contents.emit(key, window, self.windows.get((window.start, window.end)), ctx)
            else:
                ctx.register_event_time_timer(window.max_timestamp)
            ctx.register_event_time_timer(self._cleanup_time(window))
        if not taken:
            ctx.output(LATE, value)

    def _merge(self, new: TimeWindow, value: Any, watermark: int) -> TimeWindow | None:
        """Merges ``new`` with the key's sessions it touches and adds ``value``; returns
        the merged window, or None when it would be too late (nothing changes then)."""
        touching = sorted(
            w for w in (TimeWindow(*b) for b, _ in self.windows.items()) if new.overlaps(w)
        )
        merged = TimeWindow(
            min([new.start, *(w.start for w in touching)]),
            max([new.end, *(w.end for w in touching)]),
        )
        if self._cleanup_time(merged) <= watermark:
            return None
        contents = None
        for window in touching:
            part = self.windows.get((window.start, window.end))
            contents = part if contents is None else self.contents.merge(contents, part)
            self.windows.remove((window.start, window.end))
        first = self.contents.first(value)
        self.windows.put(
            (merged.start, merged.end),
            first if contents is None else self.contents.merge(contents, first),
        )
        return merged

    def on_timer(self, timestamp: int, key: Key, ctx: Context) -> None:
        for bounds in sorted(self.windows.keys()):
            window = TimeWindow(*bounds)
            if window.max_timestamp == timestamp:
                self.contents.emit(key, window, self.windows.get(bounds), ctx)
            if self._cleanup_time(window) <= timestamp:
                self.windows.remove(bounds)
