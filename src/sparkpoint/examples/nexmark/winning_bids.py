"""q9, q4 and q6: each auction joined with the bids made during its lifetime — from its
``date_time`` to its ``expires``, both included — and its winning bid: the highest,
the earliest of equal ones (q9); then the average winning price per category (q4) and
per seller over its last closed auctions (q6: an upserted OVER window, SellerAverages).

The suite writes the join as a regular join with the lifetime in its WHERE clause, then
``ROW_NUMBER()`` (q9) or ``MAX`` (q4) over it: an updating result, final once every bid
of the auction's lifetime is in. Here the auctions and the bids are keyed by auction id
into one function: it keeps the auction and the best bid so far, and when the watermark
passes ``expires`` — no bid that is not late can still fall in the lifetime — emits the
winner once and drops the key's state. A bid that comes before its auction (another
source, another split, or an auction id the generator names ahead) waits until the
watermark passes the bid's own time: an auction that comes later starts after the bid,
which then cannot be in its lifetime. An auction without a bid in its lifetime has no
winner and no row (an inner join).

Equal bids (same price and time) are ordered by the rest of the bid, as q19's, so the
winner does not depend on arrival order (the suite's ``ROW_NUMBER`` picks any).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from sparkpoint.examples.nexmark.events import Event, EventFiles
from sparkpoint.examples.nexmark.ranking import standing
from sparkpoint.examples.nexmark.regular_join import Field
from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    Pipeline,
    RuntimeContext,
    TimerContext,
    ValueStateDescriptor,
)

Row = dict[str, Any]
AUCTION_FIELDS = ("id", "item_name", "description", "initial_bid", "reserve", "date_time",
                  "expires", "seller", "category", "extra")  # fmt: skip


def in_lifetime(auction: Event, bid: Event) -> bool:
    return auction["date_time"] <= bid["date_time"] <= auction["expires"]


def highest_price(bid: Event) -> tuple[int]:
    """q4's order (the smaller, the better): only the price counts."""
    return (-bid["price"],)


class WinningBids(KeyedCoProcessFunction):
    """Auctions (first input) and bids (second), keyed by auction id: at each auction's
    expiry, ``row(auction, winning bid)`` if it had a bid; the winner is the smallest
    ``order(bid)`` (ranking.standing: the highest, then the earliest …)."""

    def __init__(
        self, row: Callable[[Event, Event], Row], order: Callable[[Event], Any] = standing
    ) -> None:
        self.row = row
        self.order = order

    def better(self, bid: Event, best: Event | None) -> bool:
        return best is None or self.order(bid) < self.order(best)

    def open(self, ctx: RuntimeContext) -> None:
        self.auction = ctx.get_state(ValueStateDescriptor("auction"))
        self.best = ctx.get_state(ValueStateDescriptor("best"))
        #: Bids before their auction, by time: each dropped when the watermark passes it.
        self.waiting = ctx.get_map_state(MapStateDescriptor("waiting"))

    def process_element1(self, key: Key, value: Event, ctx: Context) -> None:
        best = None
        for _, bids in self.waiting.items():
            for bid in bids:
                if in_lifetime(value, bid) and self.better(bid, best):
                    best = bid
        self.waiting.clear()
        self.auction.update(value)
        if best is not None:
            self.best.update(best)
        ctx.register_event_time_timer(value["expires"])

    def process_element2(self, key: Key, value: Event, ctx: Context) -> None:
        auction = self.auction.value()
        if auction is None:  # not come yet, or closed (then the bid is after its end)
            at = value["date_time"]
            self.waiting.put(at, [*(self.waiting.get(at) or ()), value])
            ctx.register_event_time_timer(at)
        elif in_lifetime(auction, value) and self.better(value, self.best.value()):
            self.best.update(value)

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        auction = self.auction.value()
        if auction is not None and timestamp >= auction["expires"]:
            best = self.best.value()
            if best is not None:
                ctx.collect(self.row(auction, best))
            self.auction.clear()
            self.best.clear()
        self.waiting.remove(timestamp)


def auction_with_winner(auction: Event, bid: Event) -> Row:
    """q9's columns: the auction's, then its winning bid's."""
    return {
        **{k: auction[k] for k in AUCTION_FIELDS},
        **{k: bid[k] for k in ("auction", "bidder", "price")},
        "bid_date_time": bid["date_time"],
        "bid_extra": bid["extra"],
    }


def category_price(auction: Event, bid: Event) -> Row:
    return {"category": auction["category"], "price": bid["price"]}


def lean_bid(bid: Event) -> Event:
    """What q4 needs of a bid (its auction, time and price)."""
    return {k: bid[k] for k in ("auction", "price", "date_time")}


def lean_auction(auction: Event) -> Event:
    return {k: auction[k] for k in ("id", "date_time", "expires", "seller", "category")}


class CategoryAverage(KeyedProcessFunction):
    """Per category, the average winning price of its auctions closed so far, as an
    upsert with ``version`` (the count of them), each time one closes. An average of
    BIGINT is a BIGINT in the suite: the quotient, truncated."""

    def open(self, ctx: RuntimeContext) -> None:
        self.total = ctx.get_state(ValueStateDescriptor("total", (0, 0)))

    def process_element(self, key: Key, value: Row, ctx: Context) -> None:
        prices, count = self.total.value()
        prices, count = prices + value["price"], count + 1
        self.total.update((prices, count))
        ctx.collect({"category": key, "final": prices // count, "version": count})


#: q6's frame: ``ROWS BETWEEN 10 PRECEDING AND CURRENT ROW`` (so up to 11 auctions, where
#: the suite's prose says the last 10).
PRECEDING = 10


def seller_sale(auction: Event, bid: Event) -> Row:
    """What q6 needs of a closed auction: its seller, and its winning bid's time and price
    (the auction's id orders two winning bids of one time)."""
    return {"seller": auction["seller"], "sold_at": (bid["date_time"], auction["id"]),
            "price": bid["price"]}  # fmt: skip


class SellerAverages(KeyedProcessFunction):
    """Per seller, its closed auctions ordered by their winning bid's time (then by id),
    each with the average price of itself and the ``PRECEDING`` before it: the suite's
    OVER window. An auction closes when its lifetime ends, not in the order of its
    winning bid's time, so it may fall before auctions already there: its row and those
    of the ``PRECEDING`` after it change, and are emitted as upserts of (seller,
    auction), with ``version`` (the count of the seller's closed auctions so far)."""

    def open(self, ctx: RuntimeContext) -> None:
        #: ((bid time, auction id), price) of each closed auction, in that order.
        self.sales = ctx.get_state(ValueStateDescriptor("sales", ()))

    def process_element(self, key: Key, value: Row, ctx: Context) -> None:
        sales = list(self.sales.value())
        sold_at = tuple(value["sold_at"])
        at = bisect.bisect_left(sales, (sold_at,))
        sales.insert(at, (sold_at, value["price"]))
        self.sales.update(tuple(sales))
        for row in range(at, min(at + PRECEDING + 1, len(sales))):
            frame = [price for _, price in sales[max(0, row - PRECEDING) : row + 1]]
            ctx.collect({"seller": key, "auction": sales[row][0][1],
                         "avg_price": sum(frame) // len(frame), "version": len(sales)})  # fmt: skip


def winners(files: EventFiles, winner: WinningBids, *, lean: bool = False) -> Pipeline:
    """The auctions and the bids into ``winner``; ``lean``: only the fields q4 needs
    cross the shuffle and wait in state."""
    auctions, bids = files.stream("auctions"), files.stream("bids")
    if lean:
        auctions = auctions.map(lean_auction, name="lean-auctions")
        bids = bids.map(lean_bid, name="lean-bids")
    keyed_bids = bids.key_by(Field("auction"), key_type=int)
    return (
        auctions.key_by(Field("id"), key_type=int)
        .connect(keyed_bids)
        .process(winner, uid="winning-bids")
    )


def q6(files: EventFiles) -> Pipeline:
    return (
        winners(files, WinningBids(seller_sale))
        .key_by(Field("seller"), key_type=int)
        .process(SellerAverages(), uid="seller-averages")
    )


def q9(files: EventFiles) -> Pipeline:
    return winners(files, WinningBids(auction_with_winner))


def q4(files: EventFiles) -> Pipeline:
    return (
        winners(files, WinningBids(category_price, highest_price), lean=True)
        .key_by(Field("category"), key_type=int)
        .process(CategoryAverage(), uid="averages")
    )
