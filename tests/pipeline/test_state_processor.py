"""Reading keyed state out of checkpoints and bootstrapping savepoints (state_entries.py,
state_processor.py, `sparkpoint state read`), on the clicks job with real Spark: the
per-user state of a checkpoint, of either backend, is what an offline computation over
the records it consumed gives; a savepoint written from a DataFrame starts a pipeline
that carries the bootstrapped values on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkpoint.cli.main import main
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.examples.clicks import RECENT, SESSION_GAP_MS, user_of
from sparkpoint.pipeline.operator_state import decode_element
from sparkpoint.pipeline.state_entries import (
    UnknownOperatorError,
    read_state_entries,
    write_savepoint_entries,
)
from sparkpoint.pipeline.state_processor import read_keyed_state, write_savepoint
from sparkpoint.recovery import CheckpointLoadError
from sparkpoint.recovery.reader import read_operator_state
from sparkpoint.storage import CheckpointStorage
from tests.support.waiting import wait_until

from . import support

MANUAL = 3_600_000


def _checkpoint(spark: Any, tmp_path: Path, backend: str) -> str:
    """Run the clicks job two epochs, checkpoint, and return the complete ``chk-<id>``."""
    p = support.pipeline("state", tmp_path / "out", 3).with_state_backend(backend)
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL)
    driver = PipelineDriver(p, spark, channel)
    driver.start()
    driver.run(max_epochs=2)
    cid = channel.trigger_checkpoint()
    driver.run(max_epochs=1)
    storage = channel.storage
    wait_until(
        lambda: cid in storage.list_checkpoints("state", completed_only=True),
        timeout=60,
        message=f"checkpoint {cid} complete",
    )
    driver.close()
    return storage.checkpoint_directory("state", cid)


def _consumed(pointer: str) -> dict[str, int]:
    """The source offsets the checkpoint holds: the records its state has seen."""
    checkpoint = CheckpointStorage(pointer).read_metadata(pointer)
    handles = [h for s in checkpoint.operator_states["source"].subtask_states.values()
               for h in s.operator]  # fmt: skip
    return dict(decode_element(e) for e in read_operator_state(handles)["offsets"])


def _offline_state(consumed: dict[str, int]) -> dict[tuple[str, str], Any]:
    """Each user's states after the records below ``consumed``, computed directly."""
    events: dict[str, list[tuple[tuple[str, int], dict[str, Any]]]] = {}
    for split, position, event in support.source().all_records():
        if position < consumed.get(split, 0):
            events.setdefault(user_of(event), []).append(((split, position), event))
    state: dict[tuple[str, str], Any] = {}
    for user, seen in events.items():
        seen.sort(key=lambda e: e[0])
        clicks = amount = 0
        pages: dict[str, int] = {}
        recent: list[str] = []
        session: tuple[int, int, int, int] | None = None
        for _, e in seen:
            if session is not None and e["ts"] - session[1] > SESSION_GAP_MS:
                session = None
            start, _, n, total = session or (e["ts"], e["ts"], 0, 0)
            session = (start, e["ts"], n + 1, total + e["amount"])
            clicks, amount = clicks + 1, amount + e["amount"]
            pages[e["page"]] = pages.get(e["page"], 0) + 1
            recent = [*recent, e["page"]][-RECENT:]
        state[user, "totals"] = (clicks, amount)
        state[user, "session"] = session
        state[user, "pages"] = pages
        state[user, "recent"] = recent
    return state


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_the_state_of_a_checkpoint_is_each_users_state(
    spark: Any, tmp_path: Path, backend: str
) -> None:
    chk = _checkpoint(spark, tmp_path, backend)
    handles = {
        type(h).__name__
        for s in CheckpointStorage(chk)
        .read_metadata(chk)
        .operator_states["process"]
        .subtask_states.values()
        for h in s.keyed
    }
    # rocksdb checkpoints are the store's own files (incremental), memory's key-group streams.
    assert (
        handles
        == {"memory": {"KeyGroupsStateHandle"}, "rocksdb": {"IncrementalKeyedStateHandle"}}[backend]
    )
    expected = _offline_state(_consumed(chk))
    assert len({user for user, _ in expected}) > 50
    read = {(e.key, e.state): e.value for e in read_state_entries(chk, "process")}
    assert read == expected
    # The same through Spark, one task per old subtask; keys and values as JSON text.
    rows = read_keyed_state(spark, chk, "process").collect()
    as_json = {(r.key, r.state): r.value for r in rows}
    assert as_json == {(json.dumps(k), s): json.dumps(v) for (k, s), v in expected.items()}
    # The CLI names every user, one line per state.
    result = CliRunner().invoke(main, ["state", "read", chk, "--uid", "process"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert {(x["key"], x["state"]) for x in lines} == set(expected)
    totals = {x["key"]: tuple(x["value"]) for x in lines if x["state"] == "totals"}
    assert totals == {u: v for (u, s), v in expected.items() if s == "totals"}
    result = CliRunner().invoke(main, ["state", "read", chk, "--uid", "source"])
    assert result.exit_code == 1 and "'source' has no keyed state" in result.output


def test_a_bootstrapped_savepoint_starts_a_pipeline_that_carries_it_on(
    spark: Any, tmp_path: Path
) -> None:
    users = sorted({user_of(e) for _, _, e in support.source().all_records()})
    bootstrap = spark.createDataFrame(
        [(json.dumps(u), "totals", json.dumps([100, 1000])) for u in users],
        "key string, state string, value string",
    )
    # Written at parallelism 2; the job runs at 3 (the restore rescales).
    savepoint = write_savepoint(
        bootstrap, str(tmp_path / "savepoints"), uid="process", parallelism=2, job_id="boot"
    )
    assert {(e.key, tuple(e.value)) for e in read_state_entries(savepoint)} == {
        (u, (100, 1000)) for u in users
    }
    p = support.pipeline("boot", tmp_path / "out", 3)
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL)
    driver = PipelineDriver(p, spark, channel, restore_from=savepoint)
    assert driver.start() is not None
    driver.run()
    driver.finish()
    driver.close()
    per_user: dict[str, list[tuple[int, int]]] = {}
    for _, _, e in support.source().all_records():
        per_user.setdefault(user_of(e), []).append((1, e["amount"]))
    last: dict[str, tuple[int, int]] = {}
    for line in support.committed(p):
        out = json.loads(line)
        if out["type"] == "total":
            last[out["user"]] = max(last.get(out["user"], (0, 0)), (out["clicks"], out["amount"]))
    assert last == {u: (100 + len(v), 1000 + sum(a for _, a in v)) for u, v in per_user.items()}


def test_a_checkpoints_state_round_trips_through_a_savepoint(spark: Any, tmp_path: Path) -> None:
    chk = _checkpoint(spark, tmp_path, "memory")
    df = read_keyed_state(spark, chk)
    savepoint = write_savepoint(df, str(tmp_path / "sp"), uid="process", parallelism=5)
    before = {(e.key, e.state): json.dumps(e.value) for e in read_state_entries(chk)}
    after = {(e.key, e.state): json.dumps(e.value) for e in read_state_entries(savepoint)}
    assert after == before


def test_bad_input_is_named(spark: Any, tmp_path: Path) -> None:
    savepoint = write_savepoint_entries(
        [("a", "totals", 1), (("t", 2), "totals", 2)], str(tmp_path), uid="count", parallelism=2
    )
    with pytest.raises(UnknownOperatorError, match=r"no operator 'process'.*operators: count"):
        read_state_entries(savepoint, "process")
    with pytest.raises(CheckpointLoadError, match="no checkpoint or savepoint"):
        read_state_entries(str(tmp_path / "missing"), "count")
    with pytest.raises(ValueError, match="state 'totals' given twice"):
        write_savepoint_entries([("a", "totals", 1), ("a", "totals", 2)], str(tmp_path),
                                uid="count", parallelism=2)  # fmt: skip
    with pytest.raises(ValueError, match="lacks state"):
        write_savepoint(spark.createDataFrame([("a", "1")], "key string, value string"),
                        str(tmp_path), uid="count", parallelism=2)  # fmt: skip
    cli = CliRunner()
    result = cli.invoke(main, ["state", "read", savepoint, "--uid", "nope"])
    assert result.exit_code == 1 and "no operator 'nope'" in result.output
    result = cli.invoke(main, ["state", "read", str(tmp_path / "missing")])
    assert result.exit_code == 1 and "no checkpoint or savepoint" in result.output
    result = cli.invoke(main, ["state", "read", savepoint, "--format", "parquet"])
    assert result.exit_code == 2 and "--output" in result.output
    result = cli.invoke(main, ["state", "read", savepoint])
    assert result.exit_code == 0
    keys = [json.dumps(json.loads(x)["key"]) for x in result.output.splitlines()]
    assert sorted(keys) == ['"a"', '["t", 2]']  # a tuple key reads as an array
    parquet = tmp_path / "parquet"
    result = cli.invoke(
        main, ["state", "read", savepoint, "--format", "parquet", "-o", str(parquet)]
    )
    assert result.exit_code == 0, result.output
    rows = spark.read.parquet(str(parquet)).collect()
    assert sorted((r.key, r.state, r.value) for r in rows) == [
        ('"a"', "totals", "1"),
        ('["t", 2]', "totals", "2"),
    ]
