"""The unbounded join of two keyed streams, inner or left outer, with a time to live
bounding how long each side's records wait (docs/pipeline.md, "Joins: unbounded, with a
TTL") — Structured Streaming's stream-stream join, Flink SQL's regular join with
``table.exec.state.ttl``. Built on ``connect`` like the interval join (joins.py).

A left record and a right record of the same key are joined when one of them comes
while the other still waits: every record that is not late waits in the key's map
state until the watermark passes ``ts + ttl_ms`` (its time to live, in event time), and
without a TTL for ever (inner join only: state grows with the keys' records). A left
outer join remembers which left records found a partner; one that found none is handed
to the function with ``right=None`` when its time to live ends — the moment the
watermark says nothing can match it any more. Late records (at or below the watermark
their epoch runs under) join nothing and go to the side output named for their side,
else they are dropped (as the interval join's).

The TTL goes by the watermark, not by processing time as Flink's state TTL does: so
which pairs are joined depends only on the records and the epochs that read them, and a
retried or restored epoch joins the same.

>>> joined = (orders.key_by(customer)                                  # doctest: +SKIP
...           .join(payments.key_by(customer))
...           .with_ttl(3_600_000)
...           .left_outer()
...           .process(OrderPaid(), uid="paid"))
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.event_time import MAX_WATERMARK
from sparkpoint.pipeline.api.functions import Context, TimerContext
from sparkpoint.pipeline.api.joins import (
    BufferedJoinOperator,
    ProcessJoinFunction,
    check_join_function,
    join_pair,
)
from sparkpoint.pipeline.api.keyed_state import MapStateDescriptor
from sparkpoint.statefiles.keys import Key

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline

#: A key's waiting left records: timestamp → ``[[value, matched], …]`` (``matched``: it
#: found a partner; a left outer join emits those that did not when they expire).
JOIN_LEFT: MapStateDescriptor[int, list[list[Any]]] = MapStateDescriptor("join-left")
#: A key's waiting right records: timestamp → the records of it.
JOIN_RIGHT: MapStateDescriptor[int, list[Any]] = MapStateDescriptor("join-right")


class StreamJoinOperator(BufferedJoinOperator):
    """The connected keyed function an unbounded join runs as."""

    left_buffer, right_buffer, kind = JOIN_LEFT, JOIN_RIGHT, "a stream join"

    def __init__(
        self,
        function: ProcessJoinFunction,
        ttl_ms: int | None,
        left_outer: bool,
        left_late: str | None = None,
        right_late: str | None = None,
    ) -> None:
        self.function = function
        self.ttl_ms, self.left_outer = ttl_ms, left_outer
        self.left_late, self.right_late = left_late, right_late

    def process_element1(self, key: Key, value: Any, ctx: Context) -> None:
        ts = self._on_time(value, ctx, self.left_late)
        if ts is None:
            return
        matched = False
        for right_ts, rights in sorted(self.right.items()):
            for right in rights:
                matched = True
                join_pair(self.function, self.join_ctx, ctx, key, (value, ts), (right, right_ts))
        self.left.put(ts, [*(self.left.get(ts) or ()), [value, matched]])
        self._expire_at(ts, ctx)

    def process_element2(self, key: Key, value: Any, ctx: Context) -> None:
        ts = self._on_time(value, ctx, self.right_late)
        if ts is None:
            return
        for left_ts, lefts in sorted(self.left.items()):
            for entry in lefts:
                join_pair(self.function, self.join_ctx, ctx, key, (entry[0], left_ts), (value, ts))
            if self.left_outer and not all(matched for _, matched in lefts):
                self.left.put(left_ts, [[left, True] for left, _ in lefts])
        self.right.put(ts, [*(self.right.get(ts) or ()), value])
        self._expire_at(ts, ctx)

    def _expire_at(self, ts: int, ctx: Context) -> None:
        # A record that is not late is above the watermark, so it always waits a while.
        if self.ttl_ms is not None:
            ctx.register_event_time_timer(min(ts + self.ttl_ms, MAX_WATERMARK))

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        assert self.ttl_ms is not None
        expired = timestamp - self.ttl_ms  # one timer time ends a left and a right ts
        if self.left_outer:
            for left, matched in self.left.get(expired) or ():
                if not matched:
                    join_pair(self.function, self.join_ctx, ctx, key, (left, expired), None)
        self.left.remove(expired)
        self.right.remove(expired)


@dataclass(frozen=True)
class StreamJoin:
    """``a.key_by(…).join(b.key_by(…))``: an inner join that keeps every record until
    ``with_ttl`` bounds it; ``left_outer()`` also emits the left records that found no
    partner in their time to live. Each call returns a new one, ``process`` ends it."""

    connected: Pipeline
    ttl_ms: int | None = None
    outer: bool = False
    left_late: str | None = None
    right_late: str | None = None

    def with_ttl(self, ttl_ms: int) -> StreamJoin:
        """Each record waits until the watermark passes its timestamp + ``ttl_ms``."""
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0:
            raise ValueError(f"stream join: ttl_ms must be a positive int of ms, got {ttl_ms!r}")
        return replace(self, ttl_ms=ttl_ms)

    def left_outer(self) -> StreamJoin:
        """Every left record that is not late is handed over: with each partner, or once
        with ``right=None`` when its TTL ends without one (needs ``with_ttl``)."""
        return replace(self, outer=True)

    def side_output_left_late_data(self, tag: str) -> StreamJoin:
        """Late left records go to the side output ``tag`` (``Pipeline.side_output``)."""
        return replace(self, left_late=tag)

    def side_output_right_late_data(self, tag: str) -> StreamJoin:
        """Late right records go to the side output ``tag``."""
        return replace(self, right_late=tag)

    def process(self, function: ProcessJoinFunction, *, uid: str | None = None) -> Pipeline:
        """The join, as the keyed stage ``uid`` (default ``join``)."""
        check_join_function(self.connected, function, "a stream join")
        if self.outer and self.ttl_ms is None:
            raise ValueError(
                f"pipeline {self.connected.job_id}: a left outer stream join needs "
                "with_ttl(ttl_ms): without one no left record is ever known to have no "
                "partner, so none would be emitted"
            )
        operator = StreamJoinOperator(
            function, self.ttl_ms, self.outer, self.left_late, self.right_late
        )
        return self.connected.process(operator, uid=uid or "join")
