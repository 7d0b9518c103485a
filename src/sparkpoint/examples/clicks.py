"""Per-user running totals and sessions over generated click events.

For every click the job emits the user's running totals (clicks, amount, distinct pages,
the last three pages); when a click comes more than ``gap_ms`` after the user's previous
one, it first emits the session that ended. Exercises ValueState, ListState, MapState
and operator list state.

:func:`expected_output` computes the same lines offline, without Spark or sparkpoint's
state, from the same input: the exactly-once checks compare it with what the sink
committed. :func:`expected_state` computes the keyed state a checkpoint holds after the
records it consumed: the state-reading checks compare it with what they read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sparkpoint.pipeline import (
    ClickEventSource,
    Context,
    DistributionMode,
    InitializationContext,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorListStateDescriptor,
    Pipeline,
    RuntimeContext,
    TransactionalFileSink,
    ValueStateDescriptor,
    to_json_line,
)

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
    lines: list[str] = []
    for user, events in _by_user(records).items():
        state = _UserState()
        for e in events:
            lines.extend(to_json_line(out) for out in state.click(user, e, gap_ms))
    return sorted(lines)


def expected_state(
    records: Iterable[tuple[str, int, dict[str, Any]]], gap_ms: int = SESSION_GAP_MS
) -> dict[tuple[str, str], Any]:
    """``{(user, state name): value}``: the keyed state :class:`ClickTotals` holds after
    ``records`` (``(split, position, event)``, e.g. those a checkpoint consumed), as
    ``sparkpoint state read`` gives it, computed directly."""
    out: dict[tuple[str, str], Any] = {}
    for user, events in _by_user(records).items():
        state = _UserState()
        for e in events:
            state.click(user, e, gap_ms)
        out[user, "totals"] = (state.clicks, state.amount)
        out[user, "session"] = state.session
        out[user, "pages"] = state.pages
        out[user, "recent"] = state.recent
    return out


def _by_user(
    records: Iterable[tuple[str, int, dict[str, Any]]],
) -> dict[str, list[dict[str, Any]]]:
    """Each user's events in (split, position) order: the order the job sees them in."""
    by_user: dict[str, list[tuple[tuple[str, int], dict[str, Any]]]] = {}
    for split, position, event in records:
        by_user.setdefault(user_of(event), []).append(((split, position), event))
    return {
        user: [e for _, e in sorted(events, key=lambda e: e[0])] for user, events in by_user.items()
    }


@dataclass
class _UserState:
    """One user's state as :class:`ClickTotals` keeps it, without Spark or sparkpoint."""

    clicks: int = 0
    amount: int = 0
    pages: dict[str, int] = field(default_factory=dict)
    recent: list[str] = field(default_factory=list)
    session: tuple[int, int, int, int] | None = None  # start, last, clicks, amount

    def click(self, user: str, e: dict[str, Any], gap_ms: int) -> list[dict[str, Any]]:
        """Take one click in; return what the function emits for it."""
        emitted: list[dict[str, Any]] = []
        if self.session is not None and e["ts"] - self.session[1] > gap_ms:
            start, last, clicks, amount = self.session
            emitted.append({"type": "session", "user": user, "start": start, "end": last,
                            "clicks": clicks, "amount": amount})  # fmt: skip
            self.session = None
        start, _, n, total = self.session or (e["ts"], e["ts"], 0, 0)
        self.session = (start, e["ts"], n + 1, total + e["amount"])
        self.clicks, self.amount = self.clicks + 1, self.amount + e["amount"]
        self.pages[e["page"]] = self.pages.get(e["page"], 0) + 1
        self.recent = [*self.recent, e["page"]][-RECENT:]
        emitted.append({"type": "total", "user": user, "ts": e["ts"], "clicks": self.clicks,
                        "amount": self.amount, "pages": len(self.pages),
                        "recent": self.recent})  # fmt: skip
        return emitted
