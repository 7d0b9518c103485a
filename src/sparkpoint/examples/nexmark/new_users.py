"""q8, new users: the persons who opened an auction in the same 10 s tumbling window in
which they entered the system.

The suite groups persons by (id, name, window) and auctions by (seller, window), then
joins the two on id and window. Here that is a window join of persons keyed by id with
auctions keyed by seller (``window_join``, tumbling 10 s windows): it hands over each
(person, auction) pair of a window when the watermark passes the window's end, and the
join function emits the person once per window — its first pair — as the suite's
GROUP BY does.
"""

from __future__ import annotations

from typing import Any

from sparkpoint.examples.nexmark.events import Event, EventFiles
from sparkpoint.examples.nexmark.regular_join import Field
from sparkpoint.pipeline import (
    JoinContext,
    Pipeline,
    ProcessJoinFunction,
    RuntimeContext,
    StateTtlConfig,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
)

WINDOW_MS = 10_000


#: The mark of a person emitted is needed only while its window's pairs are handed over,
#: all in one timer's call, in one epoch's task, whose processing time is one instant:
#: a TTL of 1 ms of processing time keeps it that long and lets checkpoints drop it.
WHILE_FIRING = StateTtlConfig(1)


class NewUser(ProcessJoinFunction):
    """A person and one of the auctions they opened in the window: the person's row,
    once per window (the pairs of a window come one after another)."""

    def open(self, ctx: RuntimeContext) -> None:
        self.emitted_for = ctx.get_state(ValueStateDescriptor("emitted-for", ttl=WHILE_FIRING))

    def process_element(self, left: Event, right: Event, ctx: JoinContext) -> None:
        assert ctx.window is not None
        if self.emitted_for.value() == ctx.window.start:
            return
        self.emitted_for.update(ctx.window.start)
        ctx.collect({"id": left["id"], "name": left["name"], "starttime": ctx.window.start})


def person_only(person: Event) -> Event:
    return {k: person[k] for k in ("id", "name", "date_time")}


def seller_time(auction: Event) -> dict[str, Any]:
    return {k: auction[k] for k in ("seller", "date_time")}


def q8(files: EventFiles, *, size_ms: int = WINDOW_MS) -> Pipeline:
    persons = files.stream("persons").map(person_only, name="persons-only")
    auctions = files.stream("auctions").map(seller_time, name="sellers")
    return (
        persons.key_by(Field("id"), key_type=int)
        .window_join(auctions.key_by(Field("seller"), key_type=int))
        .window(TumblingEventTimeWindows(size_ms))
        .apply(NewUser(), uid="new-users")
    )
