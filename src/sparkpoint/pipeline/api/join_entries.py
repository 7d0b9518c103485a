"""The builder's ways of joining this keyed stream with another (``Pipeline`` has them):
each connects the two (``connect``) and returns the join's own builder (joins.py,
stream_join.py), which ends in the keyed stage the join runs as."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparkpoint.pipeline.api.builder import Pipeline
    from sparkpoint.pipeline.api.joins import IntervalJoin, WindowJoin
    from sparkpoint.pipeline.api.lookup import LookupJoin, LookupTable
    from sparkpoint.pipeline.api.stream_join import StreamJoin


class JoinEntries:
    """``interval_join``, ``window_join`` and ``join`` of a keyed ``Pipeline`` with
    another, ``lookup_join`` with a table."""

    def interval_join(self: Pipeline, other: Pipeline) -> IntervalJoin:  # type: ignore[misc]
        """This keyed stream (left) joined with keyed ``other`` (right) within an event-time
        interval: ``.between(lower_ms, upper_ms).process(ProcessJoinFunction)`` (joins.py)."""
        from sparkpoint.pipeline.api.joins import IntervalJoin

        return IntervalJoin(self.connect(other))

    def window_join(self: Pipeline, other: Pipeline) -> WindowJoin:  # type: ignore[misc]
        """This keyed stream (left) joined with keyed ``other`` (right) in event-time
        windows: ``.window(assigner).apply(ProcessJoinFunction)`` (joins.py)."""
        from sparkpoint.pipeline.api.joins import WindowJoin

        return WindowJoin(self.connect(other))

    def join(self: Pipeline, other: Pipeline) -> StreamJoin:  # type: ignore[misc]
        """This keyed stream (left) joined with keyed ``other`` (right) by key alone, each
        record waiting ``.with_ttl(ttl_ms)`` of event time, inner or ``.left_outer()``:
        ``.process(ProcessJoinFunction)`` (stream_join.py)."""
        from sparkpoint.pipeline.api.stream_join import StreamJoin

        return StreamJoin(self.connect(other))

    def lookup_join(self: Pipeline, table: LookupTable) -> LookupJoin:  # type: ignore[misc]
        """This keyed stream joined with the rows of ``table`` that have its key, the
        table as read at the epoch's start: ``[.left_outer()].process(ProcessJoinFunction)``
        (lookup.py)."""
        from sparkpoint.pipeline.api.lookup import lookup_join

        return lookup_join(self, table)
