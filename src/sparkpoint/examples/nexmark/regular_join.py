"""q3 and q20: the suite's regular (unbounded) inner joins, of persons with the auctions
they sell (q3) and of bids with the auctions they are on (q20).

Each joins on an id that one side has once — a person's id, an auction's id — so the
join is that row looked up by the other side's records: both inputs are keyed by the id
(``connect``), the row is kept in the key's state when it comes, and a record of the
other side is joined with it at once or, when the row has not come yet (the generator
names persons and auctions up to a few ids ahead), waits in the key's state for it. No
time bound: as in the suite, a record may join however long after the row.

The row's own condition (q3: the person's state; q20: the auction's category) is tested
when the row comes; a row that fails it is kept as a mark only, so that the records
waiting for it, and those that come later, are dropped rather than kept for ever (the
suite keeps both sides whole; the result is the same).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparkpoint.examples.nexmark.events import Event, EventFiles
from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedCoProcessFunction,
    ListStateDescriptor,
    Pipeline,
    RuntimeContext,
    ValueStateDescriptor,
)

Row = dict[str, Any]
#: The mark of a row that came and failed its condition.
NOT_JOINED = False
#: q3's states, as the crate writes them (lower case, where the suite's generator has
#: upper case: ``'OR'``, ``'ID'``, ``'CA'``).
LOCAL_STATES = ("or", "id", "ca")
CATEGORY = 10


class JoinWithRow(KeyedCoProcessFunction):
    """First input: the key's one row (kept if ``keep(row)``); second: records joined
    with it as ``joined(row, record)``."""

    def __init__(self, keep: Callable[[Event], bool], joined: Callable[[Event, Event], Row]):
        self.keep = keep
        self.joined = joined

    def open(self, ctx: RuntimeContext) -> None:
        self.row = ctx.get_state(ValueStateDescriptor("row"))
        self.waiting = ctx.get_list_state(ListStateDescriptor("waiting"))

    def process_element1(self, key: Key, value: Event, ctx: Context) -> None:
        row = value if self.keep(value) else NOT_JOINED
        self.row.update(row)
        if row is not NOT_JOINED:
            for record in self.waiting.get():
                ctx.collect(self.joined(row, record))
        self.waiting.clear()

    def process_element2(self, key: Key, value: Event, ctx: Context) -> None:
        row = self.row.value()
        if row is None:
            self.waiting.add(value)
        elif row is not NOT_JOINED:
            ctx.collect(self.joined(row, value))


def is_local(person: Event) -> bool:
    return person["state"] in LOCAL_STATES


def in_category(auction: Event) -> bool:
    return auction["category"] == CATEGORY


def seller_row(person: Event, auction: Event) -> Row:
    """q3's columns: who sells, where, and which auction."""
    return {k: person[k] for k in ("name", "city", "state")} | {"id": auction["id"]}


def expanded_bid(auction: Event, bid: Event) -> Row:
    """q20's columns: the bid, then its auction's."""
    return {
        **{k: bid[k] for k in ("auction", "bidder", "price", "channel", "url")},
        "bid_date_time": bid["date_time"],
        "bid_extra": bid["extra"],
        **{k: auction[k] for k in ("item_name", "description", "initial_bid", "reserve")},
        "auction_date_time": auction["date_time"],
        **{k: auction[k] for k in ("expires", "seller", "category")},
        "auction_extra": auction["extra"],
    }


@dataclass(frozen=True)
class Field:
    """``record[name]``, as an int key."""

    name: str

    def __call__(self, record: Event) -> int:
        return int(record[self.name])


def seller_only(auction: Event) -> Event:
    """What q3 needs of an auction (its id, seller and time): the rest is not kept."""
    return {k: auction[k] for k in ("id", "seller", "date_time")}


def q3(files: EventFiles) -> Pipeline:
    persons = files.stream("persons").key_by(Field("id"), key_type=int)
    auctions = (
        files.stream("auctions")
        .filter(in_category, name="category-10")
        .map(seller_only, name="sellers")
        .key_by(Field("seller"), key_type=int)
    )
    return persons.connect(auctions).process(JoinWithRow(is_local, seller_row), uid="join")


def q20(files: EventFiles) -> Pipeline:
    auctions = files.stream("auctions").key_by(Field("id"), key_type=int)
    bids = files.stream("bids").key_by(Field("auction"), key_type=int)
    return auctions.connect(bids).process(JoinWithRow(in_category, expanded_bid), uid="join")
