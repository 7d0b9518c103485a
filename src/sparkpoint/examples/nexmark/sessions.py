"""q11: how many bids each bidder makes in a session of activity — event-time session
windows per bidder, closed after 10 s without a bid."""

from __future__ import annotations

from typing import Any

from sparkpoint.examples.nexmark.events import Bid
from sparkpoint.pipeline import AggregateFunction, EventTimeSessionWindows, Pipeline

GAP_MS = 10_000


class CountBids(AggregateFunction):
    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Bid, accumulator: int) -> int:
        return accumulator + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def get_result(self, accumulator: int) -> int:
        return accumulator


def bidder_of(bid: Bid) -> int:
    return int(bid["bidder"])


def session_row(window: dict[str, Any]) -> dict[str, Any]:
    """``SESSION_START``/``SESSION_END``: the first bid's time, the last one's plus the gap."""
    return {
        "bidder": window["key"],
        "bid_count": window["value"],
        "starttime": window["start"],
        "endtime": window["end"],
    }


def q11(bids: Pipeline, *, gap_ms: int = GAP_MS) -> Pipeline:
    return (
        bids.key_by(bidder_of, key_type=int)
        .window(EventTimeSessionWindows(gap_ms), aggregate=CountBids(), uid="sessions")
        .map(session_row)
    )
