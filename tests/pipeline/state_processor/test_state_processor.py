"""Reading keyed state out of checkpoints and bootstrapping savepoints (state_processor/
entries.py and savepoints.py, `sparkpoint state read` and `state write`), on the clicks job with
real Spark: the per-user state of a checkpoint, of either backend, is what an offline
computation over the records it consumed gives; a savepoint written from a DataFrame,
or by the CLI from what `state read` printed, starts a pipeline that carries the
bootstrapped values on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sparkpoint.examples.clicks import expected_state, user_of
from sparkpoint.ops.cli.main import main
from sparkpoint.pipeline import EmbeddedChannel, PipelineDriver
from sparkpoint.pipeline.state_processor.entries import (
    UnknownOperatorError,
    read_state_entries,
    write_savepoint_entries,
)
from sparkpoint.pipeline.state_processor.savepoints import read_keyed_state, write_savepoint
from sparkpoint.recovery import CheckpointLoadError
from sparkpoint.storage import CheckpointStorage
from tests.pipeline import support
from tests.support.waiting import wait_until

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


def _offline_state(pointer: str) -> dict[tuple[str, str], Any]:
    """Each user's states after the records the checkpoint at ``pointer`` consumed,
    computed directly."""
    return expected_state(support.source().records_before(support.consumed(pointer)))


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
    expected = _offline_state(chk)
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


def test_a_checkpoints_state_round_trips_through_a_savepoint_a_pipeline_carries_on(
    spark: Any, tmp_path: Path
) -> None:
    """A checkpoint's state written back as a savepoint reads the same, through
    DataFrames and through the CLI (`state read` → `state write` → `state read`, as JSON
    lines and as Parquet); the job started from the CLI's savepoint at another
    parallelism counts on from the checkpoint's totals."""
    chk = _checkpoint(spark, tmp_path, "memory")
    df = read_keyed_state(spark, chk)
    savepoint = write_savepoint(df, str(tmp_path / "sp"), uid="process", parallelism=5)
    before = {(e.key, e.state): json.dumps(e.value) for e in read_state_entries(chk)}
    after = {(e.key, e.state): json.dumps(e.value) for e in read_state_entries(savepoint)}
    assert after == before

    cli = CliRunner()
    lines = tmp_path / "state.jsonl"
    result = cli.invoke(main, ["state", "read", chk, "-o", str(lines)])
    assert result.exit_code == 0, result.output
    write = ["state", "write", str(lines), "--uid", "process", "-p", "2", "--job", "again"]
    result = cli.invoke(main, [*write, "-o", str(tmp_path / "savepoints")])
    assert result.exit_code == 0, result.output
    savepoint = result.stdout.strip()
    assert Path(savepoint).parent == tmp_path / "savepoints"
    assert Path(savepoint).name.startswith("savepoint-again-")
    result = cli.invoke(main, ["state", "read", savepoint])
    assert result.exit_code == 0, result.output
    assert sorted(result.stdout.splitlines()) == sorted(lines.read_text().splitlines())
    parquet = tmp_path / "state.parquet"
    result = cli.invoke(main, ["state", "read", chk, "--format", "parquet", "-o", str(parquet)])
    assert result.exit_code == 0, result.output
    write = ["state", "write", str(parquet), "--format", "parquet", "--uid", "process", "-p", "3"]
    result = cli.invoke(main, [*write, "-o", str(tmp_path / "pq")])
    assert result.exit_code == 0, result.output
    result = cli.invoke(main, ["state", "read", result.stdout.strip()])
    assert sorted(result.stdout.splitlines()) == sorted(lines.read_text().splitlines())

    p = support.pipeline("again", tmp_path / "out", 3)
    channel = EmbeddedChannel(str(tmp_path / "ckpt-again"), interval_ms=MANUAL)
    driver = PipelineDriver(p, spark, channel, restore_from=savepoint)
    assert driver.start() is not None
    driver.run()
    driver.finish()
    driver.close()
    restored = _offline_state(chk)
    every = expected_state(support.source().all_records())
    last: dict[str, tuple[int, int]] = {}
    for line in support.committed(p):
        out = json.loads(line)
        if out["type"] == "total":
            last[out["user"]] = max(last.get(out["user"], (0, 0)), (out["clicks"], out["amount"]))
    assert last == {
        user: tuple(a + b for a, b in zip(restored.get((user, s), (0, 0)), v, strict=True))
        for (user, s), v in every.items()
        if s == "totals"
    }


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
    _bad_state_write_input_is_named(cli, tmp_path)
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


def _bad_state_write_input_is_named(cli: CliRunner, tmp_path: Path) -> None:
    """`state write` names the line it cannot take, and writes nothing."""
    good = '{"key": "a", "state": "totals", "value": [1, 2]}\n'
    out = tmp_path / "refused"
    for text, error in [
        (good + "{not json\n", "line 2: not JSON"),
        (good + '{"key": "b", "value": 1}\n', "line 2: no state"),
        ('\n["a", "totals", 1]\n', "line 2: a JSON list, not an object"),
        ('{"key": {"a": 1}, "state": "totals", "value": 1}\n', "line 1: key {'a': 1} cannot"),
        ('{"key": "a", "state": "", "value": 1}\n', "line 1: state '' is not a non-empty"),
        (good + good, "key 'a': state 'totals' given twice"),
    ]:
        lines = tmp_path / "bad.jsonl"
        lines.write_text(text)
        result = cli.invoke(main, ["state", "write", str(lines), "--uid", "process", "-p", "2",
                                   "-o", str(out)])  # fmt: skip
        assert result.exit_code == 1, (text, result.output)
        assert f"{lines}, line" in result.output or "twice" in error, result.output
        assert error in result.output, result.output
    assert not out.exists(), "a refused input writes no savepoint"
    result = cli.invoke(main, ["state", "write", str(tmp_path / "missing.jsonl"), "--uid", "p",
                               "-p", "2", "-o", str(out)])  # fmt: skip
    assert result.exit_code == 1 and "cannot read" in result.output
    result = cli.invoke(main, ["state", "write", "-", "--uid", "process", "-p", "2",
                               "-o", str(out)], input=good)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [e.key for e in read_state_entries(result.stdout.strip())] == ["a"]
    result = cli.invoke(main, ["state", "write", str(tmp_path / "none"), "--format", "parquet",
                               "--uid", "process", "-p", "2", "-o", str(out)])  # fmt: skip
    assert result.exit_code == 1 and "cannot read Parquet" in result.output, result.output
