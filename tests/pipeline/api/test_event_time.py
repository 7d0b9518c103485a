"""The driver's watermark bookkeeping: per-split maxima, the minimum over splits, idle
splits, the lag of later keyed stages, the end of input and the round trip through a
checkpoint's elements."""

from __future__ import annotations

import pytest

from sparkpoint.pipeline.api.event_time import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    WatermarkStrategy,
    WatermarkTracker,
    carried_timestamp,
    split_of,
)


def tracker(idle_timeout_ms: int | None = None, depth: int = 0) -> WatermarkTracker:
    strategy = WatermarkStrategy(
        lambda e: e, max_out_of_orderness_ms=100, idle_timeout_ms=idle_timeout_ms
    )
    return WatermarkTracker(strategy, depth=depth)


def test_the_watermark_is_the_slowest_split_less_the_out_of_orderness() -> None:
    t = tracker()
    t.observe(["a", "b"], {"a": 5_000}, now_ms=0)
    assert t.current == MIN_WATERMARK  # b has shown nothing yet: it holds the watermark
    t.observe(["a", "b"], {"a": 6_000, "b": 2_000}, now_ms=10)
    assert t.current == 2_000 - 100 - 1
    t.observe(["a", "b"], {"b": 1_000}, now_ms=20)  # an older record never moves it back
    assert t.current == 1_899


def test_an_idle_split_stops_holding_the_watermark_back_until_it_has_records() -> None:
    t = tracker(idle_timeout_ms=1_000)
    t.observe(["a", "b"], {"a": 5_000, "b": 2_000}, now_ms=0)
    assert t.current == 1_899
    t.observe(["a"], {"a": 9_000}, now_ms=1_500)  # b: nothing for 1.5 s
    assert t.current == 9_000 - 101
    t.observe(["a", "b"], {"b": 3_000}, now_ms=1_600)  # b is back, behind: the mark holds
    assert t.current == 8_899


def test_later_stages_run_an_epoch_behind_and_drain_after_the_end() -> None:
    t = tracker(depth=2)
    t.observe(["a"], {"a": 1_000}, now_ms=0)
    t.observe(["a"], {"a": 2_000}, now_ms=0)
    assert [t.stage_watermark(s) for s in range(3)] == [1_899, 899, MIN_WATERMARK]
    t.end_of_input()
    assert t.stage_watermark(0) == MAX_WATERMARK and not t.drained
    for _ in range(3):
        assert not t.drained
        t.observe([], {}, now_ms=0)
    assert t.drained and [t.stage_watermark(s) for s in range(3)] == [MAX_WATERMARK] * 3


def test_the_watermark_comes_back_from_the_checkpoint_elements() -> None:
    t = tracker(depth=1)
    t.observe(["a", "b"], {"a": 1_000, "b": 4_000}, now_ms=0)
    t.observe(["a", "b"], {"a": 3_000}, now_ms=0)
    again = tracker(depth=1)
    again.restore(t.snapshot(), now_ms=0)
    assert (again.current, again.lagged, again.maxima) == (t.current, t.lagged, t.maxima)
    # A job that gained a keyed stage since: the new stage starts with the last one's lag.
    deeper = tracker(depth=2)
    deeper.restore(t.snapshot(), now_ms=0)
    assert deeper.lagged == [t.lagged[0], t.lagged[0]]


def test_bad_strategies_and_timestamps_are_named() -> None:
    with pytest.raises(ValueError, match="max_out_of_orderness_ms -1"):
        WatermarkStrategy(lambda e: e, max_out_of_orderness_ms=-1)
    with pytest.raises(ValueError, match="idle_timeout_ms 0"):
        WatermarkStrategy(lambda e: e, idle_timeout_ms=0)
    with pytest.raises(TypeError, match="int of milliseconds"):
        WatermarkStrategy(lambda e: e["ts"]).timestamp_of({"ts": "soon"})


def test_orders_give_their_split_and_carried_timestamp() -> None:
    assert split_of(("gen-1", 5, 0)) == "gen-1"
    assert split_of((0, ("gen-2", 7), b"row")) == "gen-2"  # a DataFrame stage kept it
    assert split_of((1, (), b"row")) is None  # … or dropped it
    assert carried_timestamp((1_000, 2, 0)) == 1_000
    assert carried_timestamp((0, (1_000, 2, 0), b"row")) == 1_000
    assert carried_timestamp((MIN_WATERMARK, 2, 0)) is None
