"""Stateless stages before key_by and after the keyed function, on real Spark (local
mode): the committed output equals an offline computation, also when the driver
crashes and a new one restores from a checkpoint; bad stages fail with their name."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples import country_totals
from sparkpoint.examples.clicks import ClickTotals, expected_output, user_of
from sparkpoint.pipeline import (
    Context,
    EmbeddedChannel,
    KeyedProcessFunction,
    Pipeline,
    PipelineDriver,
    RuntimeContext,
    TransactionalFileSink,
    ValueStateDescriptor,
)
from sparkpoint.pipeline.api.stages import DataFrameStage, run_record_stages
from sparkpoint.pipeline.runtime.stage_plan import ORDER_COLUMN, ToRow, schema_of
from sparkpoint.pipeline.sinks.files import to_json_line
from tests.pipeline import support

MANUAL = 3_600_000


# -- the stages of the record-stage job (module functions: Spark pickles them) ------------


def not_help(event: dict[str, Any]) -> bool:
    return bool(event["page"] != "help")


def cart_fee(event: dict[str, Any]) -> list[dict[str, Any]]:
    """A cart click and its fee: two records from one source record, in this order."""
    if event["page"] != "cart":
        return [event]
    return [event, {**event, "page": "fee", "amount": 99}]


def in_cents(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "amount": event["amount"] * 100}


def is_total(out: dict[str, Any]) -> bool:
    return bool(out["type"] == "total")


def short(out: dict[str, Any]) -> dict[str, Any]:
    return {"user": out["user"], "clicks": out["clicks"], "last": out["recent"][-1]}


def record_stage_pipeline(job_id: str, out: Path) -> Pipeline:
    return (
        Pipeline(job_id, parallelism=3, max_parallelism=128)
        .source(support.source())
        .filter(not_help)
        .flat_map(cart_fee)
        .map(in_cents)
        .key_by(user_of)
        .process(ClickTotals())
        .filter(is_total)
        .map(short)
        .sink(TransactionalFileSink(str(out)))
    )


def record_stage_expected() -> list[str]:
    pre = record_stage_pipeline("offline", Path("unused")).pre_key_stages
    post = record_stage_pipeline("offline", Path("unused")).post_process_stages
    records = [
        (split, position, out)
        for split, position, event in support.source().all_records()
        for out in run_record_stages(pre, event)
    ]
    outputs = (json.loads(line) for line in expected_output(records))
    return sorted(to_json_line(o) for out in outputs for o in run_record_stages(post, out))


def crash_then_restore(spark: Any, make: Callable[[], Pipeline], ckpt: Path) -> Pipeline:
    """Two epochs, checkpoint 1, two more epochs, a crash (closed unfinished); then a new
    driver restores checkpoint 1 and runs to the end. Returns the restored pipeline."""
    first = make()
    channel = EmbeddedChannel(str(ckpt), interval_ms=MANUAL)
    driver = PipelineDriver(first, spark, channel)
    driver.start()
    driver.run(max_epochs=2)
    channel.trigger_checkpoint()
    driver.run(max_epochs=2)
    assert driver.status.acknowledged == [1]
    driver.close()  # a crash: epochs after checkpoint 1 are replayed, not committed twice

    second = make()
    driver2 = PipelineDriver(second, spark, EmbeddedChannel(str(ckpt), interval_ms=MANUAL))
    assert driver2.start() is not None
    driver2.run()
    driver2.finish()
    driver2.close()
    return second


def test_map_filter_flat_map_before_and_after_the_keyed_stage_across_a_restore(
    spark: Any, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    restored = crash_then_restore(
        spark, lambda: record_stage_pipeline("stages", out), tmp_path / "ckpt"
    )
    expected = record_stage_expected()
    assert any('"last":"fee"' in line for line in expected)  # flat_map's records arrive
    assert support.committed(restored) == expected


def test_dataframe_stages_example_across_a_restore(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    restored = crash_then_restore(
        spark,
        lambda: country_totals.country_totals_pipeline(
            "countries", support.source(), str(out), users=support.USERS, parallelism=3
        ),
        tmp_path / "ckpt",
    )
    expected = country_totals.expected_output(support.source().all_records())
    assert any('"country":"unknown"' in line for line in expected)
    assert support.committed(restored) == expected


def test_a_dataframe_stage_returning_no_dataframe_fails_with_its_name(
    spark: Any, tmp_path: Path
) -> None:
    p = (
        Pipeline("broken-df", parallelism=2)
        .source(support.source())
        .dataframe(lambda df: df.columns, schema="user STRING", name="columns-only")
        .key_by(user_of)
        .process(ClickTotals())
        .sink(TransactionalFileSink(str(tmp_path / "out")))
    )
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt")))
    driver.start()
    with pytest.raises(TypeError, match="'columns-only' returned list, not a DataFrame"):
        driver.run(max_epochs=1)
    driver.close()


def explode_wrongly(event: dict[str, Any]) -> dict[str, Any]:
    return event


def test_a_flat_map_returning_a_record_fails_with_its_name(spark: Any, tmp_path: Path) -> None:
    p = (
        Pipeline("broken-flat-map", parallelism=2)
        .source(support.source())
        .key_by(user_of)
        .process(ClickTotals())
        .flat_map(explode_wrongly, name="explode")
        .sink(TransactionalFileSink(str(tmp_path / "out")))
    )
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt")))
    driver.start()
    with pytest.raises(Exception, match="flat_map stage 'explode' returned dict"):
        driver.run(max_epochs=1)
    driver.close()


# -- without Spark --------------------------------------------------------------------


def test_stages_go_where_they_are_called_and_stay_out_of_the_job_graph() -> None:
    p = (
        Pipeline("placed")
        .source(support.source())
        .map(in_cents)
        .key_by(user_of)
        .process(ClickTotals())
        .filter(is_total, name="totals-only")
        .sink(TransactionalFileSink("/tmp/unused"))
    )
    assert [s.name for s in p.pre_key_stages] == ["map #1 (in_cents)"]
    assert [s.name for s in p.post_process_stages] == ["totals-only"]
    assert [op.uid for op in p.job_graph().operators] == ["source", "process", "sink"]


def test_a_stage_between_key_by_and_process_is_refused() -> None:
    keyed = Pipeline("misplaced").key_by(user_of)
    with pytest.raises(ValueError, match="'late' comes between key_by and process"):
        keyed.map(in_cents, name="late")


def test_record_stages_run_in_order() -> None:
    stages = record_stage_pipeline("order", Path("unused")).pre_key_stages
    cart = {"user": "u", "ts": 1, "page": "cart", "amount": 2}
    assert list(run_record_stages(stages, cart)) == [
        {"user": "u", "ts": 1, "page": "cart", "amount": 200},
        {"user": "u", "ts": 1, "page": "fee", "amount": 9900},
    ]
    assert list(run_record_stages(stages, {**cart, "page": "help"})) == []


def test_bad_dataframe_schemas_are_named(spark: Any) -> None:
    with pytest.raises(TypeError, match="'numbers': schema must be a StructType"):
        schema_of(DataFrameStage(lambda df: df, 5, "numbers"))
    with pytest.raises(ValueError, match="needs a schema"):
        DataFrameStage(lambda df: df, None, "none")
    clash = DataFrameStage(lambda df: df, f"{ORDER_COLUMN} BINARY", "clash")
    with pytest.raises(ValueError, match="sparkpoint's column"):
        schema_of(clash)


def spend_per_epoch(clicks: Any) -> Any:
    """Drops the order column and shuffles (an aggregation): rows come in content order."""
    from pyspark.sql import functions as F

    return clicks.groupBy("user").agg(F.sum("amount").alias("amount"))


class RunningSpend(KeyedProcessFunction):
    def open(self, ctx: RuntimeContext) -> None:
        self.spent = ctx.get_state(ValueStateDescriptor("spent", 0))

    def process_element(self, key: Any, value: Any, ctx: Context) -> None:
        self.spent.update(self.spent.value() + value["amount"])
        ctx.collect({"user": key, "spent": self.spent.value()})


def test_a_dataframe_stage_that_aggregates_before_key_by(spark: Any, tmp_path: Path) -> None:
    p = (
        Pipeline("aggregated", parallelism=2)
        .source(support.source())
        .dataframe(spend_per_epoch, schema="user STRING, amount BIGINT", name="spend")
        .key_by(user_of)
        .process(RunningSpend())
        .sink(TransactionalFileSink(str(tmp_path / "out")))
    )
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt")))
    driver.start()
    driver.run()
    driver.finish()
    driver.close()
    final: dict[str, int] = {}
    for line in support.committed(p):
        out = json.loads(line)
        final[out["user"]] = max(final.get(out["user"], 0), out["spent"])
    offline: dict[str, int] = {}
    for _, _, event in support.source().all_records():
        offline[event["user"]] = offline.get(event["user"], 0) + event["amount"]
    assert final == offline


def test_a_dataframe_stage_takes_dicts_and_names_itself_when_it_does_not_get_one() -> None:
    to_row = ToRow("enrich", ("user", "amount"))
    row = to_row((("gen-0", 3), {"user": "u", "amount": 5, "page": "home"}))
    assert row[:2] == ("u", 5)  # the schema's fields only, then the pickled order
    assert pickle.loads(row[2]) == ("gen-0", 3)
    with pytest.raises(TypeError, match="'enrich' takes records that are dicts, got tuple"):
        to_row((("gen-0", 4), ("u", 5)))
