"""Two attempts at one subtask's snapshot in one checkpoint write two files.

Spark numbers a task's attempts from 0 again in a resubmitted stage (after an executor is
lost with its shuffle output), so an attempt number cannot name a snapshot file: the
resubmitted attempt found the lost attempt's half-written file in its way and the
checkpoint was declined. Here each attempt runs as a Spark job of its own, so both are
attempt number 0, as in a resubmitted stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from sparkpoint.checkpoint import OperatorSubtaskState
from sparkpoint.pipeline.state.snapshots import write_snapshot
from sparkpoint.storage import CheckpointLocation, CheckpointStorage


@dataclass(frozen=True)
class Snapshot:
    location: CheckpointLocation
    operator_uid: str = "counts"
    parallelism: int = 2
    max_parallelism: int = 128


def _attempt_at_subtask_1(snapshot: Snapshot) -> OperatorSubtaskState | str:
    from pyspark import TaskContext

    context = TaskContext.get()
    assert context is not None and context.attemptNumber() == 0
    key_group = 68  # the key group of b"key" at max parallelism 128: subtask 1's
    return write_snapshot(snapshot, 1, [(key_group, b"key", b"value")], {})


def test_a_second_attempt_at_a_subtask_snapshot_writes_a_file_of_its_own(
    spark: SparkSession, tmp_path: Path
) -> None:
    storage = CheckpointStorage(str(tmp_path), inline_threshold=0)  # a file, not inline
    snapshot = Snapshot(storage.init_checkpoint("job", 3))
    rdd = spark.sparkContext.parallelize([snapshot], 1)
    first = rdd.map(_attempt_at_subtask_1).collect()[0]
    second = rdd.map(_attempt_at_subtask_1).collect()[0]
    assert isinstance(first, OperatorSubtaskState), first
    assert isinstance(second, OperatorSubtaskState), second  # was: FileAlreadyExists
    names = {state.keyed[0].stream.path for state in (first, second)}
    assert len(names) == 2, names
    assert sorted(p.name for p in Path(tmp_path, "job", "chk-3").iterdir()) == sorted(
        Path(name).name for name in names
    )
