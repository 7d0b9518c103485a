"""Exactly-once in one process: the committed output equals the output computed offline
from the same input, after crashes, rescaled restores, savepoints and a declined
checkpoint. Real Spark, real files, the real coordinator, storage and recovery code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkpoint.examples.clicks import clicks_pipeline, expected_output
from sparkpoint.pipeline import EmbeddedChannel, FileSource, PipelineDriver
from sparkpoint.pipeline.sinks.files import IN_PROGRESS_DIR
from tests.pipeline import support

# A periodic interval that never fires during a test: checkpoints come when asked.
MANUAL = 3_600_000


def _crashed_run(spark: Any, tmp_path: Path, parallelism: int) -> None:
    """Run at ``parallelism``: two epochs, a checkpoint after the third, two more epochs
    whose output is never committed, then stop without any clean-up (a crash)."""
    p = support.pipeline("crash", tmp_path / "out", parallelism)
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL)
    driver = PipelineDriver(p, spark, channel)
    driver.start()
    driver.run(max_epochs=2)
    cid = channel.trigger_checkpoint()
    driver.run(max_epochs=1)
    assert driver.status.acknowledged == [cid]
    driver.run(max_epochs=2)
    assert any((tmp_path / "out" / IN_PROGRESS_DIR).iterdir()), "nothing uncommitted"
    driver.close()


@pytest.mark.parametrize("new_parallelism", [4, 2, 7])
def test_restore_after_crash_at_same_lower_and_higher_parallelism(
    spark: Any, tmp_path: Path, new_parallelism: int
) -> None:
    _crashed_run(spark, tmp_path, 4)
    p = support.pipeline("crash", tmp_path / "out", new_parallelism)
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL))
    restored = driver.start()
    assert restored is not None and restored.checkpoint_id == 1
    assert restored.plan.operators["process"].parallelism == new_parallelism
    driver.run()
    driver.finish()
    driver.close()
    assert support.committed(p) == support.expected()
    assert not list((tmp_path / "out" / IN_PROGRESS_DIR).glob("*.jsonl"))


def test_periodic_checkpoints_commit_everything_once(spark: Any, tmp_path: Path) -> None:
    p = support.pipeline("periodic", tmp_path / "out", 3, records_per_epoch=300)
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=10))
    driver.start()
    driver.run()
    driver.finish()
    driver.close()
    assert len(driver.status.completed) >= 3
    assert support.committed(p) == support.expected()


def test_a_declined_checkpoint_aborts_and_the_next_completes(spark: Any, tmp_path: Path) -> None:
    p = support.pipeline("decline", tmp_path / "out", 4)
    channel = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL, tolerable_failures=1)
    driver = PipelineDriver(p, spark, channel, inline_threshold=0)
    driver.start()
    driver.run(max_epochs=1)
    # Subtask 1 of the keyed operator cannot create its state file for checkpoint 1.
    support.block_state_files(spark, tmp_path / "ckpt" / "decline" / "chk-1", "process", 1)
    assert channel.trigger_checkpoint() == 1
    driver.run(max_epochs=1)
    assert [c for c, _ in driver.status.declined] == [1]
    driver.run(max_epochs=1)  # its heartbeat brings the abort
    assert [c for c, _ in driver.status.aborted] == [1]
    assert "process" in driver.status.aborted[0][1]
    assert not support.committed(p), "an aborted checkpoint commits nothing"
    driver.run()
    assert driver.finish() == 2
    driver.close()
    assert driver.status.completed == [2]
    assert support.committed(p) == support.expected()


@pytest.mark.parametrize("new_parallelism", [2, 7])
def test_stop_with_savepoint_and_restart_rescaled(
    spark: Any, tmp_path: Path, new_parallelism: int
) -> None:
    p = support.pipeline("savepoint", tmp_path / "out", 4)
    channel = EmbeddedChannel(
        str(tmp_path / "ckpt"), savepoint_dir=str(tmp_path / "sp"), interval_ms=MANUAL
    )
    driver = PipelineDriver(p, spark, channel)
    driver.start()
    driver.run(max_epochs=2)
    savepoint = driver.stop_with_savepoint()
    assert driver.stopped
    driver.close()
    assert Path(savepoint, "_metadata").exists()

    p2 = support.pipeline("savepoint", tmp_path / "out", new_parallelism)
    channel2 = EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=MANUAL)
    driver2 = PipelineDriver(p2, spark, channel2, restore_from=savepoint)
    restored = driver2.start()
    assert restored is not None and restored.kind.value == "savepoint"
    driver2.run()
    driver2.finish()
    driver2.close()
    assert support.committed(p2) == support.expected()


def _write_split(
    directory: Path, split: int, records: list[tuple[str, int, dict[str, Any]]]
) -> None:
    lines = [json.dumps(r) for s, _, r in records if s == f"gen-{split}"]
    (directory / f"clicks-{split}.jsonl").write_text("\n".join(lines) + "\n")


def test_file_source_picks_up_new_files_and_restores_offsets(spark: Any, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    records = list(support.source().all_records())
    _write_split(inbox, 0, records)
    _write_split(inbox, 1, records)
    # Half of a third file, the second half without its final newline: only complete
    # lines are read.
    third = [json.dumps(r) for s, _, r in records if s == "gen-2"]
    half = len(third) // 2
    (inbox / "clicks-2.jsonl").write_text("\n".join(third[:half]) + "\n" + third[half])

    def build(parallelism: int) -> Any:
        source = FileSource(str(inbox), max_bytes_per_split=8 * 1024)
        return clicks_pipeline("files", source, str(tmp_path / "out"), parallelism=parallelism)

    p = build(4)
    driver = PipelineDriver(p, spark, EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=10))
    driver.start()
    driver.run(max_epochs=3)
    driver.close()  # a crash after some checkpoints

    (inbox / "clicks-2.jsonl").write_text("\n".join(third) + "\n")
    _write_split(inbox, 3, records)
    p2 = build(3)
    driver2 = PipelineDriver(p2, spark, EmbeddedChannel(str(tmp_path / "ckpt"), interval_ms=10))
    assert driver2.start() is not None
    # Run until every byte of every file was read, then a last checkpoint.
    sizes = {f.name: f.stat().st_size for f in inbox.iterdir()}
    driver2.run(until=lambda d: d.pipeline.source_op.offsets() == sizes)
    driver2.finish()
    driver2.close()
    as_files = [(f"clicks-{s[4:]}.jsonl", pos, r) for s, pos, r in records]
    assert support.committed(p2) == expected_output(as_files)
