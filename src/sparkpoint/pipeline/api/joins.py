"""Joins of two keyed streams, built on ``connect`` (docs/pipeline.md, "Joins"): the
records of each side wait in the key's state, and event-time timers drop them once the
watermark says no record of the other side can still match. So a join is checkpointed,
restored and rescaled like any keyed stage, on either state backend.

*Interval join* (Flink's ``KeyedStream.intervalJoin``): a left record ``l`` and a right
record ``r`` of the same key are joined when ``l.ts + lower <= r.ts <= l.ts + upper``
(both bounds inclusive unless made exclusive). Each pair is handed once to a
:class:`ProcessJoinFunction`, with the larger of the two timestamps as the event time
its outputs carry. A record at or below the watermark its epoch runs under is late: it
joins nothing, and goes to a side output when one is named for its side (else it is
dropped, as in Flink).

*Window join* (Flink's ``join(…).window(…)``): the left and right records of a key in
the same tumbling, sliding or session window are joined, every pair once per window,
when the watermark passes the window's last ms; a record too late for all its windows
goes to the side output ``"late"`` as in a window. A key's session windows gather the
records of both sides: a record of either side within the gap of a session extends it,
and one between two sessions merges them.

>>> joined = (orders.key_by(lambda o: o["customer"])                   # doctest: +SKIP
...           .interval_join(shipments.key_by(lambda s: s["customer"]))
...           .between(0, 3_600_000)
...           .side_output_right_late_data("late-shipments")
...           .process(OrderShipped(), uid="shipped"))
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.functions import (
    Context,
    KeyedCoProcessFunction,
    RuntimeContext,
    TimerContext,
)
from sparkpoint.pipeline.api.keyed_state import MapStateDescriptor
from sparkpoint.pipeline.api.windows import LATE, TimeWindow, WindowAssigner
from sparkpoint.statefiles.keys import Key

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline


class JoinContext:
    """Given to :meth:`ProcessJoinFunction.process_element`: the pair's key, timestamps
    and (window join) window; ``collect`` emits a value carrying ``timestamp``,
    ``output`` sends one to a side output."""

    def __init__(self) -> None:
        self.current_key: Key = None
        self.left_timestamp = 0
        #: None for a left outer join's left record without a partner (right is None).
        self.right_timestamp: int | None = 0
        #: The window of a window join's pair (None in an interval join).
        self.window: TimeWindow | None = None
        self._ctx: Context | None = None

    @property
    def timestamp(self) -> int:
        """What outputs carry: the window's last ms in a window join, else the larger
        of the pair's timestamps."""
        if self.window is not None:
            return self.window.max_timestamp
        if self.right_timestamp is None:
            return self.left_timestamp
        return max(self.left_timestamp, self.right_timestamp)

    def _context(self) -> Context:
        assert self._ctx is not None, "a JoinContext is used only inside process_element"
        return self._ctx

    def collect(self, value: Any) -> None:
        self._context().collect(value)

    def output(self, tag: str, value: Any) -> None:
        self._context().output(tag, value)


class ProcessJoinFunction:
    """What an author implements for a join: ``process_element(left, right, ctx)`` for
    each joined pair (``ctx``: :class:`JoinContext`); ``open`` may declare keyed state
    of its own, as in a keyed function.

    >>> class Shipped(ProcessJoinFunction):
    ...     def process_element(self, order, shipment, ctx):
    ...         ctx.collect({**order, "shipped_after_ms": ctx.right_timestamp - ctx.left_timestamp})
    """

    def open(self, ctx: RuntimeContext) -> None:
        """Declare keyed state (optional)."""

    def process_element(self, left: Any, right: Any, ctx: JoinContext) -> None:
        raise NotImplementedError


#: The map states a side's records wait in (timestamp → the records of it).
LEFT_BUFFER: MapStateDescriptor[int, list[Any]] = MapStateDescriptor("interval-join-left")
RIGHT_BUFFER: MapStateDescriptor[int, list[Any]] = MapStateDescriptor("interval-join-right")


class BufferedJoinOperator(KeyedCoProcessFunction):
    """What the joins that keep each side's waiting records in map state (timestamp →
    records) share: the two buffers, and telling an on-time record from a late one."""

    #: The two sides' buffers, and the join's name in errors (set by each join).
    left_buffer: MapStateDescriptor[int, list[Any]]
    right_buffer: MapStateDescriptor[int, list[Any]]
    kind: str
    function: ProcessJoinFunction

    def open(self, ctx: RuntimeContext) -> None:
        self.left = ctx.get_map_state(self.left_buffer)
        self.right = ctx.get_map_state(self.right_buffer)
        self.join_ctx = JoinContext()
        self.function.open(ctx)

    def _on_time(self, value: Any, ctx: Context, late_tag: str | None) -> int | None:
        """The record's timestamp, or None when it is late (sent to ``late_tag``)."""
        ts = ctx.timestamp
        if ts is None:
            raise RuntimeError(
                f"{self.kind} needs event time: give both inputs "
                "assign_timestamps(WatermarkStrategy(…))"
            )
        if ts <= ctx.current_watermark():
            if late_tag is not None:
                ctx.output(late_tag, value)
            return None
        return ts


class IntervalJoinOperator(BufferedJoinOperator):
    """The connected keyed function an interval join runs as. A left record at ``ts``
    waits until the watermark reaches ``ts + upper`` (after that every right record
    that is not late is above ``ts + upper``), a right one until ``ts - lower``; a record
    whose wait is already over is joined with what waits and not kept."""

    left_buffer, right_buffer, kind = LEFT_BUFFER, RIGHT_BUFFER, "an interval join"

    def __init__(
        self,
        function: ProcessJoinFunction,
        lower_ms: int,
        upper_ms: int,
        left_late: str | None = None,
        right_late: str | None = None,
    ) -> None:
        self.function = function
        self.lower_ms, self.upper_ms = lower_ms, upper_ms
        self.left_late, self.right_late = left_late, right_late

    def process_element1(self, key: Key, value: Any, ctx: Context) -> None:
        ts = self._on_time(value, ctx, self.left_late)
        if ts is None:
            return
        for right_ts, rights in sorted(self.right.items()):
            if ts + self.lower_ms <= right_ts <= ts + self.upper_ms:
                for right in rights:
                    self._join(key, (value, ts), (right, right_ts), ctx)
        self._wait(self.left, value, ts, ts + self.upper_ms, ctx)

    def process_element2(self, key: Key, value: Any, ctx: Context) -> None:
        ts = self._on_time(value, ctx, self.right_late)
        if ts is None:
            return
        for left_ts, lefts in sorted(self.left.items()):
            if left_ts + self.lower_ms <= ts <= left_ts + self.upper_ms:
                for left in lefts:
                    self._join(key, (left, left_ts), (value, ts), ctx)
        self._wait(self.right, value, ts, ts - self.lower_ms, ctx)

    def _wait(self, buffer: Any, value: Any, ts: int, until: int, ctx: Context) -> None:
        if until <= ctx.current_watermark():
            return  # no record of the other side that is not late can still match it
        buffer.put(ts, [*(buffer.get(ts) or ()), value])
        ctx.register_event_time_timer(until)

    def _join(self, key: Key, left: tuple[Any, int], right: tuple[Any, int], ctx: Context) -> None:
        join_pair(self.function, self.join_ctx, ctx, key, left, right)

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        # One timer time may end the wait of a left and of a right timestamp.
        self.left.remove(timestamp - self.upper_ms)
        self.right.remove(timestamp + self.lower_ms)


def join_pair(
    function: ProcessJoinFunction,
    join_ctx: JoinContext,
    ctx: Context,
    key: Key,
    left: tuple[Any, int | None],
    right: tuple[Any, int | None] | None,
    window: TimeWindow | None = None,
) -> None:
    """Hands the pair (each ``(value, timestamp)``, a lookup table's row without one;
    ``right`` None: a left record without a partner) to ``function``; what it collects
    carries ``join_ctx.timestamp``."""
    join_ctx._ctx, join_ctx.current_key, join_ctx.window = ctx, key, window
    right_value, right_ts = right if right is not None else (None, None)
    join_ctx.left_timestamp, join_ctx.right_timestamp = left[1], right_ts
    record_ts, ctx.timestamp = ctx.timestamp, join_ctx.timestamp
    try:
        function.process_element(left[0], right_value, join_ctx)
    finally:
        ctx.timestamp = record_ts


def check_join_function(connected: Pipeline, function: Any, join: str) -> None:
    """A join takes a ProcessJoinFunction, and both its inputs carry event time."""
    job = connected.job_id
    if not isinstance(function, ProcessJoinFunction):
        raise TypeError(
            f"pipeline {job}: {join} takes a ProcessJoinFunction, got {type(function).__name__}"
        )
    untimed = [i.uid for i in connected.inputs if i.watermark_strategy is None]
    if untimed:
        raise ValueError(
            f"pipeline {job}: {join} needs event time, and sources {untimed} "
            "have none: assign_timestamps(WatermarkStrategy(…)) on both inputs"
        )


class IntervalJoin:
    """``a.key_by(…).interval_join(b.key_by(…))``: give the bounds with :meth:`between`."""

    def __init__(self, connected: Pipeline) -> None:
        self._connected = connected

    def between(self, lower_ms: int, upper_ms: int) -> IntervalJoined:
        """Join ``l`` and ``r`` when ``l.ts + lower_ms <= r.ts <= l.ts + upper_ms``."""
        for name, value in (("lower_ms", lower_ms), ("upper_ms", upper_ms)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"interval join: {name} must be an int of ms, got {value!r}")
        return IntervalJoined(self._connected, lower_ms, upper_ms)


@dataclass(frozen=True)
class IntervalJoined:
    """An interval join with its bounds; each call returns a new one, ``process`` ends
    it (Flink's ``IntervalJoined``)."""

    connected: Pipeline
    lower_ms: int
    upper_ms: int
    lower_exclusive: bool = False
    upper_exclusive: bool = False
    left_late: str | None = None
    right_late: str | None = None

    def lower_bound_exclusive(self) -> IntervalJoined:
        return replace(self, lower_exclusive=True)

    def upper_bound_exclusive(self) -> IntervalJoined:
        return replace(self, upper_exclusive=True)

    def side_output_left_late_data(self, tag: str) -> IntervalJoined:
        """Late left records go to the side output ``tag`` (``Pipeline.side_output``)."""
        return replace(self, left_late=tag)

    def side_output_right_late_data(self, tag: str) -> IntervalJoined:
        """Late right records go to the side output ``tag``."""
        return replace(self, right_late=tag)

    def process(self, function: ProcessJoinFunction, *, uid: str | None = None) -> Pipeline:
        """The join, as the keyed stage ``uid`` (default ``interval-join``)."""
        check_join_function(self.connected, function, "an interval join")
        lower = self.lower_ms + 1 if self.lower_exclusive else self.lower_ms
        upper = self.upper_ms - 1 if self.upper_exclusive else self.upper_ms
        if lower > upper:
            raise ValueError(
                f"pipeline {self.connected.job_id}: interval join bounds [{lower}, {upper}] "
                "(exclusive bounds moved in by 1 ms) are empty: the lower bound must not "
                "exceed the upper"
            )
        operator = IntervalJoinOperator(function, lower, upper, self.left_late, self.right_late)
        return self.connected.process(operator, uid=uid or "interval-join")


#: A key's windows of a window join: ``(start, end)`` → ``([left], [right])``, each
#: record as ``(value, timestamp)``.
WINDOW_BUFFER: MapStateDescriptor[tuple[int, int], Any] = MapStateDescriptor("window-join")


class WindowJoinOperator(KeyedCoProcessFunction):
    """The connected keyed function a window join runs as: each record waits in every
    window it belongs to (a session merged with those it overlaps); when the watermark
    passes a window's last ms, every left record of it is joined with every right one,
    and the window is dropped. A record too late for all its windows goes to the side
    output ``"late"``."""

    def __init__(self, function: ProcessJoinFunction, assigner: WindowAssigner) -> None:
        self.function = function
        self.assigner = assigner

    def open(self, ctx: RuntimeContext) -> None:
        self.windows = ctx.get_map_state(WINDOW_BUFFER)
        self.join_ctx = JoinContext()
        self.function.open(ctx)

    def process_element1(self, key: Key, value: Any, ctx: Context) -> None:
        self._add(value, ctx, 0)

    def process_element2(self, key: Key, value: Any, ctx: Context) -> None:
        self._add(value, ctx, 1)

    def _add(self, value: Any, ctx: Context, side: int) -> None:
        ts = ctx.timestamp
        if ts is None:
            raise RuntimeError(
                "a window join needs event time: give both inputs "
                "assign_timestamps(WatermarkStrategy(…))"
            )
        watermark = ctx.current_watermark()
        taken = False
        assigned: list[TimeWindow | None] = list(self.assigner.assign(ts))
        if self.assigner.merging:
            assigned = [self._merged(w, watermark) for w in assigned]
        for window in assigned:
            if window is None or window.max_timestamp <= watermark:
                continue  # fired already
            taken = True
            bounds = (window.start, window.end)
            sides = self.windows.get(bounds) or ([], [])
            sides[side].append((value, ts))
            self.windows.put(bounds, sides)
            ctx.register_event_time_timer(window.max_timestamp)
        if not taken:
            ctx.output(LATE, value)

    def _merged(self, new: TimeWindow, watermark: int) -> TimeWindow | None:
        """Session windows: ``new`` merged with the key's sessions it overlaps (their
        records moved into the merged one, of both sides), or None when the merged
        session would be too late (nothing changes then, as in a window)."""
        touching = sorted(
            w for w in (TimeWindow(*b) for b, _ in self.windows.items()) if new.overlaps(w)
        )
        merged = TimeWindow(
            min([new.start, *(w.start for w in touching)]),
            max([new.end, *(w.end for w in touching)]),
        )
        if merged.max_timestamp <= watermark:
            return None
        lefts: list[Any] = []
        rights: list[Any] = []
        for window in touching:
            in_lefts, in_rights = self.windows.get((window.start, window.end))
            lefts.extend(in_lefts)
            rights.extend(in_rights)
            self.windows.remove((window.start, window.end))
        if touching:  # the timers of the merged-away sessions find nothing due
            self.windows.put((merged.start, merged.end), (lefts, rights))
        return merged

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        for bounds in sorted(self.windows.keys()):
            window = TimeWindow(*bounds)
            if window.max_timestamp > timestamp:
                continue
            lefts, rights = self.windows.get(bounds)
            for left in lefts:
                for right in rights:
                    join_pair(self.function, self.join_ctx, ctx, key, left, right, window)
            self.windows.remove(bounds)


class WindowJoin:
    """``a.key_by(…).window_join(b.key_by(…))``: give the windows with :meth:`window`."""

    def __init__(self, connected: Pipeline) -> None:
        self._connected = connected

    def window(self, assigner: WindowAssigner) -> WindowJoined:
        """Tumbling, sliding or session event-time windows (a pair joins in each window
        both records are in; a key's session gathers both sides' records)."""
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(
                f"pipeline {self._connected.job_id}: window join takes a window assigner "
                f"(TumblingEventTimeWindows, SlidingEventTimeWindows, "
                f"EventTimeSessionWindows), got {assigner!r}"
            )
        return WindowJoined(self._connected, assigner)


@dataclass(frozen=True)
class WindowJoined:
    """A window join with its windows: ``apply`` ends it."""

    connected: Pipeline
    assigner: WindowAssigner

    def apply(self, function: ProcessJoinFunction, *, uid: str | None = None) -> Pipeline:
        """The join, as the keyed stage ``uid`` (default ``window-join``); late records
        of either side go to the side output ``"late"`` (``Pipeline.side_output``)."""
        check_join_function(self.connected, function, "a window join")
        operator = WindowJoinOperator(function, self.assigner)
        return self.connected.process(operator, uid=uid or "window-join")
