"""Per-user running totals and sessions over generated click events.

For every click the job emits the user's running totals (clicks, amount, distinct pages,
the last three pages); when a click comes more than ``gap_ms`` after the user's previous
one, it first emits the session that ended. Exercises ValueState, ListState, MapState
and operator list state.

:func:`expected_output` computes the same lines offline, without Spark or sparkpoint's
state, from the same input: the exactly-once checks compare it with what the sink
committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.checkpoint import DistributionMode
from sparkpoint.pipeline.builder import Pipeline
from sparkpoint.pipeline.functions import (
    Context,
    InitializationContext,
    KeyedProcessFunction,
    RuntimeContext,
)
from sparkpoint.pipeline.keyed_state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.operator_state import OperatorListStateDescriptor
from sparkpoint.pipeline.sink import TransactionalFileSink, to_json_line
from sparkpoint.pipeline.sources.generator import ClickEventSource

SESSION_GAP_MS = 2_000
RECENT = 3


class ClickTotals(KeyedProcessFunction):
    def __init__(self, gap_ms: int = SESSION_GAP_MS) -> None:
        self.gap_ms = gap_ms

    def initialize_state(self, ctx: InitializationContext) -> None:
        # How many clicks this subtask handled: operator state, redistributed on rescale.
        self.handled = ctx.get_list_state(
            OperatorListStateDescriptor("handled", DistributionMode.SPLIT_DISTRIBUTE)
        )
        self._handled_now = 0

    def open(self, ctx: RuntimeContext) -> None:
        self.totals = ctx.get_state(ValueStateDescriptor("totals", (0, 0)))
        self.session = ctx.get_state(ValueStateDescriptor("session"))
        self.recent = ctx.get_list_state(ListStateDescriptor("recent"))
        self.pages = ctx.get_map_state(MapStateDescriptor("pages"))

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        ts, amount, page = value["ts"], value["amount"], value["page"]
        session = self.session.value()
        if session is not None and ts - session[1] > self.gap_ms:
            start, last, clicks, total = session
            ctx.collect(
                {
                    "type": "session",
                    "user": key,
                    "start": start,
                    "end": last,
                    "clicks": clicks,
                    "amount": total,
                }
            )
            session = None
        if session is None:
            session = (ts, ts, 0, 0)
        self.session.update((session[0], ts, session[2] + 1, session[3] + amount))
        clicks, spent = self.totals.value()
        self.totals.update((clicks + 1, spent + amount))
        self.pages.put(page, (self.pages.get(page) or 0) + 1)
        recent = [*self.recent.get(), page][-RECENT:]
        self.recent.update(recent)
        ctx.collect(
            {
                "type": "total",
                "user": key,
                "ts": ts,
                "clicks": clicks + 1,
                "amount": spent + amount,
                "pages": len(self.pages.keys()),
                "recent": recent,
            }
        )
        self._handled_now += 1

    def snapshot_state(self, checkpoint_id: int) -> None:
        self._fold_handled()

    def close(self) -> None:
        self._fold_handled()

    def _fold_handled(self) -> None:
        if self._handled_now:
            self.handled.update([sum(self.handled.get()) + self._handled_now])
            self._handled_now = 0


def clicks_pipeline(
    job_id: str,
    source: ClickEventSource,
    output_dir: str,
    *,
    parallelism: int = 4,
    max_parallelism: int = 128,
    gap_ms: int = SESSION_GAP_MS,
) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=parallelism, max_parallelism=max_parallelism)
        .source(source)
        .key_by(user_of)
        .process(ClickTotals(gap_ms))
        .sink(TransactionalFileSink(output_dir))
    )


def user_of(event: dict[str, Any]) -> str:
    return str(event["user"])


def expected_output(
    records: Iterable[tuple[str, int, dict[str, Any]]], gap_ms: int = SESSION_GAP_MS
) -> list[str]:
    """The job's output lines, sorted, computed directly from ``(split, position,
    event)`` records: each user's clicks in (split, position) order."""
    by_user: dict[str, list[tuple[tuple[str, int], dict[str, Any]]]] = {}
    for split, position, event in records:
        by_user.setdefault(user_of(event), []).append(((split, position), event))
    lines: list[str] = []
    for user, events in by_user.items():
        events.sort(key=lambda e: e[0])
        clicks = spent = 0
        pages: set[str] = set()
        recent: list[str] = []
        session: list[int] | None = None  # start, last, clicks, amount
        for _, e in events:
            if session is not None and e["ts"] - session[1] > gap_ms:
                lines.append(
                    to_json_line(
                        {
                            "type": "session",
                            "user": user,
                            "start": session[0],
                            "end": session[1],
                            "clicks": session[2],
                            "amount": session[3],
                        }
                    )
                )
                session = None
            if session is None:
                session = [e["ts"], e["ts"], 0, 0]
            session[1], session[2], session[3] = e["ts"], session[2] + 1, session[3] + e["amount"]
            clicks, spent = clicks + 1, spent + e["amount"]
            pages.add(e["page"])
            recent = [*recent, e["page"]][-RECENT:]
            lines.append(
                to_json_line(
                    {
                        "type": "total",
                        "user": user,
                        "ts": e["ts"],
                        "clicks": clicks,
                        "amount": spent,
                        "pages": len(pages),
                        "recent": recent,
                    }
                )
            )
    return sorted(lines)
