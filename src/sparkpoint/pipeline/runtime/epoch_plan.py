"""The Spark jobs of the driver's loop (docs/architecture.md §7): warming up, loading the
state RDD, one epoch, the snapshot hook and the snapshot, and the RDDs they keep cached.

Every partitionBy uses the one :class:`KeyGroupPartitioner` made here, so the union of
the cached state with an epoch's records is narrow and state never moves.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sparkpoint.pipeline.api.branches import FROM_SOURCE
from sparkpoint.pipeline.api.builder import KeyedStage, Pipeline
from sparkpoint.pipeline.api.several_sources import BROADCAST_SIDE
from sparkpoint.pipeline.api.stages import leading_record_stages
from sparkpoint.pipeline.runtime.inputs import BroadcastTask, InputRange, InputTask, SourceGroup
from sparkpoint.pipeline.runtime.keyed_epoch import NO_TIME, EpochTime
from sparkpoint.pipeline.runtime.partitioner import KeyGroupPartitioner, Slot
from sparkpoint.pipeline.runtime.records import as_output, as_record, as_state
from sparkpoint.pipeline.runtime.stage_plan import run_stages
from sparkpoint.pipeline.runtime.tasks import (
    BranchOutputs,
    KeyTask,
    ReadTask,
    SinkTask,
    only_counts,
    only_outputs,
    only_side_outputs,
    only_state,
    timed_outputs,
    without_counts,
)
from sparkpoint.pipeline.state.tasks import StateTasks
from sparkpoint.recovery.plan import SubtaskRestore
from sparkpoint.statefiles import key_group_range_for_subtask
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
    """The state RDDs of one driver run (one per keyed stage) and the Spark jobs that
    advance them.

    ``lineage_limit``: after this many epochs without a reload from a snapshot the state
    RDDs' lineage is cut with Spark's local checkpoint.
    """

    def __init__(
        self,
        sc: SparkContext,
        pipeline: Pipeline,
        state_tasks: list[StateTasks],
        lineage_limit: int,
    ) -> None:
        self.sc = sc
        self._pipeline = pipeline
        self._stages = pipeline.keyed_stages
        self._p = pipeline.parallelism
        # ONE partitioner object for every partitionBy of this run (see partitioner.py).
        self.partitioner = KeyGroupPartitioner(self._p, pipeline.effective_max_parallelism)
        self._state_tasks = state_tasks
        self.lineage_limit = lineage_limit
        self._epochs_since_reload = 0
        self.cache = CachedRdds()
        #: Per keyed stage, its state RDD.
        self.states: list[RDD[Any] | None] = [None] * len(self._stages)
        #: The last epoch's union of state and records (tests look at its partitioning).
        self.last_union: RDD[Any] | None = None

    @property
    def state(self) -> RDD[Any] | None:
        """The first keyed stage's state RDD."""
        return self.states[0]

    def release_spent(self) -> None:
        """After an epoch: keep, per keyed stage, the state just made, the result it is
        computed from (lazily, by the next job) and the state before; release the rest.
        Releasing a result before its state is computed would make Spark recompute the
        epoch, and every epoch before it whose result went too."""
        self.cache.release_older_than(3 * len(self._stages))

    def warm_up(self) -> None:
        """One small job on every partition: executors are up and their Python workers
        have imported sparkpoint before a standby is needed."""
        self._markers().count()

    def load_state(
        self, stage: int, subtasks: tuple[SubtaskRestore, ...], keep: tuple[Any, ...] = ()
    ) -> None:
        """Keyed stage ``stage``'s state RDD read from ``subtasks``' handles, carrying the
        partitioner: P marker records are partitioned (a shuffle of P tiny records), then
        each partition reads its own subtask's files in place (``keep``: the on-disk
        backend's stores that a snapshot was just taken from, kept where still current)."""
        from pyspark import StorageLevel

        state = self._markers().mapPartitionsWithIndex(
            self._state_tasks[stage].load(subtasks, keep), preservesPartitioning=True
        )
        self._epochs_since_reload = 0
        self.states[stage] = self.cache.keep(state.persist(StorageLevel.MEMORY_AND_DISK))

    def restore_states(self, plan: Any | None, *, claimed: bool = False) -> None:
        """Every keyed stage's state RDD from a restore plan, or empty (``plan`` None: a
        fresh start). A stage the checkpoint does not have (added since) starts empty."""
        for n, stage in enumerate(self._stages):
            operator = None if plan is None else plan.operators.get(stage.uid)
            subtasks = operator.subtasks if operator is not None else self.empty_state()
            self.load_state(n, subtasks)
            if plan is not None:
                self._state_tasks[n].restored(subtasks, claimed=claimed)

    def empty_state(self) -> tuple[SubtaskRestore, ...]:
        """Every subtask with its key groups and no state (a fresh start)."""
        m = self._pipeline.effective_max_parallelism
        return tuple(
            SubtaskRestore(i, key_group_range_for_subtask(m, self._p, i)) for i in range(self._p)
        )

    def reload(self, stage: int, states: dict[int, Any], tokens: dict[int, Any]) -> None:
        """Keyed stage ``stage``'s state read back from the snapshot just taken
        (``states``: per subtask its ``OperatorSubtaskState``), at once."""
        self.load_state(
            stage,
            tuple(
                replace(
                    empty, keyed=states[empty.index].keyed, operator=states[empty.index].operator
                )
                for empty in self.empty_state()
            ),
            tuple(tokens.get(i) for i in range(self._p)),
        )
        reloaded = self.states[stage]
        assert reloaded is not None
        reloaded.count()

    def run_epoch(
        self,
        ranges: list[InputRange],
        sources: SourceGroup,
        epoch: int,
        notices: tuple[tuple[str, int], ...],
        snapshot_id: int | None,
        writer: Any,
        times: tuple[EpochTime, ...] = (),
    ) -> list[tuple[Any, int, dict[str, int]]]:
        """One epoch: ``ranges`` read by their ``sources``' readers, keyed, partitioned,
        unioned with the first stage's state and processed (after the timers ``times[0]``
        makes due); each later keyed stage takes the previous one's outputs the same way
        (under ``times[n]``; none given: no timer fires); the last one's outputs go to
        ``writer``. Returns what each partition wrote (a pending file or None, its record
        count, the largest event time per split); the new states are ``states``."""
        from pyspark import StorageLevel

        read = None
        if any(s.input == FROM_SOURCE for s in self._stages):  # read once, keyed twice
            read = self._read_once(ranges, sources)
            records = read_and_keyed(read, self._stages[0])
        else:
            records = self._keyed_records(ranges, sources)
        records = records.partitionBy(self._p, self.partitioner)
        results: list[RDD[Any]] = []
        for n, stage in enumerate(self._stages):
            if stage.input == FROM_SOURCE:  # a branch of the source's records
                records = read_and_keyed(read, stage).partitionBy(self._p, self.partitioner)
            elif n > 0:  # the previous stage's outputs, or (a branch) those of its input
                previous = results[n - 1 if stage.input is None else stage.input]
                records = self._rekeyed(previous, stage).partitionBy(self._p, self.partitioner)
            state = self.states[n]
            assert state is not None
            union = state.mapValues(as_state).union(records.mapValues(as_record))
            if n == 0:
                self.last_union = union
            from_source = n == 0 or stage.input == FROM_SOURCE  # else carried timestamps
            clock = times[0 if from_source else n] if times else NO_TIME
            task = self._state_tasks[n].epoch(
                stage.function, epoch, notices, snapshot_id, clock, carried=not from_source
            )
            result = union.mapPartitionsWithIndex(task, preservesPartitioning=True)
            results.append(self.cache.keep(result.persist(StorageLevel.MEMORY_AND_DISK)))
        written = self._write(self._to_sink(results), writer)
        # The new state is computed from the cached result by whichever job needs it
        # next (the snapshot or the next epoch), and cached then.
        self._epochs_since_reload += 1
        cut = self._epochs_since_reload >= self.lineage_limit
        for n, result in enumerate(results):
            state = result.mapPartitions(only_state, preservesPartitioning=True)
            self.states[n] = self.cache.keep(state.persist(StorageLevel.MEMORY_AND_DISK))
            if cut:
                # No snapshot for a while (checkpointing off, or a long interval): every
                # epoch adds to the lineage Spark serialises with each task, which ends in
                # a StackOverflowError. Cut it on the executors. A lost executor then
                # fails the job, and a restart restores the last completed checkpoint.
                self.states[n].localCheckpoint()  # type: ignore[union-attr]
        if cut:
            self._epochs_since_reload = 0
        return written

    def _to_sink(self, results: list[RDD[Any]]) -> RDD[Any]:
        """The main pipeline's last stage's result, with the other stages' side outputs
        and the branches' outputs (as side outputs of their sinks) beside it, and the
        first stage's counts instead of its own (a record is counted once, where it
        enters)."""
        if len(results) == 1:
            return results[0]
        main = main_stage(self._stages)
        parts = []
        for n, (stage, result) in enumerate(zip(self._stages, results, strict=True)):
            if n == main:
                parts.append(result if n == 0 else result.mapPartitions(without_counts))
            elif stage.branch is not None:  # a branch's outputs, to its sink
                parts.append(result.mapPartitions(BranchOutputs(stage.branch, stage.stages_after)))
            elif n == 0:
                parts.append(result.mapPartitions(only_counts))
            else:
                parts.append(result.mapPartitions(only_side_outputs))
        return self.sc.union(parts)

    def _keyed_records(self, ranges: list[InputRange], sources: SourceGroup) -> RDD[Any]:
        """The epoch's records, through the stages before key_by, keyed. With several
        sources: each source's records through its own stages and key selector, as
        records carrying their input (``InputRecord``), one RDD of them all."""
        first = self._stages[0]
        if not sources.several:
            read = self.sc.parallelize([r.range for r in ranges], max(1, len(ranges)))
            leading, rest = leading_record_stages(first.stages_before)
            reader = sources.readers()[0]
            if not rest:
                return read.mapPartitions(ReadTask(reader, first.key_selector, leading))
            ordered = run_stages(read.mapPartitions(ReadTask(reader, None, leading)), rest)
            return ordered.mapPartitions(KeyTask(first.key_selector))
        second_key = self._pipeline.second_key_selector
        per_source = []
        for n, (source, reader) in enumerate(zip(sources.inputs, sources.readers(), strict=True)):
            mine = [r.range for r in ranges if r.input == n]
            if not mine:
                continue
            # Per-record stages only (builder.validate): one order type for all sources.
            stages, _ = leading_record_stages((*source.stages, *first.stages_before))
            key = second_key if source.side == 1 and second_key is not None else first.key_selector
            task: Any = InputTask(source.side, source.watermark_strategy)
            if source.side == BROADCAST_SIDE:  # read unkeyed, a copy to every subtask
                key, task = None, BroadcastTask(self._p, source.watermark_strategy)
            read = ReadTask(reader, key, stages, sources.prefix(n))
            per_source.append(
                self.sc.parallelize(mine, len(mine)).mapPartitions(read).mapPartitions(task)
            )
        if not per_source:
            return self.sc.parallelize([], 1)
        return per_source[0] if len(per_source) == 1 else self.sc.union(per_source)

    def _read_once(self, ranges: list[InputRange], sources: SourceGroup) -> RDD[Any]:
        """The epoch's records of the one source as ``(order, record)``, cached: the
        first keyed stage and the branches of the source key them each their way."""
        from pyspark import StorageLevel

        read = self.sc.parallelize([r.range for r in ranges], max(1, len(ranges)))
        records = read.mapPartitions(ReadTask(sources.readers()[0], None))
        return self.cache.keep(records.persist(StorageLevel.MEMORY_AND_DISK))

    def _rekeyed(self, previous: RDD[Any], stage: KeyedStage) -> RDD[Any]:
        """The previous keyed stage's outputs, with the timestamps they carry, through
        the stages before ``stage``'s key_by, keyed by it."""
        ordered = run_stages(previous.mapPartitionsWithIndex(timed_outputs), stage.stages_before)
        return ordered.mapPartitions(KeyTask(stage.key_selector))

    def _write(self, result: RDD[Any], writer: Any) -> list[tuple[Any, int, dict[str, int]]]:
        """The keyed function's outputs through the stages after it, to the sink. Per
        partition of the result; after a DataFrame stage, per partition of its output
        (beside the result's partitions, which then report only their counts)."""
        stages = self._pipeline.post_process_stages
        leading, rest = leading_record_stages(stages)
        if rest:
            outputs = run_stages(result.mapPartitionsWithIndex(only_outputs), stages)
            result = result.mapPartitions(only_counts).union(outputs.map(as_output))
            leading = ()
        written: list[tuple[Any, int, dict[str, int]]] = result.mapPartitionsWithIndex(
            SinkTask(writer, leading)
        ).collect()
        return written

    def apply_snapshot_hook(self, epoch: int, checkpoint_id: int) -> None:
        """The functions' ``snapshot_state`` for a checkpoint taken after their epoch
        ran: one pass over each subtask's state, as an epoch without records would make
        it (narrow: the state keeps its partitioning, nothing is shuffled)."""
        from pyspark import StorageLevel

        for n, stage in enumerate(self._stages):
            state = self.states[n]
            assert state is not None
            task = self._state_tasks[n].epoch(stage.function, epoch, (), checkpoint_id)
            hooked = state.mapValues(as_state).mapPartitionsWithIndex(
                task, preservesPartitioning=True
            )
            self.states[n] = self.cache.keep(
                hooked.mapPartitions(only_state, preservesPartitioning=True).persist(
                    StorageLevel.MEMORY_AND_DISK
                )
            )

    def snapshot(self, stage: int, location: CheckpointLocation) -> list[tuple[int, Any, Any]]:
        """Every subtask of keyed stage ``stage`` writes its state to ``location``:
        ``(index, state or decline reason, store token or None)`` per subtask."""
        state = self.states[stage]
        assert state is not None
        snapshot = self._state_tasks[stage].snapshot(location)
        return state.mapPartitionsWithIndex(snapshot).collect()  # type: ignore[no-any-return]

    def _markers(self) -> RDD[Any]:
        markers = self.sc.parallelize([(Slot(i), None) for i in range(self._p)], self._p)
        return markers.partitionBy(self._p, self.partitioner)


def main_stage(stages: tuple[KeyedStage, ...]) -> int:
    """The main pipeline's last keyed stage: the branches' stages come after the main
    pipeline's, each naming the stage it takes (api/branches.py)."""
    return max(n for n, s in enumerate(stages) if s.input is None)


def read_and_keyed(read: Any, stage: KeyedStage) -> Any:
    """The source's records through ``stage``'s stages before its key_by, keyed."""
    return run_stages(read, stage.stages_before).mapPartitions(KeyTask(stage.key_selector))
