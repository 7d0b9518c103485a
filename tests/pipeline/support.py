"""Shared pieces of the pipeline tests: the clicks job over a bounded generator, and
its offline expected output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkpoint.examples.clicks import clicks_pipeline, expected_output
from sparkpoint.pipeline import ClickEventSource, EmbeddedChannel, Pipeline, PipelineDriver
from sparkpoint.pipeline.api.operator_state import decode_element
from sparkpoint.recovery.loading import load_checkpoint
from sparkpoint.recovery.reader import read_operator_state
from sparkpoint.storage import CheckpointStorage, state_file_name
from sparkpoint.store import ZooKeeperCompletedCheckpointStore

SPLITS = 4
USERS = 120
RECORDS_PER_SPLIT = 600
#: A checkpoint interval no test waits out: checkpoints come when a test asks.
MANUAL = 3_600_000


def source(records_per_epoch: int = 400) -> ClickEventSource:
    return ClickEventSource(
        splits=SPLITS,
        users=USERS,
        records_per_epoch=records_per_epoch,
        records_per_split=RECORDS_PER_SPLIT,
    )


def expected() -> list[str]:
    return expected_output(source().all_records())


def pipeline(
    job_id: str, out: Path | str, parallelism: int, records_per_epoch: int = 400
) -> Pipeline:
    """The clicks job writing to ``out`` (a path or any URI storage knows)."""
    return clicks_pipeline(job_id, source(records_per_epoch), str(out), parallelism=parallelism)


def consumed(pointer: str) -> dict[str, int]:
    """The source offsets (split → next position) of the checkpoint at ``pointer`` (any
    pointer `sparkpoint state read` takes: a job's directory is its newest readable
    checkpoint): the records its keyed state has seen."""
    checkpoint = load_checkpoint(CheckpointStorage(pointer), pointer).checkpoint
    handles = [h for s in checkpoint.operator_states["source"].subtask_states.values()
               for h in s.operator]  # fmt: skip
    return dict(decode_element(e) for e in read_operator_state(handles)["offsets"])


def committed(p: Pipeline) -> list[str]:
    assert p.sink_op is not None
    return sorted(p.sink_op.committed_lines())


def retained(observer: Any, job_id: str) -> list[int]:
    """The completed checkpoints of ``job_id`` as ZooKeeper holds them (``observer``: a
    connection to the cluster's znodes)."""
    store = ZooKeeperCompletedCheckpointStore(observer, job_id, None)
    return [p.checkpoint_id for p in store.recover()]


def assert_hdfs_matches_zookeeper(
    storage: CheckpointStorage, observer: Any, job_id: str, whole_from: int = 0
) -> None:
    """Every checkpoint ZooKeeper lists from ``whole_from`` on is whole in ``storage`` (its
    `_metadata` reads and names state files that all exist at their sizes); no checkpoint
    ZooKeeper does not list has a `_metadata`."""
    stored = retained(observer, job_id)
    on_hdfs = storage.list_checkpoints(job_id, completed_only=True)
    assert sorted(stored) == sorted(on_hdfs), (stored, on_hdfs)
    for cid in (c for c in stored if c >= whole_from):
        directory = storage.checkpoint_directory(job_id, cid)
        checks = storage.verify(storage.read_metadata(directory))
        assert checks and all(c.ok for c in checks), checks


def run_to_end(
    spark: Any, p: Pipeline, checkpoints: Path, restore_from: str | None = None
) -> PipelineDriver:
    """``p`` (bounded) run to its end and a last checkpoint, checkpointing to
    ``checkpoints``; restored from ``restore_from`` when given."""
    channel = EmbeddedChannel(str(checkpoints), interval_ms=MANUAL)
    driver = PipelineDriver(p, spark, channel, restore_from=restore_from)
    restored = driver.start()
    assert restore_from is None or restored is not None, f"not restored from {restore_from}"
    driver.run()
    driver.finish()
    driver.close()
    return driver


def savepoint_after(
    spark: Any, p: Pipeline, work: Path, epochs: int, restore_from: str | None = None
) -> str:
    """``p`` (restored from ``restore_from`` when given) run ``epochs`` epochs, then
    stopped with a savepoint (under ``work/sp``) after one more; returns the savepoint's
    directory."""
    channel = EmbeddedChannel(
        str(work / "ckpt"), savepoint_dir=str(work / "sp"), interval_ms=MANUAL
    )
    driver = PipelineDriver(p, spark, channel, restore_from=restore_from)
    restored = driver.start()
    assert restore_from is None or restored is not None, f"not restored from {restore_from}"
    driver.run(max_epochs=epochs)
    savepoint = driver.stop_with_savepoint()
    driver.close()
    return savepoint


def _task_attempt_id(_: Any) -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None
    return context.taskAttemptId()


def block_state_files(
    spark: Any, checkpoint: Path, operator_uid: str, subtask: int, ahead: int = 500
) -> None:
    """Make every coming attempt of ``subtask`` of ``operator_uid`` unable to write its
    state file into the ``checkpoint`` directory: a directory sits where each file would
    go (root ignores permission bits). The files are named by the Spark task attempt's
    id, which the SparkContext hands out in sequence: the ``ahead`` ids after the one a
    probe task gets now are blocked."""
    now = spark.sparkContext.parallelize([0], 1).map(_task_attempt_id).collect()[0]
    for attempt in range(now + 1, now + 1 + ahead):
        (checkpoint / state_file_name(operator_uid, subtask, attempt)).mkdir(parents=True)
