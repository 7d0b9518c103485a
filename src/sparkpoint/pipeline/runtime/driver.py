"""The driver's epoch loop (docs/architecture.md §7).

Each epoch is one Spark job: the source ranges the driver fixed are read, keyed and
partitioned by the key-group partitioner, unioned with the cached state RDD (same
partitioner object: a narrow, partition-by-partition union, so state never moves), and
the keyed function runs per partition; its outputs go to the sink's in-progress files and
its new state is cached for the next epoch. A checkpoint the coordinator triggered is
taken at the end of the next epoch: every subtask writes its state partition to one file,
the driver writes source offsets and sink transactions, acknowledges every subtask, and
re-reads the state RDD from the files it just wrote, which bounds the lineage.

Registering starts a driver run. When the coordinator refuses the run because a newer one
of the job registered (this driver was cut off and replaced), the loop stops at once: it
logs why, runs no more epochs and commits none of its sink's pending transactions (the
newer run restores them from the checkpoint it restores).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkpoint.checkpoint import CheckpointKind
from sparkpoint.pipeline.api.builder import Pipeline
from sparkpoint.pipeline.channels.protocol import (
    Ack,
    CheckpointAborted,
    CheckpointChannel,
    CheckpointCompleted,
    RescaleTo,
    Restored,
    RestoreMode,
    RunNotice,
    RunSuperseded,
    TriggerCheckpoint,
)
from sparkpoint.pipeline.runtime.clock import EpochClock
from sparkpoint.pipeline.runtime.epoch_plan import EpochPlan
from sparkpoint.pipeline.runtime.inputs import SourceGroup
from sparkpoint.pipeline.runtime.partitioner import KeyGroupPartitioner
from sparkpoint.pipeline.runtime.progress import ProgressMeter
from sparkpoint.pipeline.runtime.rescale import (
    adopt_granted_parallelism,
    apply_requested,
    note_adopted,
    rescale,
    state_tasks_of,
)
from sparkpoint.pipeline.runtime.snapshots import (
    checkpoint_location,
    driver_side_acks,
    restore_driver_side,
)
from sparkpoint.pipeline.runtime.status import DriverStatus, Rescaled
from sparkpoint.pipeline.state.tasks import check_state_in_place
from sparkpoint.storage import DEFAULT_INLINE_THRESHOLD

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class PipelineDriver:
    """Runs a :class:`Pipeline` on a SparkSession, checkpointed through ``channel``.

    >>> driver = PipelineDriver(pipeline, spark, EmbeddedChannel("/tmp/ckpt"))  # doctest: +SKIP
    >>> driver.start()           # register, restore from the latest checkpoint if any
    >>> driver.run()             # until a bounded source is exhausted
    >>> driver.finish()          # a last checkpoint, so every output is committed

    ``lineage_limit``: after this many epochs without a snapshot the state RDD's lineage
    is cut with Spark's local checkpoint (snapshots cut it durably, see ``_checkpoint``;
    the Spark jobs themselves are in ``epoch_plan``).

    ``restore_from``: start from this checkpoint or savepoint (of this job or another)
    instead of the job's latest checkpoint. ``restore_mode`` (docs/recovery.md, "Restore
    modes"): ``"no-claim"``, the default, leaves the files of ``restore_from`` to their
    job — the first checkpoint after the restore is a full one in this job's own
    directory, and until it completes the job still depends on them; ``"claim"`` (only
    for a checkpoint of this job in its own checkpoint directory, else a clear error)
    lets the next checkpoints go on incrementally from them. A restart from the job's
    latest checkpoint (no ``restore_from``) always claims it.

    ``standby``: :meth:`start` registers a warm standby run of the job (the service only),
    warms Spark up and waits until the coordinator grants it the job — the active run went
    silent or exited — then restores the latest completed checkpoint and returns, at the
    job's parallelism when the job was rescaled meanwhile (runtime/rescale.py).

    A rescale asked of the job from outside (``sparkpoint jobs rescale``, the REST API, the
    UI) comes with a heartbeat and is applied before the next epoch, as :meth:`rescale`.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        spark: SparkSession,
        channel: CheckpointChannel,
        *,
        restore_from: str | None = None,
        restore_mode: str | RestoreMode | None = None,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        on_epoch: Callable[[DriverStatus], None] | None = None,
        lineage_limit: int = 25,
        standby: bool = False,
        timer_interval_ms: int = 1000,
    ) -> None:
        pipeline.validate()
        self.pipeline = pipeline
        self.graph = pipeline.job_graph()
        self.sc: SparkContext = spark.sparkContext
        self.channel = channel
        self.status = DriverStatus()
        self._restore_from = restore_from
        self._restore_mode = None if restore_mode is None else RestoreMode.of(restore_mode)
        self._inline_threshold = inline_threshold
        self._on_epoch = on_epoch
        self._standby = standby
        self._p = pipeline.parallelism
        #: A random tag of this driver process (not the coordinator's run id): it names
        #: the process's sink files and local state stores apart from any other's.
        self._process_tag = secrets.token_hex(4)
        self._stages = pipeline.keyed_stages
        #: Per keyed stage, the tasks of its state backend.
        self._state_tasks = state_tasks_of(pipeline, self._process_tag)
        check_state_in_place(self.sc.getConf(), pipeline.state_backend)
        self._plan = EpochPlan(self.sc, pipeline, self._state_tasks, lineage_limit)
        self._source = SourceGroup(pipeline.inputs)
        self._sink = pipeline.sinks()
        self._clock = EpochClock(
            [k.function for k in self._stages],
            pipeline.watermark_strategy,
            timer_interval_ms,
            {i.uid: i.watermark_strategy for i in pipeline.merged if i.watermark_strategy},
        )
        self._triggers: list[TriggerCheckpoint] = []
        self._granted_notices: list[RunNotice] = []
        self._function_notices: list[tuple[str, int]] = []
        self._stop_savepoint: int | None = None
        #: A rescale request heard with a heartbeat, applied before the next epoch.
        self._requested_rescale: RescaleTo | None = None
        self._rescaling = False
        self._reported_rescales: dict[str, float] = {}
        self._stopped = False
        self._meter = ProgressMeter()

    @property
    def state(self) -> RDD[Any] | None:
        """The state RDD: after an epoch, the state it made; after a snapshot, read back."""
        return self._plan.state

    @property
    def last_union(self) -> RDD[Any] | None:
        return self._plan.last_union

    @property
    def partitioner(self) -> KeyGroupPartitioner:
        return self._plan.partitioner

    # -- start and restore ------------------------------------------------------------

    def start(self) -> Restored | None:
        self.status.run_id = self.channel.register(self.graph, standby=self._standby)
        if self._standby:
            self._plan.warm_up()
            log.info("job %s: standby run %s waiting", self.graph.job_id, self.status.run_id)
            # Acted on at the first poll, once restored (a completion commits the sink).
            self._granted_notices = self.channel.wait_for_grant()
        adopted_from = adopt_granted_parallelism(self) if self._standby else None
        self._sink.bind(self.graph.job_id, self.pipeline.sink_uid)
        restored = self.channel.restore(self.graph, self._restore_from, self._restore_mode)
        note_adopted(self, adopted_from, restored)
        if restored is None:
            self._sink.restore([])  # no checkpoint owns any earlier transaction
            self._plan.restore_states(None)
            return None
        restore_driver_side(restored.plan, self.pipeline, self._source, self._sink, self._clock)
        self._plan.restore_states(restored.plan, claimed=restored.claimed)
        self.status.restored_from = restored.checkpoint_id
        log.info(
            "restored job %s from %s %d at parallelism %d (%s)",
            self.graph.job_id,
            restored.kind.value,
            restored.checkpoint_id,
            self._p,
            (RestoreMode.CLAIM if restored.claimed else RestoreMode.NO_CLAIM).value,
        )
        return restored

    # -- the loop ---------------------------------------------------------------------

    def poll(self) -> None:
        """Heartbeat; act on completions and aborts, queue triggers."""
        if self.status.superseded is not None:
            return
        if hasattr(self.channel, "progress"):  # a channel that reports it (the service's)
            self.channel.progress = self._meter.report_of(self.status, self._source)
        try:
            notices = self.channel.heartbeat()
        except RunSuperseded as exc:
            self._supersede(exc)
            return
        notices, self._granted_notices = self._granted_notices + notices, []
        for notice in notices:
            if isinstance(notice, TriggerCheckpoint):
                self._triggers.append(notice)
            elif isinstance(notice, CheckpointCompleted):
                self._on_complete(notice)
            elif isinstance(notice, CheckpointAborted):
                self._on_abort(notice)
            elif isinstance(notice, RescaleTo) and notice.request_id:
                self._requested_rescale = notice  # without a request: only for a grant

    def _on_complete(self, notice: CheckpointCompleted) -> None:
        cid = notice.checkpoint_id
        stops = cid == self._stop_savepoint or notice.stop
        for tasks in self._state_tasks:
            tasks.completed(cid)
        self.status.completed.append(cid)
        if notice.kind is CheckpointKind.SAVEPOINT and not stops:
            # An intermediate savepoint is never restored by a restart (the latest
            # completed checkpoint is), so it commits nothing: were it to, a restart from
            # the checkpoint before it would replay what it committed. Its transactions
            # stay pending, in the next checkpoint's state, and commit with it; a job
            # started from the savepoint itself commits them on restore.
            log.info("savepoint %d complete; its output commits with the next checkpoint", cid)
            return
        committed = self._sink.commit_up_to(cid)
        self._source.notify_checkpoint_complete(cid)
        self._function_notices.append(("complete", cid))
        if notice.kind is CheckpointKind.CHECKPOINT:
            self.status.last_completed = cid
        log.info("checkpoint %d complete: %d transactions committed", cid, committed)
        if stops:
            self._stopped = self.status.finished = True

    def _on_abort(self, notice: CheckpointAborted) -> None:
        self._triggers = [t for t in self._triggers if t.checkpoint_id != notice.checkpoint_id]
        self._function_notices.append(("abort", notice.checkpoint_id))
        self.status.aborted.append((notice.checkpoint_id, notice.reason))
        log.info("checkpoint %d aborted: %s", notice.checkpoint_id, notice.reason)
        if notice.checkpoint_id == self._stop_savepoint:
            self._stop_savepoint = None  # the stop failed: keep running

    def _supersede(self, exc: RunSuperseded) -> None:
        """Stop for good: another run of the job is current. Nothing more is committed."""
        self._stopped = True
        self._triggers.clear()
        self.status.superseded = str(exc)
        log.warning("driver run %s stops: %s", self.status.run_id, exc)

    @property
    def stopped(self) -> bool:
        """True once a stop-with-savepoint completed, or the run was superseded."""
        return self._stopped

    @property
    def superseded(self) -> bool:
        """True when the coordinator refused this run (a newer one registered)."""
        return self.status.superseded is not None

    def run_epoch(self) -> bool:
        """Heartbeat, then one epoch (and a checkpoint after it if one is due). Returns
        False when there was nothing to do (no new records, no checkpoint)."""
        self.poll()
        if self._requested_rescale is not None and not self._rescaling:
            apply_requested(self)  # at this epoch boundary
        if self._stopped or (self._stop_savepoint is not None and not self._triggers):
            return False  # stopping: after the savepoint's snapshot nothing more runs
        trigger = self._triggers.pop(0) if self._triggers else None
        ranges = self._source.plan_epoch()
        # The clock is asked even when a trigger makes this epoch run anyway: that is
        # where the end of a bounded input is marked, and with a trigger in every epoch
        # (checkpoints more often than epochs) it would never be, nor run() return.
        wanted = not ranges and self._clock.wants_epoch_without_records(self._source.exhausted)
        if not ranges and trigger is None and not wanted:
            return False
        self._run_epoch(ranges, trigger)
        return True

    def _run_epoch(self, ranges: list[Any], trigger: TriggerCheckpoint | None) -> None:
        epoch = self.status.epoch + 1
        notices, self._function_notices = tuple(self._function_notices), []
        times = self._clock.epoch_times()
        written = self._plan.run_epoch(
            ranges,
            self._source,
            epoch,
            notices,
            trigger.checkpoint_id if trigger else None,
            self._sink.writer(self._process_tag, epoch),
            times,
        )
        self._source.advance(ranges)
        self._clock.after_epoch((r.split for r in ranges), written, times[0], self._source.ended())
        self._sink.epoch_written(f for f, _, _ in written if f is not None)
        self.status.epoch = epoch
        self.status.records += sum(n for _, n, _ in written)
        if self._clock.tracker is not None:
            self.status.watermark = self._clock.watermark
        if trigger is None:
            trigger = self._trigger_arrived_meanwhile()
            if trigger is not None:
                self._plan.apply_snapshot_hook(epoch, trigger.checkpoint_id)
        if trigger is not None:
            self._checkpoint(trigger)
        # Keep the state just made and what it is computed from until the next job.
        self._plan.release_spent()
        if self._on_epoch is not None:
            self._on_epoch(self.status)

    # -- checkpoints ------------------------------------------------------------------

    def _trigger_arrived_meanwhile(self) -> TriggerCheckpoint | None:
        """A trigger that reached the driver while this epoch ran. Taken now, its cut is
        the end of this epoch: as consistent as the end of the next one, and an epoch
        sooner (after a failover, the output waits that much less to become visible)."""
        self.poll()
        if self._stopped or self._stop_savepoint is not None or not self._triggers:
            return None
        return self._triggers.pop(0)

    def _checkpoint(self, trigger: TriggerCheckpoint) -> None:
        cid = trigger.checkpoint_id
        location = checkpoint_location(trigger, self.graph.job_id, self._inline_threshold)
        self._sink.pre_commit(cid)
        self._source.snapshot_state(cid)
        per_stage = [self._plan.snapshot(n, location) for n in range(len(self._stages))]
        for stage, collected in zip(self._stages, per_stage, strict=True):
            declined = sorted((i, r) for i, r, _ in collected if isinstance(r, str))
            if declined:
                index, reason = declined[0]
                log.warning(
                    "checkpoint %d declined by %s subtask %d: %s", cid, stage.uid, index, reason
                )
                try:
                    self.channel.decline(cid, stage.uid, index, reason)
                except RunSuperseded as exc:
                    self._supersede(exc)
                self.status.declined.append((cid, reason))
                return
        states = [{i: s for i, s, _ in collected} for collected in per_stage]
        acks: list[Ack] = [
            (stage.uid, i, state)
            for stage, by_index in zip(self._stages, states, strict=True)
            for i, state in sorted(by_index.items())
        ]
        watermarks = self._clock.snapshot()
        acks += driver_side_acks(location, self.pipeline, self._source, self._sink, watermarks)
        if trigger.stop:
            self._stop_savepoint = cid
        try:
            acknowledged = self.channel.acknowledge(cid, acks)
        except RunSuperseded as exc:
            self._supersede(exc)
            return
        if not acknowledged:
            log.info("checkpoint %d is gone (aborted or lost in a failover); going on", cid)
            if trigger.stop:
                self._stop_savepoint = None
            return
        self.status.acknowledged.append(cid)
        if trigger.kind is CheckpointKind.SAVEPOINT:
            self.status.savepoints[cid] = trigger.directory
        for n, collected in enumerate(per_stage):
            self._state_tasks[n].acknowledged(cid, states[n])
            # Re-read the state from the snapshot just written (bounds the lineage), and
            # now, while the files are the ones just written, not lazily in the next
            # epoch: the live state then never waits on HDFS (a DataNode lost later takes
            # only the checkpoint's copy, not the pipeline's state with it).
            self._plan.reload(n, states[n], {i: token for i, _, token in collected})

    # -- running to an end ------------------------------------------------------------

    def run(
        self,
        *,
        max_epochs: int | None = None,
        until: Callable[[PipelineDriver], bool] | None = None,
        idle_wait_s: float = 0.05,
    ) -> None:
        """Run epochs until a bounded source is exhausted, ``max_epochs`` ran, or
        ``until(driver)`` is true. With nothing to read, heartbeats every ``idle_wait_s``."""
        ran = 0
        while not self._stopped:
            if until is not None and until(self):
                return
            if max_epochs is not None and ran >= max_epochs:
                return
            if self._source.exhausted and not self._clock.end_of_input_pending(True):
                return
            if self.run_epoch():
                ran += 1
            else:
                time.sleep(idle_wait_s)  # nothing to read yet: a polling interval

    def finish(self, timeout_s: float = 120.0) -> int:
        """Take a last checkpoint after everything read so far and wait until it, or a
        later one, is complete, so every output is committed. Returns the id of the one
        that completed. (A checkpoint lost in a coordinator failover may never be
        reported to the driver: a later completed one commits the same output.)"""
        cid = self.channel.trigger_checkpoint()
        done = self._wait_for(cid, timeout_s, or_later=True)
        self.status.finished = True
        return done

    def savepoint(self, target_dir: str | None = None, timeout_s: float = 120.0) -> str:
        """Savepoint after the next epoch and go on. Returns the savepoint directory. Its
        sink transactions commit with the next completed checkpoint (a restart restores
        that or an older one, never the savepoint), or when a job starts from it."""
        cid = self.channel.trigger_savepoint(target_dir, stop=False)
        self._wait_for(cid, timeout_s)
        return self.status.savepoints[cid]

    def stop_with_savepoint(self, target_dir: str | None = None, timeout_s: float = 120.0) -> str:
        """Savepoint after the next epoch, then stop. Returns the savepoint directory."""
        cid = self.channel.trigger_savepoint(target_dir, stop=True)
        self._wait_for(cid, timeout_s)
        return self.status.savepoints[cid]

    def rescale(self, parallelism: int, timeout_s: float = 120.0) -> Rescaled:
        """At the next epoch boundary: complete a checkpoint, then go on from it at
        ``parallelism`` (1 to the max parallelism) in this SparkSession, as a restore at
        another parallelism would (runtime/rescale.py). Returns when it took effect."""
        return rescale(self, parallelism, timeout_s)

    def _wait_for(self, checkpoint_id: int, timeout_s: float, *, or_later: bool = False) -> int:
        """Runs epochs until ``checkpoint_id`` completes (``or_later``: or any later
        checkpoint does); returns the one that did."""
        deadline = time.monotonic() + timeout_s
        while checkpoint_id not in self.status.completed:
            if or_later and self.status.completed and self.status.completed[-1] > checkpoint_id:
                return self.status.completed[-1]
            if self.status.superseded is not None:
                raise RunSuperseded(self.status.superseded)
            if any(c == checkpoint_id for c, _ in self.status.aborted):
                raise RuntimeError(f"checkpoint {checkpoint_id} aborted")
            if time.monotonic() > deadline:
                raise TimeoutError(f"checkpoint {checkpoint_id} not complete in {timeout_s} s")
            if not self.run_epoch():
                time.sleep(0.02)  # waiting for the coordinator's notice
        return checkpoint_id

    def close(self) -> None:
        """Release the run (a standby may take over at once), the channel and the clients
        of the source and the sink (nothing is left reconnecting to a broker or server
        after the job), and the state backend's store server of this host."""
        try:
            for tasks in self._state_tasks:
                tasks.close()
            self._plan.cache.release_all()
            if not self.superseded:
                self.channel.release()
            self.channel.close()
        finally:
            try:
                self._sink.close()
            finally:
                self._source.close()
