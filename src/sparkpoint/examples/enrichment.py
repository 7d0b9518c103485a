"""Two inputs into one keyed function: clicks enriched with a users changelog
(``connect``), and per-user window totals over two click streams (``union``).

*Enrichment.* Every click gets the user's profile as it was at the click's event time:
the profile update with the largest timestamp at or before it. The clicks (input 1)
and the updates (input 2) are keyed by user and connected into :class:`EnrichClicks`,
a ``KeyedCoProcessFunction``: an update goes into the key's map state (timestamp →
profile); a click waits in map state under an event-time timer at its timestamp. The
timer fires once the watermark — the smaller of the two inputs' — passes the click, so
every update at or before it has arrived, however far one input runs ahead of the other
in event time, and the result depends on neither the epochs nor the order of arrival.

*Union.* :func:`union_totals_pipeline` reads two click sources, each under its own uid,
as one stream: per user and tumbling event-time window, the number of clicks and their
amount.

:func:`expected_enriched` and :func:`expected_union_totals` compute the same lines
offline.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from sparkpoint.pipeline import (
    Context,
    Key,
    KeyedCoProcessFunction,
    MapStateDescriptor,
    Pipeline,
    RuntimeContext,
    Source,
    TimerContext,
    TransactionalFileSink,
    TumblingEventTimeWindows,
    WatermarkStrategy,
    to_json_line,
)

#: How far behind its source's newest timestamp a record may come without being late.
OUT_OF_ORDER_MS = 2_000
WINDOW_MS = 10_000


def event_time(record: dict[str, Any]) -> int:
    return int(record["ts"])


def user_of(record: dict[str, Any]) -> str:
    return str(record["user"])


def as_update(record: dict[str, Any]) -> dict[str, Any]:
    """A generated click read as a profile update: the user's segment from then on."""
    return {"user": record["user"], "ts": record["ts"], "segment": record["page"]}


class EnrichClicks(KeyedCoProcessFunction):
    def open(self, ctx: RuntimeContext) -> None:
        self.profile = ctx.get_map_state(MapStateDescriptor("profile"))  # ts → segment
        self.waiting = ctx.get_map_state(MapStateDescriptor("waiting"))  # ts → clicks

    def process_element1(self, key: Key, click: Any, ctx: Context) -> None:
        assert ctx.timestamp is not None
        self.waiting.put(ctx.timestamp, [*(self.waiting.get(ctx.timestamp) or []), click])
        ctx.register_event_time_timer(ctx.timestamp)

    def process_element2(self, key: Key, update: Any, ctx: Context) -> None:
        assert ctx.timestamp is not None
        # Two updates of one timestamp: the larger segment wins, whatever came first.
        before = self.profile.get(ctx.timestamp)
        segment = update["segment"] if before is None else max(before, update["segment"])
        self.profile.put(ctx.timestamp, segment)

    def on_timer(self, timestamp: int, key: Key, ctx: TimerContext) -> None:
        times = sorted(self.profile.keys())
        at = bisect.bisect_right(times, timestamp)
        segment = self.profile.get(times[at - 1]) if at else None
        for click in self.waiting.get(timestamp) or []:
            ctx.collect({**click, "segment": segment})
        self.waiting.remove(timestamp)


def enrichment_pipeline(
    job_id: str, clicks: Source, updates: Source, out: str, parallelism: int = 4
) -> Pipeline:
    timed = WatermarkStrategy(event_time, max_out_of_orderness_ms=OUT_OF_ORDER_MS)
    p = Pipeline(job_id, parallelism=parallelism)
    click_stream = p.source(clicks, uid="clicks").assign_timestamps(timed)
    update_stream = p.source(updates, uid="updates").map(as_update).assign_timestamps(timed)
    return (
        click_stream.key_by(user_of, key_type=str)
        .connect(update_stream.key_by(user_of, key_type=str))
        .process(EnrichClicks(), uid="enrich")
        .sink(TransactionalFileSink(out, serialize=to_json_line))
    )


def expected_enriched(
    clicks: Iterable[tuple[str, int, dict[str, Any]]],
    updates: Iterable[tuple[str, int, dict[str, Any]]],
) -> list[str]:
    """The lines :func:`enrichment_pipeline` commits, computed offline, sorted."""
    profile: dict[str, dict[int, str]] = {}
    for _, _, record in updates:
        u = as_update(record)
        mine = profile.setdefault(u["user"], {})
        mine[u["ts"]] = max(mine.get(u["ts"], u["segment"]), u["segment"])
    lines = []
    for _, _, click in clicks:
        mine = profile.get(click["user"], {})
        before = [ts for ts in mine if ts <= click["ts"]]
        segment = mine[max(before)] if before else None
        lines.append(to_json_line({**click, "segment": segment}))
    return sorted(lines)


def one_click(click: dict[str, Any]) -> dict[str, Any]:
    return {"user": click["user"], "ts": click["ts"], "clicks": 1, "amount": click["amount"]}


def add_clicks(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two partial totals of a window (in any order: the result is the same)."""
    return {
        "user": a["user"],
        "ts": max(a["ts"], b["ts"]),
        "clicks": a["clicks"] + b["clicks"],
        "amount": a["amount"] + b["amount"],
    }


def union_totals_pipeline(
    job_id: str, first: Source, second: Source, out: str, parallelism: int = 4
) -> Pipeline:
    p = Pipeline(job_id, parallelism=parallelism)
    return (
        p.source(first, uid="clicks-eu")
        .union(p.source(second, uid="clicks-us"))
        .map(one_click)
        .assign_timestamps(WatermarkStrategy(event_time, max_out_of_orderness_ms=OUT_OF_ORDER_MS))
        .key_by(user_of)
        .window(TumblingEventTimeWindows(WINDOW_MS), reduce=add_clicks, uid="totals")
        .sink(TransactionalFileSink(out, serialize=to_json_line))
    )


def expected_union_totals(*streams: Iterable[tuple[str, int, dict[str, Any]]]) -> list[str]:
    """The lines :func:`union_totals_pipeline` commits, computed offline, sorted."""
    windows: dict[tuple[str, int], dict[str, Any]] = {}
    for stream in streams:
        for _, _, click in stream:
            start = click["ts"] - click["ts"] % WINDOW_MS
            window = (click["user"], start)
            total = one_click(click)
            windows[window] = add_clicks(windows[window], total) if window in windows else total
    return sorted(
        to_json_line({"key": user, "start": start, "end": start + WINDOW_MS, "value": total})
        for (user, start), total in windows.items()
    )
