"""The Spark jobs of the driver's loop (docs/architecture.md §7): warming up, loading the
state RDD, one epoch, the snapshot hook and the snapshot, and the RDDs they keep cached.

Every partitionBy uses the one :class:`KeyGroupPartitioner` made here, so the union of
the cached state with an epoch's records is narrow and state never moves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.builder import Pipeline
from sparkpoint.pipeline.keyed_run import NO_TIME, EpochTime
from sparkpoint.pipeline.partitioner import KeyGroupPartitioner, Slot
from sparkpoint.pipeline.stage_plan import run_stages
from sparkpoint.pipeline.stages import leading_record_stages
from sparkpoint.pipeline.state_tasks import StateTasks
from sparkpoint.pipeline.tasks import (
    KeyTask,
    ReadTask,
    SinkTask,
    only_counts,
    only_outputs,
    only_state,
    tag_output,
    tag_record,
    tag_state,
)
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.storage.location import CheckpointLocation

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext


class CachedRdds:
    """The RDDs the loop persisted, unpersisted once nothing computes from them."""

    def __init__(self) -> None:
        self._rdds: list[RDD[Any]] = []

    def keep(self, rdd: RDD[Any]) -> RDD[Any]:
        self._rdds.append(rdd)
        return rdd

    def release_older_than(self, keep: int) -> None:
        """Unpersist all but the newest ``keep`` (they were materialised by the job that
        just ran, so nothing needs the older ones any more)."""
        while len(self._rdds) > keep:
            self._rdds.pop(0).unpersist()

    def release_all(self) -> None:
        self.release_older_than(0)


class EpochPlan:
    """The state RDD of one driver run and the Spark jobs that advance it.

    ``lineage_limit``: after this many epochs without a reload from a snapshot the state
    RDD's lineage is cut with Spark's local checkpoint.
    """

    def __init__(
        self,
        sc: SparkContext,
        pipeline: Pipeline,
        state_tasks: StateTasks,
        lineage_limit: int,
    ) -> None:
        self.sc = sc
        self._pipeline = pipeline
        self._p = pipeline.parallelism
        # ONE partitioner object for every partitionBy of this run (see partitioner.py).
        self.partitioner = KeyGroupPartitioner(self._p, pipeline.effective_max_parallelism)
        self._state_tasks = state_tasks
        self._lineage_limit = lineage_limit
        self._epochs_since_reload = 0
        self.cache = CachedRdds()
        self.state: RDD[Any] | None = None
        #: The last epoch's union of state and records (tests look at its partitioning).
        self.last_union: RDD[Any] | None = None

    def warm_up(self) -> None:
        """One small job on every partition: executors are up and their Python workers
        have imported sparkpoint before a standby is needed."""
        self._markers().count()

    def load_state(self, subtasks: tuple[SubtaskRestore, ...], keep: tuple[Any, ...] = ()) -> None:
        """The state RDD read from ``subtasks``' handles, carrying the partitioner:
        P marker records are partitioned (a shuffle of P tiny records), then each
        partition reads its own subtask's files in place (``keep``: the on-disk backend's
        stores that a snapshot was just taken from, kept where still current)."""
        from pyspark import StorageLevel

        state = self._markers().mapPartitionsWithIndex(
            self._state_tasks.load(subtasks, keep), preservesPartitioning=True
        )
        self._epochs_since_reload = 0
        self.state = self.cache.keep(state.persist(StorageLevel.MEMORY_AND_DISK))

    def run_epoch(
        self,
        ranges: list[Any],
        reader: Any,
        epoch: int,
        notices: tuple[tuple[str, int], ...],
        snapshot_id: int | None,
        writer: Any,
        time: EpochTime = NO_TIME,
    ) -> list[tuple[Any, int, dict[str, int]]]:
        """One epoch: ``ranges`` read by ``reader``, keyed, partitioned, unioned with the
        state and processed (after the timers ``time`` makes due); outputs go to
        ``writer``. Returns what each partition wrote (a pending file or None, its record
        count, the largest event time per split); the new state is ``state``."""
        from pyspark import StorageLevel

        pipeline = self._pipeline
        assert self.state is not None and pipeline.function is not None
        assert pipeline.key_selector is not None
        records = self._keyed_records(ranges, reader).partitionBy(self._p, self.partitioner)
        union = self.state.mapValues(tag_state).union(records.mapValues(tag_record))
        self.last_union = union
        task = self._state_tasks.epoch(pipeline.function, epoch, notices, snapshot_id, time)
        result = union.mapPartitionsWithIndex(task, preservesPartitioning=True)
        result = result.persist(StorageLevel.MEMORY_AND_DISK)
        written = self._write(result, writer)
        # The new state is computed from the cached result by whichever job needs it
        # next (the snapshot or the next epoch), and cached then.
        self.state = result.mapPartitions(only_state, preservesPartitioning=True).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        self._epochs_since_reload += 1
        if self._epochs_since_reload >= self._lineage_limit:
            # No snapshot for a while (checkpointing off, or a long interval): every
            # epoch adds to the lineage Spark serialises with each task, which ends in a
            # StackOverflowError. Cut it on the executors. A lost executor then fails
            # the job, and a restart restores the last completed checkpoint.
            self.state.localCheckpoint()
            self._epochs_since_reload = 0
        self.cache.keep(result)
        self.cache.keep(self.state)
        return written

    def _keyed_records(self, ranges: list[Any], reader: Any) -> RDD[Any]:
        """The epoch's records, through the stages before key_by, keyed."""
        pipeline = self._pipeline
        assert pipeline.key_selector is not None
        read = self.sc.parallelize(ranges, max(1, len(ranges)))
        leading, rest = leading_record_stages(pipeline.pre_key_stages)
        if not rest:
            return read.mapPartitions(ReadTask(reader, pipeline.key_selector, leading))
        ordered = run_stages(read.mapPartitions(ReadTask(reader, None, leading)), rest)
        return ordered.mapPartitions(KeyTask(pipeline.key_selector))

    def _write(self, result: RDD[Any], writer: Any) -> list[tuple[Any, int, dict[str, int]]]:
        """The keyed function's outputs through the stages after it, to the sink. Per
        partition of the result; after a DataFrame stage, per partition of its output
        (beside the result's partitions, which then report only their counts)."""
        stages = self._pipeline.post_process_stages
        leading, rest = leading_record_stages(stages)
        if rest:
            outputs = run_stages(result.mapPartitionsWithIndex(only_outputs), stages)
            result = result.mapPartitions(only_counts).union(outputs.map(tag_output))
            leading = ()
        written: list[tuple[Any, int, dict[str, int]]] = result.mapPartitionsWithIndex(
            SinkTask(writer, leading)
        ).collect()
        return written

    def apply_snapshot_hook(self, epoch: int, checkpoint_id: int) -> None:
        """The function's ``snapshot_state`` for a checkpoint taken after its epoch ran:
        one pass over each subtask's state, as an epoch without records would make it
        (narrow: the state keeps its partitioning, nothing is shuffled)."""
        from pyspark import StorageLevel

        assert self.state is not None and self._pipeline.function is not None
        task = self._state_tasks.epoch(self._pipeline.function, epoch, (), checkpoint_id)
        hooked = self.state.mapValues(tag_state).mapPartitionsWithIndex(
            task, preservesPartitioning=True
        )
        self.state = self.cache.keep(
            hooked.mapPartitions(only_state, preservesPartitioning=True).persist(
                StorageLevel.MEMORY_AND_DISK
            )
        )

    def snapshot(self, location: CheckpointLocation) -> list[tuple[int, Any, Any]]:
        """Every subtask writes its state to ``location``: ``(index, state or decline
        reason, store token or None)`` per subtask."""
        assert self.state is not None
        snapshot = self._state_tasks.snapshot(location)
        return self.state.mapPartitionsWithIndex(snapshot).collect()  # type: ignore[no-any-return]

    def _markers(self) -> RDD[Any]:
        markers = self.sc.parallelize([(Slot(i), None) for i in range(self._p)], self._p)
        return markers.partitionBy(self._p, self.partitioner)
