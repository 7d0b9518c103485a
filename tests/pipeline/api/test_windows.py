"""Event-time windows on real Spark (local mode): what the sinks commit equals an
offline computation of the same input, out-of-order and late events included — session
windows, tumbling windows, and sliding windows with allowed lateness after a
de-duplicating keyed stage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.dedupe_totals import FirstCopy, identity, redelivered
from sparkpoint.examples.sessions import (
    epoch_watermarks,
    event_time,
    expected_sessions,
    sessions_pipeline,
)
from sparkpoint.pipeline import (
    MIN_WATERMARK,
    ClickEventSource,
    Pipeline,
    WatermarkStrategy,
)
from sparkpoint.pipeline.api.windows import (
    LATE,
    AggregateFunction,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from sparkpoint.pipeline.sinks.files import TransactionalFileSink
from tests.pipeline import support

SPLITS, USERS, PER_SPLIT, PER_EPOCH = 4, 400, 600, 400


def clicks() -> ClickEventSource:
    return ClickEventSource(
        splits=SPLITS,
        users=USERS,
        records_per_epoch=PER_EPOCH,
        records_per_split=PER_SPLIT,
        out_of_order_ms=2_000,
        late_every=97,
    )


def lines(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in TransactionalFileSink(str(directory)).committed_lines()]


def assert_sessions_committed(out: Path, late: Path) -> None:
    """The sessions job over :func:`clicks` committed the sessions and the late clicks
    computed offline, the sessions to ``out`` and the late clicks to ``late``."""
    sessions, too_late = expected_sessions(clicks().all_records(), PER_EPOCH // SPLITS)
    got = sorted(json.dumps(o, sort_keys=True) for o in lines(out))
    assert got == sorted(
        json.dumps({"key": u, "start": s, "end": e, "value": v}, sort_keys=True)
        for (u, s, e), v in sessions.items()
    )
    assert too_late
    assert sorted(json.dumps(x, sort_keys=True) for x in lines(late)) == sorted(
        json.dumps(x, sort_keys=True) for x in too_late
    )


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_session_windows_match_an_offline_computation(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    p = sessions_pipeline(
        "sessions", clicks(), str(tmp_path / "out"), str(tmp_path / "late"), parallelism=3
    ).with_state_backend(backend)
    support.run_to_end(spark, p, tmp_path / "ckpt")
    expected, late = expected_sessions(clicks().all_records(), PER_EPOCH // SPLITS)
    got = [
        (o["key"], o["start"], o["end"], json.dumps(o["value"])) for o in lines(tmp_path / "out")
    ]
    assert len(got) == len(set(got)), "a session fired twice"
    assert sorted(got) == sorted(
        (u, s, e, json.dumps(v, sort_keys=True)) for (u, s, e), v in expected.items()
    )
    assert late and sorted(map(json.dumps, lines(tmp_path / "late"))) == sorted(
        json.dumps(e, sort_keys=True) for e in late
    )


class CountAndSum(AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, value: dict[str, Any], acc: list[int]) -> list[int]:
        return [acc[0] + 1, acc[1] + value["amount"]]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]

    def get_result(self, acc: list[int]) -> list[int]:
        return acc


def expected_windows(
    assigner: Any, lateness_ms: int, lag: int
) -> tuple[dict[tuple[str, int, int], list[int]], list[dict[str, Any]]]:
    """Offline: per (user, start, end) the count and sum of the records the window took,
    and the records too late for all their windows. A record read in epoch n meets the
    watermark the stage runs under then: epoch n's for the first keyed stage, ``lag``
    epochs older for a later one."""
    records = list(clicks().all_records())
    per_split = PER_EPOCH // SPLITS
    marks = epoch_watermarks(records, per_split, 2_000)
    windows: dict[tuple[str, int, int], list[int]] = {}
    late = []
    for _, position, event in records:
        mark = marks.get(position // per_split + 1 - lag, MIN_WATERMARK)
        taken = [w for w in assigner.assign(event["ts"]) if w.end - 1 + lateness_ms > mark]
        if not taken:
            late.append(event)
        for w in taken:
            acc = windows.setdefault((event["user"], w.start, w.end), [0, 0])
            acc[0], acc[1] = acc[0] + 1, acc[1] + event["amount"]
    return windows, late


def first_copy_then_sliding(out: Path, late_out: Path) -> Pipeline:
    """Two keyed stages: the window gets the timestamps the first stage's outputs carry."""
    return (
        Pipeline("sliding", parallelism=3)
        .source(clicks())
        .assign_timestamps(WatermarkStrategy(event_time, max_out_of_orderness_ms=2_000))
        .flat_map(redelivered)
        .key_by(identity)
        .process(FirstCopy(), uid="dedupe")
        .key_by(lambda e: e["user"])
        .window(SLIDING, aggregate=CountAndSum(), allowed_lateness_ms=LATENESS, uid="sliding")
        .sink(TransactionalFileSink(str(out)))
        .side_output(LATE, TransactionalFileSink(str(late_out)))
    )


SLIDING = SlidingEventTimeWindows(size_ms=20_000, slide_ms=5_000)
TUMBLING = TumblingEventTimeWindows(size_ms=15_000)
#: The late clicks (600 s late) are still within it for their last sliding windows: those
#: are taken in and fire at once. (The tumbling case, without lateness, drops them.)
LATENESS = 580_000


@pytest.mark.parametrize("shape", ["tumbling", "sliding after dedupe"])
def test_tumbling_and_sliding_windows_with_allowed_lateness_match_offline(
    spark: Any, tmp_path: Path, shape: str
) -> None:
    out, late_out = tmp_path / "out", tmp_path / "late"
    if shape == "tumbling":
        assigner, lateness, lag = TUMBLING, 0, 0
        p = (
            Pipeline("tumbling", parallelism=3)
            .source(clicks())
            .assign_timestamps(WatermarkStrategy(event_time, max_out_of_orderness_ms=2_000))
            .key_by(lambda e: e["user"])
            .window(TUMBLING, aggregate=CountAndSum())
            .sink(TransactionalFileSink(str(out)))
            .side_output(LATE, TransactionalFileSink(str(late_out)))
        )
    else:
        assigner, lateness, lag = SLIDING, LATENESS, 1
        p = first_copy_then_sliding(out, late_out)
    support.run_to_end(spark, p, tmp_path / "ckpt")
    expected, late = expected_windows(assigner, lateness, lag)
    final: dict[tuple[str, int, int], list[int]] = {}
    for o in lines(out):
        bounds = (o["key"], o["start"], o["end"])
        final[bounds] = max(final.get(bounds, [0, 0]), o["value"])  # the last emission
    assert final == expected
    assert bool(late) == (lateness == 0)
    assert sorted(map(json.dumps, lines(late_out))) == sorted(
        json.dumps(e, sort_keys=True) for e in late
    )
    if not lateness:  # each window fires once; with lateness a late record fires it again
        assert len(lines(out)) == len(final)
