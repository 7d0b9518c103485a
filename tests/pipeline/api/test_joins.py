"""Joins of two keyed streams on real Spark (local mode): what the sinks commit — the
joined pairs and the late records — equals an offline computation of the same
out-of-order inputs with late records, for the interval join and the window join
(tumbling and sliding), uninterrupted and across savepoints restored at another
parallelism (4 → 3 → 6 for the interval join), on both state backends. Bad joins (the
stream join's of test_stream_joins.py too) are refused with errors that name what is
wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.shipments import (
    OrderShipped,
    customer_of,
    expected_shipped,
    expected_window_shipped,
    shipments_pipeline,
    window_shipments_pipeline,
)
from sparkpoint.pipeline import (
    ClickEventSource,
    EventTimeSessionWindows,
    KeyedCoProcessFunction,
    Pipeline,
    SlidingEventTimeWindows,
    TransactionalFileSink,
    TumblingEventTimeWindows,
    WatermarkStrategy,
    read_keyed_state,
)
from tests.pipeline import support

PER_EPOCH, SPLITS = 400, 4


def clicks(seed: int) -> ClickEventSource:
    """Out of order by up to 1.5 s, every 37th record of a split 600 s late; 40 users
    (customers) over 4 splits, 4 epochs of 100 records per split."""
    return ClickEventSource(
        splits=SPLITS,
        users=40,
        records_per_epoch=PER_EPOCH,
        records_per_split=400,
        seed=seed,
        out_of_order_ms=1_500,
        late_every=37,
    )


def orders() -> ClickEventSource:
    return clicks(7)


def shipments() -> ClickEventSource:
    return clicks(11)


def committed(out: Path) -> list[str]:
    return sorted(TransactionalFileSink(str(out)).committed_lines())


def check_against_offline(tmp_path: Path) -> None:
    lines, late_orders, late_shipments = expected_shipped(
        orders().all_records(), shipments().all_records(), PER_EPOCH // SPLITS
    )
    got = committed(tmp_path / "out")
    assert len(got) > 1_000 and got == lines
    # Late records of both sides, but not those of the first epoch (no watermark yet).
    assert 0 < len(late_orders) < 400 // 37 * SPLITS
    assert committed(tmp_path / "late" / "orders") == late_orders
    assert committed(tmp_path / "late" / "shipments") == late_shipments


def pipeline(tmp_path: Path, parallelism: int, backend: str) -> Pipeline:
    return shipments_pipeline(
        "shipments", orders(), shipments(), str(tmp_path / "out"), str(tmp_path / "late"),
        parallelism,
    ).with_state_backend(backend)  # fmt: skip


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_interval_join_rescaled_4_3_6_equals_the_offline_join(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    # Epochs 1-2 at parallelism 4, epoch 3 at 3, epoch 4 and the end at 6: each stop a
    # savepoint the next run restores at another parallelism.
    p4 = pipeline(tmp_path, 4, backend)
    assert [op.uid for op in p4.job_graph().operators] == ["orders", "shipments", "shipped", "sink"]
    at4 = support.savepoint_after(spark, p4, tmp_path / "4", 1)
    at3 = support.savepoint_after(
        spark, pipeline(tmp_path, 3, backend), tmp_path / "3", 0, restore_from=at4
    )
    support.run_to_end(spark, pipeline(tmp_path, 6, backend), tmp_path / "6", restore_from=at3)
    check_against_offline(tmp_path)
    # Records wait in state while they may match (a savepoint mid-stream holds some),
    # and timers drop them all once the watermark passes: none is left at the end.
    assert waiting_records(spark, at3)
    assert waiting_records(spark, str(tmp_path / "6" / "shipments")) == []


def waiting_records(spark: Any, pointer: str) -> list[Any]:
    """The state names of the join's buffered records at ``pointer``."""
    rows = read_keyed_state(spark, pointer, "shipped").collect()
    return [r.state for r in rows if r.state.startswith("interval-join-")]


@pytest.mark.parametrize(
    ("assigner", "backend", "restored_at"),
    [
        (TumblingEventTimeWindows(size_ms=2_000), "memory", None),
        (SlidingEventTimeWindows(size_ms=2_000, slide_ms=1_000), "rocksdb", 3),
    ],
    ids=["tumbling", "sliding-restored"],
)
def test_window_join_equals_the_offline_join(
    spark: Any, tmp_path: Path, assigner: Any, backend: str, restored_at: int | None
) -> None:
    def window_join(parallelism: int) -> Pipeline:
        return window_shipments_pipeline(
            "window-join", orders(), shipments(), str(tmp_path / "out"),
            str(tmp_path / "late"), assigner, parallelism,
        ).with_state_backend(backend)  # fmt: skip

    savepoint = None
    if restored_at is not None:
        savepoint = support.savepoint_after(spark, window_join(4), tmp_path, 2)
    support.run_to_end(
        spark, window_join(restored_at or 4), tmp_path / "ckpt2", restore_from=savepoint
    )
    lines, late = expected_window_shipped(
        orders().all_records(), shipments().all_records(), PER_EPOCH // SPLITS, assigner
    )
    got = committed(tmp_path / "out")
    assert len(got) > 1_000 and got == lines
    assert late and committed(tmp_path / "late") == late


def test_bad_joins_are_refused_with_what_is_wrong() -> None:
    p = Pipeline("bad", parallelism=2)
    timed = WatermarkStrategy(lambda r: r["ts"])
    a = p.source(orders(), uid="a").assign_timestamps(timed).key_by(customer_of)
    b = p.source(shipments(), uid="b").assign_timestamps(timed).key_by(customer_of)
    with pytest.raises(ValueError, match=r"bounds \[5, 4\] .* are empty"):
        a.interval_join(b).between(4, 5).lower_bound_exclusive().upper_bound_exclusive().process(
            OrderShipped()
        )
    with pytest.raises(TypeError, match=r"upper_ms must be an int of ms, got 1\.5"):
        a.interval_join(b).between(0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a ProcessJoinFunction, got KeyedCoProcessFunction"):
        a.interval_join(b).between(0, 1).process(KeyedCoProcessFunction())  # type: ignore[arg-type]
    untimed = p.source(shipments(), uid="c").key_by(customer_of)
    with pytest.raises(ValueError, match=r"needs event time, and sources \['c'\] have none"):
        a.interval_join(untimed).between(0, 1).process(OrderShipped())
    with pytest.raises(ValueError, match="is not keyed: call key_by on both"):
        a.interval_join(p.source(shipments(), uid="d")).between(0, 1)
    with pytest.raises(TypeError, match=r"window join takes a window assigner .* got 10"):
        a.window_join(b).window(10)  # type: ignore[arg-type]
    a.window_join(b).window(EventTimeSessionWindows(gap_ms=10))  # sessions are joined too
    # The unbounded stream join.
    with pytest.raises(ValueError, match="left outer stream join needs with_ttl"):
        a.join(b).left_outer().process(OrderShipped())
    with pytest.raises(ValueError, match="ttl_ms must be a positive int of ms, got 0"):
        a.join(b).with_ttl(0)
    with pytest.raises(ValueError, match=r"ttl_ms must be a positive int of ms, got 1\.5"):
        a.join(b).with_ttl(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a stream join takes a ProcessJoinFunction"):
        a.join(b).with_ttl(5).process(KeyedCoProcessFunction())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"a stream join needs event time, and sources \['c'\]"):
        a.join(untimed).process(OrderShipped())
    with pytest.raises(ValueError, match="is not keyed: call key_by on both"):
        a.join(p.source(shipments(), uid="d"))
    with pytest.raises(TypeError, match="a window join takes a ProcessJoinFunction"):
        a.window_join(b).window(TumblingEventTimeWindows(10)).apply(lambda o, s: o)  # type: ignore[arg-type]
