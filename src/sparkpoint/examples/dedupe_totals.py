"""Two keyed stages: de-duplicate clicks by their identity, then keep per-user totals.

Upstream delivers at least once: some clicks come twice (the ``redelivered`` stage
before the first ``key_by`` stands in for that). The first keyed stage is keyed by a
click's identity ``(user, ts)`` and lets only its first copy through; it remembers the
identities it saw for ``seen_ttl_ms`` of processing time (state TTL), which bounds its
state. Its outputs are re-keyed by user for the second keyed stage, which emits the
user's running ``clicks`` and ``amount`` for each click — in event-time order: the
clicks carry their timestamps from the first stage to the second, which processes an
epoch's records in timestamp order (without event time, the order of records that come
from several subtasks of the stage before is not defined). Each stage has its own uid,
so its state is checkpointed, restored and rescaled on its own.

:func:`expected_output` computes the same lines offline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedProcessFunction,
    Pipeline,
    RuntimeContext,
    Source,
    StateTtlConfig,
    TransactionalFileSink,
    ValueStateDescriptor,
    WatermarkStrategy,
    to_json_line,
)

SEEN_TTL_MS = 10 * 60_000


def redelivered(event: dict[str, Any]) -> list[dict[str, Any]]:
    """Every click whose amount is a multiple of 5 comes twice."""
    return [event, event] if event["amount"] % 5 == 0 else [event]


def identity(event: dict[str, Any]) -> tuple[str, int]:
    return (str(event["user"]), int(event["ts"]))


def event_time(event: dict[str, Any]) -> int:
    return int(event["ts"])


def user_of(event: dict[str, Any]) -> str:
    return str(event["user"])


class FirstCopy(KeyedProcessFunction):
    def __init__(self, seen_ttl_ms: int = SEEN_TTL_MS) -> None:
        self.seen_ttl_ms = seen_ttl_ms

    def open(self, ctx: RuntimeContext) -> None:
        self.seen = ctx.get_state(
            ValueStateDescriptor("seen", False, ttl=StateTtlConfig(self.seen_ttl_ms))
        )

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        if not self.seen.value():
            self.seen.update(True)
            ctx.collect(value)


class UserTotals(KeyedProcessFunction):
    def open(self, ctx: RuntimeContext) -> None:
        self.totals = ctx.get_state(ValueStateDescriptor("totals", (0, 0)))

    def process_element(self, key: Key, value: Any, ctx: Context) -> None:
        clicks, amount = self.totals.value()
        clicks, amount = clicks + 1, amount + value["amount"]
        self.totals.update((clicks, amount))
        ctx.collect({"user": key, "clicks": clicks, "amount": amount})


def dedupe_totals_pipeline(
    job_id: str, source: Source, out: str, *, parallelism: int = 4
) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=parallelism)
        .source(source)
        .assign_timestamps(WatermarkStrategy(event_time))
        .flat_map(redelivered, name="redelivered")
        .key_by(identity)
        .process(FirstCopy(), uid="dedupe")
        .key_by(user_of)
        .process(UserTotals(), uid="totals")
        .sink(TransactionalFileSink(out))
    )


def expected_output(records: Iterable[tuple[str, int, dict[str, Any]]]) -> list[str]:
    """Each click once, per user in time order, as running totals (sorted lines)."""
    per_user: dict[str, list[dict[str, Any]]] = {}
    for _, _, event in records:
        per_user.setdefault(user_of(event), []).append(event)
    lines = []
    for user, events in per_user.items():
        clicks = amount = 0
        for event in sorted(events, key=lambda e: e["ts"]):
            clicks, amount = clicks + 1, amount + event["amount"]
            lines.append(to_json_line({"user": user, "clicks": clicks, "amount": amount}))
    return sorted(lines)
