"""CheckpointCoordinator: drives the checkpoints of one job (after Flink's, see the seeds).

Trigger → PendingCheckpoint → acknowledgements → `_metadata` → store → completion notice →
background deletion of what was subsumed. The service calls :meth:`tick` on a timer and
forwards the driver's acknowledgements and declines; each heartbeat reply carries the
notices :meth:`notifications_since` returns (above the sequence number the driver has seen).

Split by responsibility: trigger rules (``trigger_rules``), creating checkpoints
(``triggerer``), pending tracking (``pending``, ``tracking``), acknowledgements and
declines (``acknowledgements``), finalisation (``finalize``), how a checkpoint's end
changes the job (``transitions``), statistics (``stats``), notices (``notifications``),
deletions (``cleanup``).

Locking: ``_lock`` guards in-memory state and is never held across I/O. ``_trigger_lock``
serialises triggers (counter and storage I/O); ``_finalize_lock`` serialises finalisations,
so pointers reach the store in id order. Acknowledgements of other checkpoints, ticks and
heartbeats go on while one checkpoint is being written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from sparkpoint.checkpoint import (
    CheckpointKind,
    CheckpointPointer,
    JobGraph,
    JobStatus,
    OperatorSubtaskState,
)
from sparkpoint.coordinator.acknowledgements import Acknowledgements
from sparkpoint.coordinator.cleanup import Cleanup, CleanupWorker
from sparkpoint.coordinator.errors import (
    CoordinatorStoppedError,
    SupersededRunError,
    TriggerRejectedError,
)
from sparkpoint.coordinator.failures import FailureCounter
from sparkpoint.coordinator.finalize import Finalizer
from sparkpoint.coordinator.job_metrics import JobMetrics
from sparkpoint.coordinator.notifications import Notice, Outbox
from sparkpoint.coordinator.options import CheckpointingOptions
from sparkpoint.coordinator.pending import Acknowledgement, CheckpointStatus, PendingCheckpoint
from sparkpoint.coordinator.results import AckResult, TickReport
from sparkpoint.coordinator.stats import CheckpointStatsTracker
from sparkpoint.coordinator.storage_api import CheckpointStorageLike
from sparkpoint.coordinator.tracking import CheckpointTracker
from sparkpoint.coordinator.transitions import Transitions
from sparkpoint.coordinator.trigger_rules import next_due_after_trigger, next_tick_ms
from sparkpoint.coordinator.triggerer import Triggerer
from sparkpoint.counter import CheckpointIDCounter
from sparkpoint.store import CompletedCheckpointStore


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class CheckpointCoordinator:
    """The checkpoints of one job. Thread-safe.

    How the service drives it (while it is leader)::

        coordinator = CheckpointCoordinator(graph, options, counter=counter, store=store,
                                            storage=storage)
        coordinator.set_counter_above(restored.checkpoint_id)   # after a restore, if any
        coordinator.start()
        report = coordinator.tick()          # on a timer; report.next_tick_ms says when
        coordinator.acknowledge_all(cid, acks)  # per ack request; bad ones raise 4xx errors
        notices = coordinator.notifications_since(seen)  # into each heartbeat reply
        coordinator.stop("leadership lost")  # at once when leadership goes
    """

    def __init__(
        self,
        graph: JobGraph,
        options: CheckpointingOptions,
        *,
        counter: CheckpointIDCounter,
        store: CompletedCheckpointStore,
        storage: CheckpointStorageLike,
        clock: Callable[[], int] = wall_clock_ms,
        cleanup: Cleanup | None = None,
        run_id: str | None = None,
    ) -> None:
        self.graph = graph
        self._run_id = run_id
        #: The outbox's sequence number when the current run began: its notices follow.
        self._run_seq = 0
        self.options = options
        self._counter = counter
        self._clock = clock
        self._own_cleanup: CleanupWorker | None = None
        if cleanup is None:
            cleanup = self._own_cleanup = CleanupWorker(f"sparkpoint-cleanup-{graph.job_id}")
        self.cleanup: Cleanup = cleanup
        self.stats = CheckpointStatsTracker(options.history_size)
        self.outbox = Outbox()
        self._tracker = CheckpointTracker(graph.job_id)
        self._transitions = Transitions(
            job_id=graph.job_id,
            tracker=self._tracker,
            outbox=self.outbox,
            stats=self.stats,
            metrics=JobMetrics(graph.job_id, interval_ms=options.interval_ms),
            failures=FailureCounter(options.tolerable_failures),
            cleanup=self.cleanup,
            storage=storage,
        )
        self._lock = self._transitions.lock
        self._trigger_lock = self._transitions.trigger_lock
        self._triggerer = Triggerer(
            graph=graph,
            options=options,
            counter=counter,
            storage=storage,
            transitions=self._transitions,
        )
        self._finalizer = Finalizer(transitions=self._transitions, store=store, clock=clock)
        self._acks = Acknowledgements(
            transitions=self._transitions,
            finalizer=self._finalizer,
            clock=clock,
            guard=self._check_request,
        )

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return self.graph.job_id

    @property
    def job_status(self) -> JobStatus:
        with self._lock:
            return self._transitions.job_status

    @property
    def is_stopped(self) -> bool:
        with self._lock:
            return self._transitions.stopped

    @property
    def failure_reason(self) -> str | None:
        with self._lock:
            return self._transitions.failure_reason

    def start(self, now_ms: int | None = None, *, due_now: bool = False) -> None:
        """Begin periodic checkpointing: the first one is due one interval from now, or at
        once with ``due_now`` (a job a new leader resumes has had no checkpoint for the
        whole failover; its first one goes out as soon as the driver is heard, which is
        when its sink's output becomes visible again)."""
        now = self._now(now_ms)
        with self._lock:
            self._require_running()
            if self._transitions.job_status is not JobStatus.CREATED:
                return  # already started (or already ended): starting twice changes nothing
            self._transitions.job_status = JobStatus.RUNNING
            self._transitions.next_due_ms = (
                now if due_now else next_due_after_trigger(self.options, now)
            )

    def stop(self, reason: str = "coordinator stopped") -> list[int]:
        """Abort every pending checkpoint and accept nothing more (leadership lost, job
        removed). A checkpoint being finalised is aborted by its finaliser before it reaches
        the store, or completes if it already did. Returns the ids aborted here."""
        with self._lock:
            if self._transitions.stopped:
                return []
            self._transitions.stopped = True
            if not self._transitions.job_status.is_globally_terminal:
                self._transitions.job_status = JobStatus.SUSPENDED
            return self._transitions.abort_in_progress(reason, self._clock())

    # --- driver runs ----------------------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The current driver run (Flink's execution attempt): the only one whose
        acknowledgements and declines are taken. None: no run has registered."""
        with self._lock:
            return self._run_id

    def begin_run(
        self, run_id: str, now_ms: int | None = None, *, due_now: bool = False
    ) -> list[int]:
        """Make ``run_id`` the current driver run. Every checkpoint still collecting
        acknowledgements for an earlier run is aborted (not counted as a failure): what
        that run acknowledged and what the new one would snapshot are not one consistent
        cut. A checkpoint already fully acknowledged by the earlier run (finalising) is
        whole and may still complete. Returns the ids aborted.

        ``due_now``: the next periodic checkpoint is due at once (a standby taking over:
        its sink's output stays invisible until its first checkpoint completes)."""
        now = self._now(now_ms)
        # The trigger lock first: a periodic trigger being created right now (its id
        # drawn, its notice not yet queued) must be pending before the abort looks, or
        # it would stay pending for the new run, which never hears of it, and hold the
        # concurrency slot until it times out.
        with self._trigger_lock, self._lock:
            previous, self._run_id = self._run_id, run_id
            if previous == run_id:
                return []
            reason = f"driver run {previous} was superseded by run {run_id}"
            aborted = self._transitions.abort_in_progress(reason, now)
            # Taken here, under the trigger lock: a trigger created after this moment is
            # the new run's, and its notice comes after this number.
            self._run_seq = self.outbox.last_seq
            if due_now and self._transitions.next_due_ms is not None:
                self._transitions.next_due_ms = min(self._transitions.next_due_ms, now)
            return aborted

    @property
    def run_started_seq(self) -> int:
        """The outbox's sequence number when the current run began (see begin_run)."""
        with self._lock:
            return self._run_seq

    def check_run(self, run_id: str) -> None:
        """Raise :class:`SupersededRunError` unless ``run_id`` is the current run."""
        with self._lock:
            self._check_run(run_id)

    def await_finalizations(self, timeout_s: float = 60.0) -> None:
        """Return once no checkpoint is being finalised (one that an earlier run fully
        acknowledged may still reach the store: a restore must see its outcome)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._transitions.finalize_lock, self._lock:
                pending = self._tracker.pending()
                if all(p.status is not CheckpointStatus.FINALIZING for p in pending):
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {self.job_id}: a checkpoint is still being finalised")
            # Marked FINALIZING but its finaliser has not taken the lock yet: a moment.
            time.sleep(0.01)

    def cancel(self, reason: str = "cancelled", now_ms: int | None = None) -> list[int]:
        """End the job for good (CANCELED): abort every pending checkpoint and trigger
        nothing more. Unlike :meth:`stop` this is global: the service then removes the
        job's checkpoints, counter and registry record. Returns the ids aborted."""
        now = self._now(now_ms)
        with self._lock:
            self._require_running()
            if self._transitions.job_status.is_globally_terminal:
                return []
            self._transitions.job_status = JobStatus.CANCELED
            self._transitions.stop_in_progress = None
            return self._transitions.abort_in_progress(reason, now)

    def close(self, timeout: float = 10.0) -> bool:
        """:meth:`stop`, then let queued deletions finish (if this coordinator owns them).
        The job's metric series go: this coordinator no longer reports on it."""
        self.stop()
        self._transitions.metrics.remove()
        return self._own_cleanup.close(timeout) if self._own_cleanup is not None else True

    # --- triggering -----------------------------------------------------------------------

    def tick(self, now_ms: int | None = None, *, allow_trigger: bool = True) -> TickReport:
        """Expire overdue checkpoints, then trigger a periodic one if the rules allow.

        ``allow_trigger=False`` only expires (for a job whose driver stopped heartbeating:
        nobody would take the trigger, but its pending checkpoints must still time out).
        Raises the counter's coordination errors (fenced, not connected, possibly applied)
        so the service can step down; no checkpoint is created then.
        """
        now = self._now(now_ms)
        with self._lock:
            if self._transitions.stopped or self._transitions.job_status is not JobStatus.RUNNING:
                return TickReport(None, (), None)
            expired = tuple(self._transitions.expire_overdue(now, self.options.timeout_ms))
        triggered = None
        decision_retry = None
        with self._trigger_lock:
            with self._lock:
                decision = (
                    self._transitions.periodic_decision(self.options, now)
                    if allow_trigger
                    else None
                )
            if decision is not None and decision.trigger:
                pending = self._triggerer.create(CheckpointKind.CHECKPOINT, now, periodic=True)
                triggered = pending.checkpoint_id if pending is not None else None
            elif decision is not None:
                decision_retry = decision.retry_at_ms
        self._finalizer.finalize_if_complete(triggered)
        with self._lock:
            next_tick = next_tick_ms(
                self._tracker.pending(), self.options.timeout_ms, decision_retry
            )
            return TickReport(triggered, expired, next_tick)

    def trigger_checkpoint(self, now_ms: int | None = None) -> int:
        """Trigger a checkpoint now, regardless of interval, pause and concurrency (Flink's
        manual trigger). Returns its id."""
        return self._trigger_requested(CheckpointKind.CHECKPOINT, now_ms, None, stop=False)

    def trigger_savepoint(
        self, target_dir: str | None = None, *, stop: bool = False, now_ms: int | None = None
    ) -> int:
        """Trigger a savepoint into ``target_dir`` (storage's default savepoint directory
        when None). With ``stop``, periodic triggering pauses while it runs and ends for
        good when it completes (the job is then FINISHED). Returns its id."""
        return self._trigger_requested(CheckpointKind.SAVEPOINT, now_ms, target_dir, stop=stop)

    # --- acknowledgements -----------------------------------------------------------------

    def acknowledge(
        self, checkpoint_id: int, operator_uid: str, subtask: int, state: OperatorSubtaskState
    ) -> AckResult:
        """One subtask's acknowledgement; see :meth:`acknowledge_all`."""
        return self.acknowledge_all(checkpoint_id, [Acknowledgement(operator_uid, subtask, state)])

    def acknowledge_all(
        self, checkpoint_id: int, acks: Iterable[Acknowledgement], *, run_id: str | None = None
    ) -> AckResult:
        """Acknowledge a batch of subtasks of one checkpoint, all or nothing.

        ``run_id``: the acknowledging driver run; one that is not current is refused with
        :class:`SupersededRunError` (None: not checked, for callers inside the driver).

        Raises a :class:`~sparkpoint.coordinator.errors.CoordinatorRequestError` (unknown or
        finished checkpoint, duplicate, unexpected subtask, invalid state) with nothing
        changed. The acknowledgement that completes the set finalises the checkpoint in this
        call; coordination errors from the store propagate after the checkpoint is aborted.
        """
        return self._acks.acknowledge_all(checkpoint_id, acks, run_id)

    def decline(
        self,
        checkpoint_id: int,
        operator_uid: str,
        subtask: int,
        reason: str,
        *,
        run_id: str | None = None,
    ) -> None:
        """A subtask could not snapshot: the checkpoint fails (and counts as a failure).
        ``run_id`` as for :meth:`acknowledge_all`."""
        self._acks.decline(checkpoint_id, operator_uid, subtask, reason, run_id)

    # --- notices, restore hooks, status ---------------------------------------------------

    def drain_notifications(self) -> list[Notice]:
        """Every queued trigger, completion and abort notice, oldest first (removed)."""
        return self.outbox.drain()

    def notifications_since(self, after_seq: int) -> list[Notice]:
        """Queued notices above ``after_seq``, kept for a driver that asks again."""
        return self.outbox.since(after_seq)

    def set_counter_above(self, checkpoint_id: int) -> int:
        """After a restore from ``checkpoint_id``: make sure the next id is above it (the
        counter never moves down). Returns the next id."""
        with self._trigger_lock:
            if self._counter.get() <= checkpoint_id:
                self._counter.set_count(checkpoint_id + 1)
            return self._counter.get()

    def record_restored(self, pointer: CheckpointPointer, now_ms: int | None = None) -> None:
        """Record that the job was restored from ``pointer`` (shown as "latest restored")."""
        self.stats.report_restored(pointer, self._now(now_ms))

    def restored_checkpoint_id(self) -> int | None:
        """The checkpoint the current run was restored from, until a newer one completes:
        the restoring driver may still be reading its files, so nothing may delete them."""
        return self.stats.restored_since_completed()

    def pending_checkpoint_ids(self) -> list[int]:
        with self._lock:
            return [p.checkpoint_id for p in self._tracker.pending()]

    def held_states(self) -> list[OperatorSubtaskState]:
        """Subtask states whose files must outlive any grace period while this coordinator
        runs, though no retained checkpoint may reference them: those acknowledged for the
        pending checkpoints (they reference them once they complete, however late within
        the timeout), and those of the checkpoint acknowledged in full last, completed or
        not — its driver read its running state back from that snapshot and rebuilds a
        lost executor's part from it until it acknowledges a newer one."""
        with self._lock:
            held = list(self._acks.last_acknowledged)
            for pending in self._tracker.pending():
                held.extend(pending.subtask_states())
            return held

    def pending_checkpoint(self, checkpoint_id: int) -> PendingCheckpoint:
        """The pending checkpoint (read-only use), or the typed reason why there is none."""
        with self._lock:
            return self._tracker.get(checkpoint_id)

    def to_dict(self) -> dict[str, object]:
        """Job status and checkpoint statistics, for a Flink-like checkpoint overview."""
        with self._lock:
            status = {
                "job_id": self.job_id,
                "job_status": self._transitions.job_status.value,
                "failure_reason": self._transitions.failure_reason,
                "consecutive_failures": self._transitions.failures.consecutive,
                "pending": [p.checkpoint_id for p in self._tracker.pending()],
                "next_due_ms": self._transitions.next_due_ms,
                "options": self.options.to_dict(),
            }
        return {**status, **self.stats.to_dict()}

    # --- internals ------------------------------------------------------------------------

    def _now(self, now_ms: int | None) -> int:
        return self._clock() if now_ms is None else now_ms

    def _require_running(self) -> None:
        if self._transitions.stopped:
            raise CoordinatorStoppedError(f"job {self.job_id}: the coordinator was stopped")

    def _check_run(self, run_id: str) -> None:
        if run_id != self._run_id:
            raise SupersededRunError(self.job_id, run_id, self._run_id)

    def _check_request(self, run_id: str | None) -> None:
        """Under the lock, before an acknowledgement or decline is taken (``run_id``
        None: not checked)."""
        self._require_running()
        if run_id is not None:
            self._check_run(run_id)

    def _trigger_requested(
        self, kind: CheckpointKind, now_ms: int | None, target_dir: str | None, *, stop: bool
    ) -> int:
        now = self._now(now_ms)
        with self._trigger_lock:
            with self._lock:
                self._require_running()
                reason = self._transitions.why_not_trigger()
                if reason is not None:
                    raise TriggerRejectedError(f"job {self.job_id}: {reason}")
            pending = self._triggerer.create(kind, now, target_dir=target_dir, stop_job=stop)
        assert pending is not None  # requested triggers raise instead of returning None
        self._finalizer.finalize_if_complete(pending.checkpoint_id)
        return pending.checkpoint_id
