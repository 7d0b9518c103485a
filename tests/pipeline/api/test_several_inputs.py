"""Pipelines of several sources on real Spark (local mode): ``union`` of two click
streams into one window, and ``connect`` of clicks with a users changelog into one
KeyedCoProcessFunction. What the sink commits equals an offline computation of the same
(out-of-order) inputs — uninterrupted, and across a stop with a savepoint at parallelism
4 and a restore at 3, on both state backends; each source's offsets are kept under its
own uid. The watermark is the smaller of the inputs' (a broadcast stream's too) and an
idle input does not hold it back. Bad pipelines are refused with errors that name what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.enrichment import (
    OUT_OF_ORDER_MS,
    EnrichClicks,
    as_update,
    enrichment_pipeline,
    event_time,
    expected_enriched,
    expected_union_totals,
    union_totals_pipeline,
    user_of,
)
from sparkpoint.pipeline import (
    ClickEventSource,
    EmbeddedChannel,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    Pipeline,
    PipelineDriver,
    TransactionalFileSink,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from sparkpoint.pipeline.api.operator_state import decode_element
from sparkpoint.pipeline.api.several_sources import TypedKey
from sparkpoint.recovery.reader import read_operator_state
from sparkpoint.storage import CheckpointStorage
from tests.pipeline import support


def clicks(per_epoch: int = 400, per_split: int = 300, seed: int = 7) -> ClickEventSource:
    """Out of order by up to 1.5 s; 40 users over 4 splits."""
    return ClickEventSource(
        splits=4,
        users=40,
        records_per_epoch=per_epoch,
        records_per_split=per_split,
        seed=seed,
        out_of_order_ms=1_500,
    )


def slow_updates(per_split: int = 300) -> ClickEventSource:
    """A second stream a quarter as fast per epoch: it lags behind in event time."""
    return clicks(per_epoch=100, per_split=per_split, seed=11)


def committed(out: Path) -> list[str]:
    return sorted(TransactionalFileSink(str(out)).committed_lines())


def source_offsets(savepoint: str, uid: str) -> dict[str, int]:
    stored = CheckpointStorage(savepoint).read_metadata(savepoint).operator_states[uid]
    handles = [h for s in stored.subtask_states.values() for h in s.operator]
    return dict(decode_element(e) for e in read_operator_state(handles)["offsets"])


# -- union ------------------------------------------------------------------------------


def test_union_of_two_sources_equals_the_offline_totals(spark: Any, tmp_path: Path) -> None:
    p = union_totals_pipeline("union", clicks(), slow_updates(), str(tmp_path / "out"))
    graph = p.job_graph()
    assert [op.uid for op in graph.operators] == ["clicks-eu", "clicks-us", "totals", "sink"]
    support.run_to_end(spark, p, tmp_path / "ckpt")
    expected = expected_union_totals(clicks().all_records(), slow_updates().all_records())
    assert committed(tmp_path / "out") == expected


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_union_restored_at_another_parallelism_gives_the_same_totals(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    out = tmp_path / "out"
    p4 = union_totals_pipeline("union-rescale", clicks(), slow_updates(), str(out), 4)
    savepoint = support.savepoint_after(spark, p4.with_state_backend(backend), tmp_path, 2)
    # Each source's offsets under its own uid, with the split names it knows (both
    # sources have splits gen-0 … gen-3), after the 3 epochs (the savepoint's is the
    # third): the first source read to its end, the slow one a quarter of it.
    assert source_offsets(savepoint, "clicks-eu") == {f"gen-{s}": 300 for s in range(4)}
    assert source_offsets(savepoint, "clicks-us") == {f"gen-{s}": 75 for s in range(4)}

    p3 = union_totals_pipeline("union-rescale", clicks(), slow_updates(), str(out), 3)
    support.run_to_end(
        spark, p3.with_state_backend(backend), tmp_path / "ckpt3", restore_from=savepoint
    )
    expected = expected_union_totals(clicks().all_records(), slow_updates().all_records())
    assert committed(out) == expected


# -- connect ----------------------------------------------------------------------------


def test_connect_enriches_clicks_as_the_offline_join(spark: Any, tmp_path: Path) -> None:
    p = enrichment_pipeline("enrich", clicks(), slow_updates(), str(tmp_path / "out"))
    assert [op.uid for op in p.job_graph().operators] == ["clicks", "updates", "enrich", "sink"]
    support.run_to_end(spark, p, tmp_path / "ckpt")
    expected = expected_enriched(clicks().all_records(), slow_updates().all_records())
    assert committed(tmp_path / "out") == expected
    assert any('"segment":null' in line for line in expected)  # clicks before any update
    assert any('"segment":"' in line for line in expected)


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_connect_restored_at_another_parallelism_gives_the_same_join(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    out = tmp_path / "out"
    p4 = enrichment_pipeline("enrich-rescale", clicks(), slow_updates(), str(out), 4)
    savepoint = support.savepoint_after(spark, p4.with_state_backend(backend), tmp_path, 2)
    assert source_offsets(savepoint, "updates") == {f"gen-{s}": 75 for s in range(4)}
    p3 = enrichment_pipeline("enrich-rescale", clicks(), slow_updates(), str(out), 3)
    support.run_to_end(
        spark, p3.with_state_backend(backend), tmp_path / "ckpt3", restore_from=savepoint
    )
    assert committed(out) == expected_enriched(clicks().all_records(), slow_updates().all_records())


# -- watermarks -------------------------------------------------------------------------


def two_input_pipeline(how: str, first: Any, second: Any, out: Path, idle_ms: int | None) -> Any:
    strategy = WatermarkStrategy(event_time, OUT_OF_ORDER_MS, idle_timeout_ms=idle_ms)
    p = Pipeline(f"watermark-{how}", parallelism=2)
    a = p.source(first, uid="fast").assign_timestamps(strategy)
    b = p.source(second, uid="slow").assign_timestamps(strategy)
    if how == "union":
        keyed = (
            a.union(b)
            .key_by(user_of)
            .window(TumblingEventTimeWindows(10_000), reduce=lambda x, y: x)
        )
    elif how == "broadcast":
        segments = b.map(as_update).broadcast(SEGMENTS)
        keyed = a.key_by(user_of).connect(segments).process(LatestSegments())
    else:
        updates = b.map(as_update).key_by(user_of)
        keyed = a.key_by(user_of).connect(updates).process(EnrichClicks())
    return keyed.sink(TransactionalFileSink(str(out)))


SEGMENTS: MapStateDescriptor[str, str] = MapStateDescriptor("segments")


class LatestSegments(KeyedBroadcastProcessFunction):
    """The second input as a broadcast stream: each user's latest segment on every subtask."""

    def process_broadcast_element(self, update: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(SEGMENTS).put(update["user"], update["segment"])

    def process_element(self, key: Any, click: Any, ctx: Any) -> None:
        ctx.collect({**click, "segment": ctx.get_broadcast_state(SEGMENTS).get(key)})


def newest(source: ClickEventSource, offsets: dict[str, int]) -> int:
    return max(r["ts"] for _, _, r in source.records_before(offsets))


def slowest_split(source: ClickEventSource) -> int:
    """The smallest of the source's splits' newest timestamps (what holds it back)."""
    newest_of: dict[str, int] = {}
    for split, _, r in source.records_before(source.offsets()):
        newest_of[split] = max(newest_of.get(split, r["ts"]), r["ts"])
    return min(newest_of.values())


def watermark_after(spark: Any, p: Any, work: Path, epochs: int) -> PipelineDriver:
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(work), interval_ms=support.MANUAL))
    driver.start()
    driver.run(max_epochs=epochs)
    driver.close()
    return driver


@pytest.mark.parametrize("how", ["union", "connect", "broadcast"])
def test_the_slower_input_holds_the_watermark_back(spark: Any, tmp_path: Path, how: str) -> None:
    fast, slow = clicks(per_split=10_000), slow_updates(per_split=10_000)
    p = two_input_pipeline(how, fast, slow, tmp_path / "out", idle_ms=None)
    driver = watermark_after(spark, p, tmp_path / "ckpt", 3)
    fast_max = newest(fast, fast.offsets())
    slow_max = newest(slow, slow.offsets())
    assert slow_max < fast_max - OUT_OF_ORDER_MS  # the fast input ran well ahead
    assert driver.status.watermark == slowest_split(slow) - OUT_OF_ORDER_MS - 1


class Stalled(ClickEventSource):
    """A source that has no more records now but may have later (never exhausted)."""

    @property
    def exhausted(self) -> bool:
        return False


@pytest.mark.parametrize("how", ["union", "connect"])
@pytest.mark.parametrize("why", ["idle", "ended"])
def test_an_idle_or_ended_input_does_not_hold_the_watermark_back(
    spark: Any, tmp_path: Path, how: str, why: str
) -> None:
    # The slow input has 25 records per split: all read in the first epoch, then none.
    # Idle: it is not over (a stalled stream), and an idle timeout of 1 ms makes it idle
    # as soon as an epoch reads nothing of it. Ended: a bounded source read to its end,
    # no idle timeout.
    fast = clicks(per_split=10_000)
    slow = Stalled(
        splits=4, users=40, records_per_epoch=100, records_per_split=25, seed=11,
        out_of_order_ms=1_500,
    ) if why == "idle" else slow_updates(per_split=25)  # fmt: skip
    p = two_input_pipeline(how, fast, slow, tmp_path / "out", 1 if why == "idle" else None)
    driver = watermark_after(spark, p, tmp_path / "ckpt", 3)
    fast_max = newest(fast, fast.offsets())
    assert newest(slow, slow.offsets()) < fast_max - OUT_OF_ORDER_MS
    assert driver.status.watermark == slowest_split(fast) - OUT_OF_ORDER_MS - 1


# -- refused ----------------------------------------------------------------------------


def test_bad_multi_input_pipelines_are_refused_with_what_is_wrong() -> None:
    p = Pipeline("bad", parallelism=2)
    a, b = p.source(clicks()), p.source(slow_updates())
    with pytest.raises(ValueError, match="two sources with the uid 'source'"):
        a.union(b)
    b = p.source(slow_updates(), uid="other")
    with pytest.raises(ValueError, match="is not keyed: call key_by on both"):
        a.key_by(user_of).connect(b)
    with pytest.raises(ValueError, match="union takes streams before key_by"):
        a.union(b.key_by(user_of))
    with pytest.raises(TypeError, match="different key types: str and int"):
        a.key_by(user_of, key_type=str).connect(b.key_by(len, key_type=int))
    with pytest.raises(ValueError, match="different pipelines"):
        a.union(Pipeline("else", parallelism=2).source(slow_updates(), uid="x"))
    connected = a.key_by(user_of).connect(b.key_by(user_of))
    with pytest.raises(TypeError, match="go into a KeyedCoProcessFunction"):
        connected.process(KeyedProcessFunction())
    with pytest.raises(TypeError, match="takes two streams"):
        a.union(b).key_by(user_of).process(EnrichClicks())
    with pytest.raises(ValueError, match=r"sources \['source'\] carry event time and \['other'\]"):
        timed = a.assign_timestamps(WatermarkStrategy(event_time))
        timed.union(b).key_by(user_of).process(KeyedProcessFunction()).sink(
            TransactionalFileSink("/tmp/x")
        ).validate()
    with pytest.raises(ValueError, match="dataframe stage 'enrich' runs before key_by"):
        a.dataframe(lambda df: df, schema="user STRING", name="enrich").union(b).key_by(
            user_of
        ).process(KeyedProcessFunction()).sink(TransactionalFileSink("/tmp/x")).validate()


def test_a_key_of_another_type_than_declared_is_named() -> None:
    typed = TypedKey(len, str, "pipeline bad, second input")
    with pytest.raises(TypeError, match="second input: key 3 is int, not str"):
        typed("abc")
