"""q15, q16, q17: per-day statistics of the bids — of all of them (q15), per channel
(q16), per auction (q17). The suite groups by ``DATE_FORMAT(dateTime, 'yyyy-MM-dd')`` in
an updating aggregate; here each group is a tumbling event-time window of one (UTC) day,
whose result is final once the watermark passes the day's end.

Prices fall in three ranks: below 10 000, below 1 000 000, and the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkpoint.examples.nexmark.events import DAY_MS, Bid, day_of, minute_of
from sparkpoint.pipeline import AggregateFunction, Pipeline, TumblingEventTimeWindows

RANKS = (1, 2, 3)


def rank_of(price: int) -> int:
    return 1 if price < 10_000 else 2 if price < 1_000_000 else 3


@dataclass
class Tally:
    """Bids, and distinct bidders and auctions, of all ranks (0) and of each rank."""

    bids: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    bidders: list[set[int]] = field(default_factory=lambda: [set() for _ in range(4)])
    auctions: list[set[int]] = field(default_factory=lambda: [set() for _ in range(4)])
    minute: str = ""  # the latest HH:mm seen (q16)


class RankedCounts(AggregateFunction):
    """q15's and q16's columns (q16 adds ``minute``)."""

    def create_accumulator(self) -> Tally:
        return Tally()

    def add(self, value: Bid, accumulator: Tally) -> Tally:
        for r in (0, rank_of(value["price"])):
            accumulator.bids[r] += 1
            accumulator.bidders[r].add(value["bidder"])
            accumulator.auctions[r].add(value["auction"])
        accumulator.minute = max(accumulator.minute, minute_of(value["date_time"]))
        return accumulator

    def merge(self, a: Tally, b: Tally) -> Tally:
        for r in range(4):
            a.bids[r] += b.bids[r]
            a.bidders[r] |= b.bidders[r]
            a.auctions[r] |= b.auctions[r]
        a.minute = max(a.minute, b.minute)
        return a

    def get_result(self, accumulator: Tally) -> dict[str, Any]:
        row: dict[str, Any] = {"minute": accumulator.minute}
        for what, counts in (
            ("bids", accumulator.bids),
            ("bidders", [len(s) for s in accumulator.bidders]),
            ("auctions", [len(s) for s in accumulator.auctions]),
        ):
            row[f"total_{what}"] = counts[0]
            row.update({f"rank{r}_{what}": counts[r] for r in RANKS})
        return row


@dataclass
class PriceTally:
    bids: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    low: int | None = None
    high: int | None = None
    total: int = 0


class AuctionDay(AggregateFunction):
    """q17's columns: bids of each rank and the prices' min, max, average and sum."""

    def create_accumulator(self) -> PriceTally:
        return PriceTally()

    def add(self, value: Bid, accumulator: PriceTally) -> PriceTally:
        price = value["price"]
        accumulator.bids[0] += 1
        accumulator.bids[rank_of(price)] += 1
        accumulator.low = price if accumulator.low is None else min(accumulator.low, price)
        accumulator.high = price if accumulator.high is None else max(accumulator.high, price)
        accumulator.total += price
        return accumulator

    def merge(self, a: PriceTally, b: PriceTally) -> PriceTally:
        merged = PriceTally([x + y for x, y in zip(a.bids, b.bids, strict=True)])
        merged.low = min(x for x in (a.low, b.low) if x is not None)
        merged.high = max(x for x in (a.high, b.high) if x is not None)
        merged.total = a.total + b.total
        return merged

    def get_result(self, accumulator: PriceTally) -> dict[str, Any]:
        return {
            "total_bids": accumulator.bids[0],
            **{f"rank{r}_bids": accumulator.bids[r] for r in RANKS},
            "min_price": accumulator.low,
            "max_price": accumulator.high,
            "avg_price": accumulator.total // accumulator.bids[0],  # AVG of BIGINT: a BIGINT
            "sum_price": accumulator.total,
        }


def day_key(bid: Bid) -> str:
    return day_of(bid["date_time"])


def channel_day_key(bid: Bid) -> tuple[str, str]:
    return (bid["channel"], day_of(bid["date_time"]))


def auction_day_key(bid: Bid) -> tuple[int, str]:
    return (bid["auction"], day_of(bid["date_time"]))


def q15_row(window: dict[str, Any]) -> dict[str, Any]:
    row = dict(window["value"])
    del row["minute"]
    return {"day": window["key"], **row}


def q16_row(window: dict[str, Any]) -> dict[str, Any]:
    channel, day = window["key"]
    return {"channel": channel, "day": day, **window["value"]}


def q17_row(window: dict[str, Any]) -> dict[str, Any]:
    auction, day = window["key"]
    return {"auction": auction, "day": day, **window["value"]}


def q15(bids: Pipeline) -> Pipeline:
    return (
        bids.key_by(day_key, key_type=str)
        .window(TumblingEventTimeWindows(DAY_MS), aggregate=RankedCounts(), uid="days")
        .map(q15_row)
    )


def q16(bids: Pipeline) -> Pipeline:
    return (
        bids.key_by(channel_day_key)
        .window(TumblingEventTimeWindows(DAY_MS), aggregate=RankedCounts(), uid="channel-days")
        .map(q16_row)
    )


def q17(bids: Pipeline) -> Pipeline:
    return (
        bids.key_by(auction_day_key)
        .window(TumblingEventTimeWindows(DAY_MS), aggregate=AuctionDay(), uid="auction-days")
        .map(q17_row)
    )
