"""q7, highest bid: the bids at the highest price of each 10 s tumbling window.

The suite joins every bid with each window's highest price, keeping a bid whose time is
between the window's end - 10 s and its end, both included: a bid exactly at a window's
end (the first instant of the next window) counts for that window too. Here no join is
needed: each bid is keyed by the start of its window, and a bid at a window's start also
by the window before, where it waits apart from the window's own bids. A keyed function
keeps only the bids at the highest price so far and, when the watermark passes the
window's end, emits them and those of the waiting bids at the same price.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.examples.nexmark.events import Bid, suite_watermarks
from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedProcessFunction,
    ListStateDescriptor,
    Pipeline,
    RuntimeContext,
    TimerContext,
    ValueStateDescriptor,
)

WINDOW_MS = 10_000
FIELDS = ("auction", "bidder", "price", "date_time", "extra")


class Windowed:
    """``(window start, bid)`` for the bid's window and, for a bid at a window's start,
    for the window before, whose end it is."""

    def __init__(self, size_ms: int = WINDOW_MS) -> None:
        self.size_ms = size_ms

    def __call__(self, bid: Bid) -> list[tuple[int, Bid]]:
        start = bid["date_time"] - bid["date_time"] % self.size_ms
        pairs = [(start, bid)]
        if bid["date_time"] == start:
            pairs.append((start - self.size_ms, bid))
        return pairs


def window_start(pair: tuple[int, Bid]) -> int:
    return pair[0]


def bid_time(pair: tuple[int, Bid]) -> int:
    return int(pair[1]["date_time"])


class HighestBids(KeyedProcessFunction):
    def __init__(self, size_ms: int = WINDOW_MS) -> None:
        self.size_ms = size_ms

    def open(self, ctx: RuntimeContext) -> None:
        self.best = ctx.get_state(ValueStateDescriptor("best"))  # (price, bids at it)
        self.at_end = ctx.get_list_state(ListStateDescriptor("at_end"))

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        start, bid = value
        end = start + self.size_ms
        ctx.register_event_time_timer(end)
        if bid["date_time"] == end:
            self.at_end.add(bid)
            return
        best = self.best.value()
        if best is None or bid["price"] > best[0]:
            self.best.update((bid["price"], [bid]))
        elif bid["price"] == best[0]:
            self.best.update((best[0], [*best[1], bid]))

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        best = self.best.value()
        if best is not None:
            price, bids = best
            for bid in [*bids, *(b for b in self.at_end.get() if b["price"] == price)]:
                ctx.collect({k: bid[k] for k in FIELDS})
        self.best.clear()
        self.at_end.clear()


def q7(bids: Pipeline, *, size_ms: int = WINDOW_MS) -> Pipeline:
    return (
        bids.flat_map(Windowed(size_ms), name="windows")
        .assign_timestamps(suite_watermarks(bid_time))
        .key_by(window_start, key_type=int)
        .process(HighestBids(size_ms), uid="highest-bids")
    )
