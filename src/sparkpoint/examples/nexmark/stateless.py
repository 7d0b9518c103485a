"""The stateless queries: each bid becomes at most one output row.

q0 passes bids through, q1 converts prices to euros, q2 keeps the bids of some auctions,
q10 adds the date and minute partitions of the suite's file sink, q14 filters, classifies
the time of day and counts a character (the suite's user-defined function), q21 finds a
channel id, q22 splits the URL, q13 looks the auction up in a static side input. The row
function runs as a stage before ``key_by``, so only the rows are shuffled; the keyed stage
only forwards them (a sparkpoint pipeline always has one). It is keyed by the bid's event
time, which spreads rows evenly, where keying by auction or bidder would send the hot
ones to one subtask.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkpoint.examples.nexmark.events import (
    Bid,
    day_of,
    hour_of,
    in_euros,
    minute_of,
    suite_watermarks,
)
from sparkpoint.pipeline import Context, Key, KeyedProcessFunction, Pipeline

Row = dict[str, Any]

#: The channels with a fixed id (q21).
CHANNEL_IDS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
CHANNEL_ID_IN_URL = re.compile(r"(&|^)channel_id=([^&]*)")


class Forward(KeyedProcessFunction):
    """Each ``(key, row)`` goes on as its row: the keyed stage of a stateless query."""

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        ctx.collect(value[1])


def q0(bid: Bid) -> list[Row]:
    return [{k: bid[k] for k in ("auction", "bidder", "price", "date_time", "extra")}]


def q1(bid: Bid) -> list[Row]:
    return [{**q0(bid)[0], "price": in_euros(bid["price"])}]


def q2(bid: Bid) -> list[Row]:
    if bid["auction"] % 123 != 0:
        return []
    return [{"auction": bid["auction"], "price": bid["price"]}]


def q10(bid: Bid) -> list[Row]:
    ms = bid["date_time"]
    return [{**q0(bid)[0], "dt": day_of(ms), "hm": minute_of(ms)}]


def time_of_day(ms: int) -> str:
    hour = hour_of(ms)
    if 8 <= hour <= 18:
        return "dayTime"
    if hour <= 6 or hour >= 20:
        return "nightTime"
    return "otherTime"


def q14(bid: Bid) -> list[Row]:
    euro_thousandths = bid["price"] * 908  # 0.908 * price, times 1000, exactly
    if not 1_000_000_000 < euro_thousandths < 50_000_000_000:
        return []
    return [
        {
            "auction": bid["auction"],
            "bidder": bid["bidder"],
            "price": in_euros(bid["price"]),
            "bidTimeType": time_of_day(bid["date_time"]),
            "date_time": bid["date_time"],
            "extra": bid["extra"],
            "c_counts": bid["extra"].count("c"),
        }
    ]


def q21(bid: Bid) -> list[Row]:
    found = CHANNEL_ID_IN_URL.search(bid["url"])
    channel_id = CHANNEL_IDS.get(bid["channel"].lower(), found and found.group(2))
    if channel_id is None:
        return []
    keep = ("auction", "bidder", "price", "channel")
    return [{**{k: bid[k] for k in keep}, "channel_id": channel_id}]


def url_part(url: str, index: int) -> str | None:
    """``SPLIT_INDEX(url, '/', index)``: null past the last part."""
    parts = url.split("/")
    return parts[index] if index < len(parts) else None


def q22(bid: Bid) -> list[Row]:
    keep = ("auction", "bidder", "price", "channel")
    dirs = {f"dir{n}": url_part(bid["url"], n + 2) for n in (1, 2, 3)}
    return [{**{k: bid[k] for k in keep}, **dirs}]


ROWS: dict[str, Callable[[Bid], list[Row]]] = {
    "q0": q0, "q1": q1, "q2": q2, "q10": q10, "q14": q14, "q21": q21, "q22": q22,
}  # fmt: skip


@dataclass(frozen=True)
class KeyedRows:
    """``(the bid's event time, row)`` for each row of ``rows(bid)``."""

    rows: Callable[[Bid], list[Row]]

    def __call__(self, bid: Bid) -> list[tuple[int, Row]]:
        return [(bid["date_time"], row) for row in self.rows(bid)]


def key_of(keyed_row: tuple[int, Row]) -> int:
    return keyed_row[0]


class SideInputJoin:
    """q13: each bid with the side input's value of its auction modulo 10 000 (a static
    table, read when the pipeline is built and shipped with the stage); a bid without
    one has no row (an inner join)."""

    def __init__(self, path: str | Path) -> None:
        lines = Path(path).read_text().splitlines()
        self.values = {int(k): v for k, v in (line.split(",", 1) for line in lines)}

    def __call__(self, bid: Bid) -> list[Row]:
        value = self.values.get(bid["auction"] % 10_000)
        if value is None:
            return []
        keep = ("auction", "bidder", "price", "date_time")
        return [{**{k: bid[k] for k in keep}, "value": value}]


def stateless_query(rows: Callable[[Bid], list[Row]], bids: Pipeline, name: str) -> Pipeline:
    """``bids`` (events.bid_stream) → the rows ``rows(bid)`` of each bid."""
    return (
        bids.flat_map(KeyedRows(rows), name=name)
        .assign_timestamps(suite_watermarks(key_of))  # the bid's time, on the pair
        .key_by(key_of, key_type=int)
        .process(Forward(), uid="forward")
    )
