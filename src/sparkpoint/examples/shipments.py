"""Orders ⋈ shipments within an interval (an event-time interval join), or in the same
window (a window join).

Each customer's orders (the left input) are matched with that customer's shipments (the
right input) dispatched from ``SHIPPED_BEFORE_MS`` before the order (a shipment of an
earlier order) to ``SHIPPED_WITHIN_MS`` after it. Both inputs come out of order by up
to ``OUT_OF_ORDER_MS``, and some records come far too late: a late order or shipment
joins nothing and goes to a side output of its own (``late-orders``,
``late-shipments``).

The window join (:func:`window_shipments_pipeline`) matches each customer's orders and
shipments of the same tumbling or sliding window instead; a record too late for all
its windows goes to the side output ``late``.

:func:`expected_shipped` and :func:`expected_window_shipped` compute the same lines and
late records offline, from the same records and the epochs they are read in
(watermarks move at epoch boundaries).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sparkpoint.examples.sessions import epoch_watermarks
from sparkpoint.pipeline import (
    LATE,
    MIN_WATERMARK,
    JoinContext,
    Pipeline,
    ProcessJoinFunction,
    Source,
    TransactionalFileSink,
    WatermarkStrategy,
    WindowAssigner,
    to_json_line,
)

SHIPPED_BEFORE_MS = 1_000
SHIPPED_WITHIN_MS = 2_000
OUT_OF_ORDER_MS = 1_500
LATE_ORDERS, LATE_SHIPMENTS = "late-orders", "late-shipments"


def event_time(record: dict[str, Any]) -> int:
    return int(record["ts"])


def customer_of(record: dict[str, Any]) -> str:
    return str(record["customer"])


def as_order(click: dict[str, Any]) -> dict[str, Any]:
    """A generated click read as an order."""
    return {"customer": click["user"], "ts": click["ts"], "amount": click["amount"]}


def as_shipment(click: dict[str, Any]) -> dict[str, Any]:
    """A generated click read as a shipment (its page names the carrier)."""
    return {"customer": click["user"], "ts": click["ts"], "carrier": click["page"]}


class OrderShipped(ProcessJoinFunction):
    def process_element(self, order: Any, shipment: Any, ctx: JoinContext) -> None:
        ctx.collect(shipped(order, shipment))


class ShippedInWindow(ProcessJoinFunction):
    def process_element(self, order: Any, shipment: Any, ctx: JoinContext) -> None:
        assert ctx.window is not None
        ctx.collect({**shipped(order, shipment), "window": ctx.window.start})


def shipped(order: dict[str, Any], shipment: dict[str, Any]) -> dict[str, Any]:
    return {
        "customer": order["customer"],
        "order_ts": order["ts"],
        "amount": order["amount"],
        "shipped_ts": shipment["ts"],
        "carrier": shipment["carrier"],
    }


def keyed_inputs(
    job_id: str, orders: Source, shipments: Source, parallelism: int
) -> tuple[Pipeline, Pipeline]:
    """The orders and the shipments of one pipeline, with event time, keyed by customer."""
    timed = WatermarkStrategy(event_time, max_out_of_orderness_ms=OUT_OF_ORDER_MS)
    p = Pipeline(job_id, parallelism=parallelism)
    order_stream = p.source(orders, uid="orders").map(as_order).assign_timestamps(timed)
    shipment_stream = p.source(shipments, uid="shipments").map(as_shipment).assign_timestamps(timed)
    return (
        order_stream.key_by(customer_of, key_type=str),
        shipment_stream.key_by(customer_of, key_type=str),
    )


def shipments_pipeline(
    job_id: str,
    orders: Source,
    shipments: Source,
    out: str,
    late_out: str,
    parallelism: int = 4,
) -> Pipeline:
    order_stream, shipment_stream = keyed_inputs(job_id, orders, shipments, parallelism)
    return (
        order_stream.interval_join(shipment_stream)
        .between(-SHIPPED_BEFORE_MS, SHIPPED_WITHIN_MS)
        .side_output_left_late_data(LATE_ORDERS)
        .side_output_right_late_data(LATE_SHIPMENTS)
        .process(OrderShipped(), uid="shipped")
        .sink(json_lines(out))
        .side_output(LATE_ORDERS, json_lines(f"{late_out}/orders"))
        .side_output(LATE_SHIPMENTS, json_lines(f"{late_out}/shipments"))
    )


def window_shipments_pipeline(
    job_id: str,
    orders: Source,
    shipments: Source,
    out: str,
    late_out: str,
    assigner: WindowAssigner,
    parallelism: int = 4,
) -> Pipeline:
    order_stream, shipment_stream = keyed_inputs(job_id, orders, shipments, parallelism)
    return (
        order_stream.window_join(shipment_stream)
        .window(assigner)
        .apply(ShippedInWindow(), uid="shipped")
        .sink(json_lines(out))
        .side_output(LATE, json_lines(late_out))
    )


def json_lines(directory: str) -> TransactionalFileSink:
    return TransactionalFileSink(directory, serialize=to_json_line)


Records = Iterable[tuple[str, int, dict[str, Any]]]


def _watermarks(orders: list[Any], shipments: list[Any], per_split: int) -> Any:
    """The watermark of the epoch that reads a record at ``position``: the smallest over
    both inputs' splits (both read ``per_split`` records of each split per epoch)."""
    marks = epoch_watermarks(
        [(f"orders/{s}", i, r) for s, i, r in orders]
        + [(f"shipments/{s}", i, r) for s, i, r in shipments],
        per_split,
        OUT_OF_ORDER_MS,
    )
    return lambda position: marks.get(position // per_split + 1, MIN_WATERMARK)


def expected_shipped(
    orders: Records, shipments: Records, per_split: int
) -> tuple[list[str], list[str], list[str]]:
    """Offline, sorted: the joined lines, the late orders and the late shipments of the
    interval join. A record read in epoch n is late when its time is at or below the
    watermark epoch n runs under."""
    orders, shipments = list(orders), list(shipments)
    mark = _watermarks(orders, shipments, per_split)

    def on_time(records: list[Any], convert: Any) -> tuple[list[Any], list[str]]:
        kept, late = [], []
        for _, position, record in records:
            value = convert(record)
            if value["ts"] <= mark(position):
                late.append(to_json_line(value))
            else:
                kept.append(value)
        return kept, sorted(late)

    kept_orders, late_orders = on_time(orders, as_order)
    kept_shipments, late_shipments = on_time(shipments, as_shipment)
    by_customer: dict[str, list[dict[str, Any]]] = {}
    for s in kept_shipments:
        by_customer.setdefault(s["customer"], []).append(s)
    lines = [
        to_json_line(shipped(o, s))
        for o in kept_orders
        for s in by_customer.get(o["customer"], ())
        if o["ts"] - SHIPPED_BEFORE_MS <= s["ts"] <= o["ts"] + SHIPPED_WITHIN_MS
    ]
    return sorted(lines), late_orders, late_shipments


def expected_window_shipped(
    orders: Records, shipments: Records, per_split: int, assigner: WindowAssigner
) -> tuple[list[str], list[str]]:
    """Offline, sorted: the lines of the window join and the late records of both
    inputs. A record read in epoch n is in each of its windows that had not fired by
    then (whose last ms is above the watermark of epoch n); in none: it is late."""
    orders, shipments = list(orders), list(shipments)
    mark = _watermarks(orders, shipments, per_split)
    windows: dict[tuple[str, int], tuple[list[Any], list[Any]]] = {}
    late = []
    for side, (records, convert) in enumerate(((orders, as_order), (shipments, as_shipment))):
        for _, position, record in records:
            value = convert(record)
            taken = [w for w in assigner.assign(value["ts"]) if w.max_timestamp > mark(position)]
            for w in taken:
                windows.setdefault((value["customer"], w.start), ([], []))[side].append(value)
            if not taken:
                late.append(to_json_line(value))
    lines = [
        to_json_line({**shipped(o, s), "window": start})
        for (_, start), (in_orders, in_shipments) in windows.items()
        for o in in_orders
        for s in in_shipments
    ]
    return sorted(lines), sorted(late)
