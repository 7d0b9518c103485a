"""q18 and q19: the last bid of each bidder on each auction, the ten highest bids of
each auction — the suite's ``ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)`` top-N.

These are updating results with no end in event time: as in the suite, every change is
emitted (an upsert of the changed rows). Each row carries ``version``, the count of
changes of its key so far; a key's current row is its row of the highest version
(:func:`sparkpoint.examples.nexmark.oracle.committed_rows` folds them so).

Ties are broken by the rest of the bid, so the result does not depend on the order in
which bids arrive (the suite's does, for bids of the same time or price): the last bid is
the greatest ``(date_time, price, channel, url, extra)``; the highest bids come by price
(highest first), then the earliest, then by bidder, channel, url and extra.
"""

from __future__ import annotations

import bisect
from typing import Any

from sparkpoint.examples.nexmark.events import Bid
from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedProcessFunction,
    Pipeline,
    RuntimeContext,
    ValueStateDescriptor,
)

TOP = 10
BID_FIELDS = ("auction", "bidder", "price", "channel", "url", "date_time", "extra")


def recency(bid: Bid) -> tuple[Any, ...]:
    """q18's order: the greater, the later."""
    return (bid["date_time"], bid["price"], bid["channel"], bid["url"], bid["extra"])


def standing(bid: Bid) -> tuple[Any, ...]:
    """q19's order: the smaller, the better."""
    price, time, bidder = -bid["price"], bid["date_time"], bid["bidder"]
    return (price, time, bidder, bid["channel"], bid["url"], bid["extra"])


def row(bid: Bid) -> dict[str, Any]:
    return {k: bid[k] for k in BID_FIELDS}


class LastBid(KeyedProcessFunction):
    """Per (bidder, auction): the latest bid so far; each newer one is emitted."""

    def open(self, ctx: RuntimeContext) -> None:
        self.last = ctx.get_state(ValueStateDescriptor("last"))
        self.version = ctx.get_state(ValueStateDescriptor("version", 0))

    def process_element(self, key: Key, value: Bid, ctx: Context) -> None:
        last = self.last.value()
        if last is not None and recency(value) <= recency(last):
            return
        self.last.update(value)
        self.version.update(self.version.value() + 1)
        ctx.collect({**row(value), "version": self.version.value()})


class TopBids(KeyedProcessFunction):
    """Per auction: the ten best bids so far; a bid that enters them emits its rank and
    every rank below it, which moved down."""

    def open(self, ctx: RuntimeContext) -> None:
        self.top = ctx.get_state(ValueStateDescriptor("top", ()))
        self.version = ctx.get_state(ValueStateDescriptor("version", 0))

    def process_element(self, key: Key, value: Bid, ctx: Context) -> None:
        top = list(self.top.value())
        at = bisect.bisect_left([standing(b) for b in top], standing(value))
        if at >= TOP:
            return
        top.insert(at, value)
        del top[TOP:]
        self.top.update(tuple(top))
        self.version.update(self.version.value() + 1)
        for rank in range(at, len(top)):
            ranked = {**row(top[rank]), "rank_number": rank + 1}
            ctx.collect({**ranked, "version": self.version.value()})


def bidder_auction(bid: Bid) -> tuple[int, int]:
    return (bid["bidder"], bid["auction"])


def auction_of(bid: Bid) -> int:
    return int(bid["auction"])


def q18(bids: Pipeline) -> Pipeline:
    return bids.key_by(bidder_auction).process(LastBid(), uid="last-bids")


def q19(bids: Pipeline) -> Pipeline:
    return bids.key_by(auction_of, key_type=int).process(TopBids(), uid="top-bids")
