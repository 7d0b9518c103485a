"""The unbounded stream join (inner and left outer, with a TTL) and the session-window
join on real Spark (local mode): what the sinks commit — the joined pairs, the left
records without a partner and the late records — equals an offline computation of the
same out-of-order inputs with late records, across savepoints restored at other
parallelisms (4 → 3 → 6) on both state backends; the join's waiting records are
visible in its keyed state while it runs and gone at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkpoint.examples.sessions import epoch_watermarks
from sparkpoint.examples.shipments import (
    LATE_ORDERS,
    LATE_SHIPMENTS,
    OUT_OF_ORDER_MS,
    as_order,
    as_shipment,
    json_lines,
    keyed_inputs,
)
from sparkpoint.ops.cli.main import main
from sparkpoint.pipeline import (
    LATE,
    MIN_WATERMARK,
    ClickEventSource,
    EventTimeSessionWindows,
    JoinContext,
    Pipeline,
    ProcessJoinFunction,
    TransactionalFileSink,
    read_keyed_state,
    to_json_line,
)
from tests.pipeline import support

SPLITS, PER_EPOCH = 4, 200
PER_SPLIT = PER_EPOCH // SPLITS
TTL_MS = 700
GAP_MS = 1_000


def clicks(seed: int) -> ClickEventSource:
    """Out of order by up to 1.5 s, every 37th record of a split 600 s late; 160
    customers over 4 splits, 4 epochs of 50 records per split (2.5 s of event time)."""
    return ClickEventSource(
        splits=SPLITS,
        users=160,
        records_per_epoch=PER_EPOCH,
        records_per_split=200,
        seed=seed,
        out_of_order_ms=OUT_OF_ORDER_MS,
        late_every=37,
    )


def orders() -> ClickEventSource:
    return clicks(7)  # a new one per run: a source keeps its offsets


def shipments() -> ClickEventSource:
    return clicks(11)


class OrderMaybeShipped(ProcessJoinFunction):
    def process_element(self, order: Any, shipment: Any, ctx: JoinContext) -> None:
        ctx.collect(joined(order, shipment, ctx.window.start if ctx.window else None))


def joined(order: dict[str, Any], shipment: dict[str, Any] | None, window: int | None) -> Any:
    return {
        **order,
        "shipped_ts": shipment and shipment["ts"],
        "carrier": shipment and shipment["carrier"],
        "window": window,
    }


def committed(out: Path) -> list[str]:
    return sorted(TransactionalFileSink(str(out)).committed_lines())


# -- offline ----------------------------------------------------------------------------


def timed_inputs() -> tuple[dict[int, int], list[tuple[int, int, dict[str, Any]]]]:
    """The watermark of each epoch (the smallest over both inputs' splits) and every
    record as ``(side, epoch that reads it, value)``."""
    left, right = list(orders().all_records()), list(shipments().all_records())
    marks = epoch_watermarks(
        [(f"o/{s}", i, r) for s, i, r in left] + [(f"s/{s}", i, r) for s, i, r in right],
        PER_SPLIT,
        OUT_OF_ORDER_MS,
    )
    records = [(0, i // PER_SPLIT + 1, as_order(r)) for _, i, r in left]
    records += [(1, i // PER_SPLIT + 1, as_shipment(r)) for _, i, r in right]
    return marks, records


def mark_of(marks: dict[int, int], epoch: int) -> int:
    return marks.get(epoch, MIN_WATERMARK)


def expected_stream_join(left_outer: bool) -> tuple[list[str], list[str], list[str]]:
    """Offline, sorted: the lines, the late orders and the late shipments. Two records
    of one customer that are not late meet when read in one epoch, or when the earlier
    one's TTL has not ended by the later one's epoch (its watermark is below ts + TTL)."""
    marks, records = timed_inputs()
    late: tuple[list[str], list[str]] = ([], [])
    kept: tuple[list[Any], list[Any]] = ([], [])
    for side, epoch, value in records:
        if value["ts"] <= mark_of(marks, epoch):
            late[side].append(to_json_line(value))
        else:
            kept[side].append((epoch, value))

    def meet(a: tuple[int, Any], b: tuple[int, Any]) -> bool:
        (_, first), (later_epoch, _) = sorted((a, b), key=lambda r: r[0])
        return mark_of(marks, later_epoch) < first["ts"] + TTL_MS

    lines = []
    for order in kept[0]:
        partners = [
            s for s in kept[1] if s[1]["customer"] == order[1]["customer"] and meet(order, s)
        ]
        lines += [to_json_line(joined(order[1], s, None)) for _, s in partners]
        if left_outer and not partners:
            lines.append(to_json_line(joined(order[1], None, None)))
    return sorted(lines), sorted(late[0]), sorted(late[1])


def expected_session_join() -> tuple[list[str], list[str]]:
    """Offline, sorted: the lines of the session-window join and the late records. Each
    customer's sessions (both sides' records) are followed epoch by epoch: those whose
    last ms the epoch's watermark reached fire, then the epoch's records merge in; a
    record whose merged session would be fired already is late."""
    marks, records = timed_inputs()
    by_customer: dict[str, list[tuple[int, int, Any]]] = {}
    for side, epoch, value in records:
        by_customer.setdefault(value["customer"], []).append((epoch, side, value))
    lines, late = [], []
    for customer_records in by_customer.values():
        open_sessions: list[list[Any]] = []  # [start, end, lefts, rights]
        fired = []
        for epoch in [*sorted({e for e, _, _ in customer_records}), None]:
            mark = mark_of(marks, epoch) if epoch is not None else 2**63 - 1
            fired += [s for s in open_sessions if s[1] - 1 <= mark]
            open_sessions = [s for s in open_sessions if s[1] - 1 > mark]
            for _, side, value in sorted(
                (r for r in customer_records if r[0] == epoch), key=lambda r: r[2]["ts"]
            ):
                ts = value["ts"]
                touching = [s for s in open_sessions if ts < s[1] and s[0] < ts + GAP_MS]
                start = min([ts, *(s[0] for s in touching)])
                end = max([ts + GAP_MS, *(s[1] for s in touching)])
                if end - 1 <= mark:
                    # Far too late: no session near it, whatever order the epoch had.
                    assert ts + GAP_MS < mark - 60_000, value
                    late.append(to_json_line(value))
                    continue
                merged: list[Any] = [start, end, [], []]
                for s in touching:
                    merged[2] += s[2]
                    merged[3] += s[3]
                    open_sessions.remove(s)
                merged[2 + side].append(value)
                open_sessions.append(merged)
        lines += [
            to_json_line(joined(o, s, start))
            for start, _, orders, shipments in fired
            for o in orders
            for s in shipments
        ]
    return sorted(lines), sorted(late)


# -- the runs ---------------------------------------------------------------------------


def stream_join(tmp_path: Path, parallelism: int, backend: str, left_outer: bool) -> Pipeline:
    left, right = keyed_inputs("stream-join", orders(), shipments(), parallelism)
    join = left.join(right).with_ttl(TTL_MS)
    join = join.left_outer() if left_outer else join
    return (
        join.side_output_left_late_data(LATE_ORDERS)
        .side_output_right_late_data(LATE_SHIPMENTS)
        .process(OrderMaybeShipped(), uid="joined")
        .sink(json_lines(str(tmp_path / "out")))
        .side_output(LATE_ORDERS, json_lines(str(tmp_path / "late" / "orders")))
        .side_output(LATE_SHIPMENTS, json_lines(str(tmp_path / "late" / "shipments")))
        .with_state_backend(backend)
    )


def session_join(tmp_path: Path, parallelism: int, backend: str) -> Pipeline:
    left, right = keyed_inputs("session-join", orders(), shipments(), parallelism)
    return (
        left.window_join(right)
        .window(EventTimeSessionWindows(gap_ms=GAP_MS))
        .apply(OrderMaybeShipped(), uid="joined")
        .sink(json_lines(str(tmp_path / "out")))
        .side_output(LATE, json_lines(str(tmp_path / "late")))
        .with_state_backend(backend)
    )


def run_4_3_6(spark: Any, tmp_path: Path, build: Any) -> str:
    """Epochs 1-2 at parallelism 4, epoch 3 at 3, the rest at 6, each stop a savepoint
    the next run restores; returns the middle savepoint."""
    at4 = support.savepoint_after(spark, build(4), tmp_path / "4", 1)
    at3 = support.savepoint_after(spark, build(3), tmp_path / "3", 0, restore_from=at4)
    support.run_to_end(spark, build(6), tmp_path / "6", restore_from=at3)
    return at3


def state_names(spark: Any, pointer: str) -> set[str]:
    """The join's state names at ``pointer``, as the state processor and `sparkpoint
    state read` show them (the two agree)."""
    names = {r.state for r in read_keyed_state(spark, pointer, "joined").collect()}
    printed = CliRunner().invoke(main, ["state", "read", pointer, "--uid", "joined"])
    assert printed.exit_code == 0, printed.output
    assert {json.loads(line)["state"] for line in printed.output.splitlines()} == names
    return names


@pytest.mark.parametrize(
    ("backend", "left_outer"),
    [("memory", True), ("rocksdb", False)],
    ids=["left-memory", "inner-rocksdb"],
)
def test_stream_join_rescaled_4_3_6_equals_the_offline_join(
    spark: Any, tmp_path: Path, backend: str, left_outer: bool
) -> None:
    at3 = run_4_3_6(spark, tmp_path, lambda p: stream_join(tmp_path, p, backend, left_outer))
    lines, late_orders, late_shipments = expected_stream_join(left_outer)
    got = committed(tmp_path / "out")
    assert len(got) > 500 and got == lines
    unmatched = [line for line in got if '"carrier":null' in line]
    assert bool(unmatched) == left_outer
    # Pairs across epochs met only while the earlier record's TTL lasted: fewer than all.
    assert len(got) < len(expected_stream_join_without_ttl())
    assert late_orders and committed(tmp_path / "late" / "orders") == late_orders
    assert late_shipments and committed(tmp_path / "late" / "shipments") == late_shipments
    # Records wait in state while they may still meet one; their TTL drops them all.
    assert {"join-left", "join-right"} <= state_names(spark, at3)
    assert not state_names(spark, str(tmp_path / "6" / "stream-join")) & {"join-left", "join-right"}


def expected_stream_join_without_ttl() -> list[str]:
    """Every pair of one customer's records that are not late."""
    marks, records = timed_inputs()
    kept = [(side, v) for side, epoch, v in records if v["ts"] > mark_of(marks, epoch)]
    return [
        to_json_line(joined(o, s, None))
        for side, o in kept
        if side == 0
        for other, s in kept
        if other == 1 and s["customer"] == o["customer"]
    ]


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_session_window_join_rescaled_4_3_6_equals_the_offline_join(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    at3 = run_4_3_6(spark, tmp_path, lambda p: session_join(tmp_path, p, backend))
    lines, late = expected_session_join()
    got = committed(tmp_path / "out")
    assert len(got) > 200 and got == lines
    assert late and committed(tmp_path / "late") == late
    assert "window-join" in state_names(spark, at3)
    assert "window-join" not in state_names(spark, str(tmp_path / "6" / "session-join"))
