"""q5, hot items: in every 10 s window sliding by 2 s, the auctions with the most bids.

The suite joins each window's bid counts per auction with the window's highest count.
Here that is two keyed stages and no join: bids counted per auction in sliding windows,
then the counts keyed by their window, where a window function keeps those equal to the
largest. A window's counts are stamped with its end - 1 and the second stage runs one
epoch behind the first in event time, so all of a window's counts are there when its
own (tumbling, one slide long) window fires.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.examples.nexmark.sessions import CountBids
from sparkpoint.pipeline import (
    Key,
    Pipeline,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
)

SIZE_MS, SLIDE_MS = 10_000, 2_000


def auction_of(bid: dict[str, Any]) -> int:
    return int(bid["auction"])


def window_of(count: dict[str, Any]) -> tuple[int, int]:
    return (count["start"], count["end"])


class Hottest(ProcessWindowFunction):
    """The counts of one sliding window: the auctions with the largest."""

    def process(self, key: Key, window: TimeWindow, elements: list[Any]) -> Iterable[Any]:
        most = max(c["value"] for c in elements)
        return [{"auction": c["key"], "num": c["value"]} for c in elements if c["value"] == most]


def q5(bids: Pipeline, *, size_ms: int = SIZE_MS, slide_ms: int = SLIDE_MS) -> Pipeline:
    return (
        bids.key_by(auction_of, key_type=int)
        .window(SlidingEventTimeWindows(size_ms, slide_ms), aggregate=CountBids(), uid="counts")
        .key_by(window_of)
        .window(TumblingEventTimeWindows(slide_ms), process=Hottest(), uid="hottest")
    )
