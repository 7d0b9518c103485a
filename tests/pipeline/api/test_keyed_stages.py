"""Several keyed stages in one pipeline, on real Spark (local mode): de-duplicate by
click identity, then re-key by user and keep totals. What the sink commits equals an
offline computation, also across a stop with a savepoint at parallelism 4 and a restart
at 3 (each stage's state restored and rescaled under its own uid); a window after a
keyed stage gets the timestamps that stage's outputs carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.dedupe_totals import (
    FirstCopy,
    UserTotals,
    dedupe_totals_pipeline,
    expected_output,
)
from sparkpoint.pipeline import ClickEventSource, Pipeline
from sparkpoint.pipeline.state_processor.entries import read_state_entries
from sparkpoint.storage import CheckpointStorage
from tests.pipeline import support


def clicks() -> ClickEventSource:
    return ClickEventSource(splits=4, users=60, records_per_epoch=400, records_per_split=500)


def committed(out: Path) -> list[str]:
    from sparkpoint.pipeline.sinks.files import TransactionalFileSink

    return sorted(TransactionalFileSink(str(out)).committed_lines())


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_dedupe_then_totals_exactly_once_across_a_rescale_4_to_3(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    out = tmp_path / "out"
    p4 = dedupe_totals_pipeline("dedupe", clicks(), str(out), parallelism=4)
    assert [op.uid for op in p4.job_graph().operators] == ["source", "dedupe", "totals", "sink"]
    savepoint = support.savepoint_after(spark, p4.with_state_backend(backend), tmp_path, 2)
    # Both stages' state is in the savepoint, under their uids.
    stored = CheckpointStorage(str(tmp_path / "sp")).read_metadata(savepoint).operator_states
    assert {"dedupe", "totals"} <= set(stored)
    totals = {e.key: e.value for e in read_state_entries(savepoint, "totals")}
    assert totals and all(isinstance(v, tuple) for v in totals.values())

    p3 = dedupe_totals_pipeline("dedupe", clicks(), str(out), parallelism=3)
    support.run_to_end(
        spark, p3.with_state_backend(backend), tmp_path / "ckpt3", restore_from=savepoint
    )
    assert committed(out) == expected_output(clicks().all_records())


def test_keyed_stages_are_built_in_order_and_bad_orders_are_named() -> None:
    base = Pipeline("stages").source(clicks())
    with pytest.raises(ValueError, match="key_by twice"):
        base.key_by(str).key_by(str)
    with pytest.raises(ValueError, match="needs a key_by"):
        base.key_by(str).process(FirstCopy()).process(UserTotals())
    with pytest.raises(ValueError, match="process after the last key_by"):
        base.key_by(str).process(FirstCopy()).key_by(str).sink(None).validate()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not unique"):
        (
            base.key_by(str)
            .process(FirstCopy(), uid="a")
            .key_by(str)
            .process(UserTotals(), uid="a")
            .sink(object())  # type: ignore[arg-type]
            .validate()
        )
    p = base.key_by(str).process(FirstCopy()).map(dict).key_by(str).process(UserTotals())
    stages = p.keyed_stages
    assert [s.uid for s in stages] == ["process", "process-2"]
    assert [st.name for st in stages[1].stages_before] == ["map #1 (dict)"]
