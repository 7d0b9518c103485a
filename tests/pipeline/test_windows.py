"""Event-time windows on real Spark (local mode): what the sinks commit equals an
offline computation of the same input, out-of-order and late events included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.pipeline import ClickEventSource, EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.examples.sessions import expected_sessions, sessions_pipeline
from sparkpoint.pipeline.sink import TransactionalFileSink

MANUAL = 3_600_000
SPLITS, USERS, PER_SPLIT, PER_EPOCH = 4, 400, 800, 400


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


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_session_windows_match_an_offline_computation(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    p = sessions_pipeline(
        "sessions", clicks(), str(tmp_path / "out"), str(tmp_path / "late"), parallelism=3
    ).with_state_backend(backend)
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL))
    driver.start()
    driver.run()
    driver.finish()
    driver.close()
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
