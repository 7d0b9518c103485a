"""The driver's clocks (docs/pipeline.md, "Event time and timers"): the processing time
and watermark each epoch runs under, the watermark carried in checkpoints, and the
epochs without records that timers need (a processing-time timer is due although no
record came; the end of a bounded input fires every event-time timer).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.pipeline.api.event_time import (
    MIN_WATERMARK,
    WatermarkStrategy,
    WatermarkTracker,
    merge_maxima,
)
from sparkpoint.pipeline.api.functions import KeyedProcessFunction
from sparkpoint.pipeline.api.ttl import now_ms
from sparkpoint.pipeline.runtime.keyed_epoch import EpochTime, uses_timers

#: The source's operator-state name of the per-split event-time maxima.
SOURCE_WATERMARKS = "watermarks"


class EpochClock:
    """``timer_interval_ms``: with no new records, a pipeline whose function has timers
    still runs an (empty) epoch this often, so processing-time timers fire and idle
    splits release the watermark."""

    def __init__(
        self,
        functions: list[KeyedProcessFunction],
        strategy: WatermarkStrategy | None,
        timer_interval_ms: int,
        input_strategies: dict[str, WatermarkStrategy] | None = None,
    ) -> None:
        """``input_strategies``: several sources, each with its strategy, by uid."""
        self.strategy = strategy
        self._stages = len(functions)
        self.tracker = None
        if strategy is not None:
            self.tracker = WatermarkTracker(
                strategy, depth=len(functions) - 1, input_strategies=input_strategies or {}
            )
        self._timers = any(uses_timers(f) for f in functions)
        self._interval_ms = timer_interval_ms
        self._last_epoch_ms = now_ms()

    @property
    def watermark(self) -> int:
        return self.tracker.current if self.tracker is not None else MIN_WATERMARK

    def epoch_times(self) -> tuple[EpochTime, ...]:
        """Per keyed stage, the clocks of the next epoch."""
        self._last_epoch_ms = now_ms()
        return tuple(
            EpochTime(
                self._last_epoch_ms,
                MIN_WATERMARK if self.tracker is None else self.tracker.stage_watermark(n),
                self.strategy,
            )
            for n in range(self._stages)
        )

    def after_epoch(
        self,
        splits: Iterable[str],
        written: Iterable[Any],
        time: EpochTime,
        ended_sources: tuple[str, ...] = (),
    ) -> None:
        """An epoch over ``splits`` ran at ``time``; ``written`` its partitions' results;
        ``ended_sources``: the split-name prefixes of the sources that have ended (one of
        several; when all have, the end of input moves the watermark)."""
        if self.tracker is None:
            return
        self.tracker.ended_sources = ended_sources
        maxima: dict[str, int] = {}
        for _, _, partition_maxima in written:
            merge_maxima(maxima, partition_maxima)
        self.tracker.observe(splits, maxima, time.processing_time_ms)

    def end_of_input_pending(self, exhausted: bool) -> bool:
        """A bounded input ended and its last watermark has not reached every stage."""
        return exhausted and self._timers and self.tracker is not None and not self.tracker.drained

    def wants_epoch_without_records(self, exhausted: bool) -> bool:
        """No new records: is an epoch due anyway? (Marks the end of input as run.)"""
        if not self._timers:
            return False
        if self.end_of_input_pending(exhausted):
            assert self.tracker is not None
            if not self.tracker.ended:
                self.tracker.end_of_input()
            return True
        return now_ms() - self._last_epoch_ms >= self._interval_ms

    def snapshot(self) -> list[tuple[str, int]]:
        return self.tracker.snapshot() if self.tracker is not None else []

    def restore(self, elements: Iterable[tuple[str, int]]) -> None:
        if self.tracker is not None:
            self.tracker.restore(elements, now_ms())
