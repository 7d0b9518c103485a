"""How a checkpoint's end changes the job's checkpointing state, in one place.

Every way a checkpoint ends — completed, declined, expired, aborted, failed to finalise —
goes through :meth:`Transitions.completed` or :meth:`Transitions.abort`, which keep the
tracker, notices, statistics, metrics, failure count and deletions consistent. Callers hold
``lock``; nothing here does I/O itself (deletions are handed to the cleanup worker).
"""

from __future__ import annotations

import threading

from sparkpoint.checkpoint import CheckpointKind, CheckpointPointer, JobStatus
from sparkpoint.coordinator.cleanup import Cleanup
from sparkpoint.coordinator.failures import FailureCounter
from sparkpoint.coordinator.job_metrics import JobMetrics
from sparkpoint.coordinator.notifications import Outbox
from sparkpoint.coordinator.options import CheckpointingOptions
from sparkpoint.coordinator.pending import CheckpointStatus, PendingCheckpoint
from sparkpoint.coordinator.stats import CheckpointStatsTracker
from sparkpoint.coordinator.storage_api import CheckpointStorageLike
from sparkpoint.coordinator.tracking import CheckpointTracker
from sparkpoint.coordinator.trigger_rules import TriggerDecision, TriggerState, decide

#: How many still-missing subtasks an expiry reason names.
_MISSING_SHOWN = 5


class Transitions:
    """The mutable checkpointing state of one job and its transitions."""

    def __init__(
        self,
        *,
        job_id: str,
        tracker: CheckpointTracker,
        outbox: Outbox,
        stats: CheckpointStatsTracker,
        metrics: JobMetrics,
        failures: FailureCounter,
        cleanup: Cleanup,
        storage: CheckpointStorageLike,
    ) -> None:
        self.job_id = job_id
        self.tracker = tracker
        self.outbox = outbox
        self.stats = stats
        self.metrics = metrics
        self.failures = failures
        self.cleanup = cleanup
        self.storage = storage
        self.lock = threading.RLock()
        self.trigger_lock = threading.Lock()
        self.finalize_lock = threading.Lock()
        self.job_status = JobStatus.CREATED
        self.failure_reason: str | None = None
        self.stopped = False
        #: Id of a running stop-with-savepoint: periodic triggering pauses meanwhile.
        self.stop_in_progress: int | None = None
        self.last_completion_ms: int | None = None
        #: When the next periodic checkpoint is due (set by start, moved by each trigger).
        self.next_due_ms: int | None = None
        self.latest_completed_id: int | None = None

    # --- questions ------------------------------------------------------------------------

    def why_not_trigger(self) -> str | None:
        """Why a requested checkpoint or savepoint cannot start now, or None."""
        if self.job_status is JobStatus.CREATED:
            return "checkpointing has not started"
        if self.job_status is not JobStatus.RUNNING:
            detail = f": {self.failure_reason}" if self.failure_reason else ""
            return f"job is {self.job_status.value}{detail}"
        if self.stop_in_progress is not None:
            return f"stop-with-savepoint {self.stop_in_progress} is in progress"
        return None

    def periodic_decision(self, options: CheckpointingOptions, now: int) -> TriggerDecision | None:
        """Whether a periodic checkpoint may start now (None: the job takes none: not
        running, or a stop-with-savepoint runs)."""
        if self.stopped or self.job_status is not JobStatus.RUNNING:
            return None
        if self.stop_in_progress is not None:
            return None
        assert self.next_due_ms is not None  # set by start()
        pending_periodic = sum(1 for p in self.tracker.pending() if not p.is_savepoint)
        return decide(
            options, TriggerState(now, self.next_due_ms, pending_periodic, self.last_completion_ms)
        )

    def why_not_finalize(self, pending: PendingCheckpoint) -> str | None:
        """Why a fully acknowledged checkpoint must not reach the store, or None."""
        if self.stopped:
            return f"coordinator stopped before checkpoint {pending.checkpoint_id} was stored"
        if pending.status is not CheckpointStatus.FINALIZING:
            return f"checkpoint {pending.checkpoint_id} was aborted while finalising"
        if self.job_status.is_globally_terminal:
            # The job's store is being removed (docs/architecture.md §11).
            return f"job is {self.job_status.value}"
        newer = self.latest_completed_id
        if not pending.is_savepoint and newer is not None and newer > pending.checkpoint_id:
            return f"subsumed by completed checkpoint {newer}"
        return None

    # --- transitions ----------------------------------------------------------------------

    def triggered(self, pending: PendingCheckpoint, directory: str) -> None:
        cid = pending.checkpoint_id
        self.tracker.add(pending)
        if pending.stop_job:
            self.stop_in_progress = cid
        self.stats.report_triggered(
            cid, pending.kind, pending.trigger_timestamp_ms, pending.total_subtasks
        )
        self.metrics.triggered()
        self.metrics.pending(len(self.tracker))
        self.outbox.trigger(
            cid, pending.kind, pending.trigger_timestamp_ms, directory, pending.stop_job
        )

    def trigger_failed(
        self, checkpoint_id: int, kind: CheckpointKind, now: int, reason: str, *, periodic: bool
    ) -> None:
        """An id was taken but its directory could not be prepared: the pipeline never
        heard of it, so no notice is sent."""
        self.tracker.note_triggered_id(checkpoint_id, reason)
        self.stats.report_triggered(checkpoint_id, kind, now, 0)
        self.stats.report_failed(checkpoint_id, now, reason)
        self.metrics.triggered()
        self.metrics.failed()
        if periodic:
            self._count_failure(checkpoint_id, reason, now)

    def expire_overdue(self, now: int, timeout_ms: int) -> list[int]:
        """Abort checkpoints still collecting acknowledgements after ``timeout_ms``."""
        expired = []
        for pending in self.tracker.pending():
            if pending.status is not CheckpointStatus.IN_PROGRESS:
                continue  # being finalised: every acknowledgement already arrived
            if now < pending.trigger_timestamp_ms + timeout_ms:
                continue
            missing = sorted(pending.waiting_for())
            shown = ", ".join(f"{uid}[{i}]" for uid, i in missing[:_MISSING_SHOWN])
            more = (
                f" and {len(missing) - _MISSING_SHOWN} more"
                if len(missing) > _MISSING_SHOWN
                else ""
            )
            reason = (
                f"expired after {timeout_ms} ms with {pending.acknowledged_subtasks}/"
                f"{pending.total_subtasks} acknowledgements; missing {shown}{more}"
            )
            self.abort(pending, reason, now, count_failure=True, expired=True)
            expired.append(pending.checkpoint_id)
        return expired

    def abort(
        self,
        pending: PendingCheckpoint,
        reason: str,
        now: int,
        *,
        count_failure: bool = False,
        expired: bool = False,
        notify: bool = True,
        discard: bool = True,
    ) -> None:
        """End a checkpoint without completing it.

        ``discard``: delete its directory in the background (not when the store may hold
        it). ``count_failure``: it counts towards the tolerable consecutive failures.
        """
        cid = pending.checkpoint_id
        self.tracker.finish(cid, CheckpointStatus.FAILED, reason)
        if notify:
            self.outbox.abort(
                cid, reason, pending.kind, pending.trigger_timestamp_ms, pending.stop_job
            )
        self.stats.report_failed(cid, now, reason)
        self.metrics.failed(expired=expired)
        self.metrics.pending(len(self.tracker))
        if discard:
            self.cleanup.submit(f"discard aborted checkpoint {cid}", pending.location.discard)
        if self.stop_in_progress == cid:
            self.stop_in_progress = None  # the job goes on; periodic triggering resumes
        if count_failure and not pending.is_savepoint:
            self._count_failure(cid, reason, now)

    def completed(
        self,
        pending: PendingCheckpoint,
        pointer: CheckpointPointer,
        subsumed: list[CheckpointPointer],
        now: int,
    ) -> None:
        """Steps 4 and 5 of docs/architecture.md §4: tell the pipeline, then delete what the
        store subsumed (never savepoints)."""
        cid = pending.checkpoint_id
        self.tracker.finish(cid, CheckpointStatus.COMPLETED)
        self.outbox.complete(
            cid, pointer.kind, pointer.metadata_uri, pending.trigger_timestamp_ms, pending.stop_job
        )
        self.stats.report_completed(pointer)
        self.metrics.completed(pointer)
        self.last_completion_ms = pointer.completion_timestamp_ms
        for old in subsumed:
            self.cleanup.discard_checkpoint(self.storage, old)
        if not pending.is_savepoint:
            self.latest_completed_id = cid
            self.failures.record_success()
            # Older periodic checkpoints can never enter the store now (ids only rise there).
            for older in self.tracker.pending():
                if (
                    older.checkpoint_id < cid
                    and not older.is_savepoint
                    and older.status is CheckpointStatus.IN_PROGRESS
                ):
                    self.abort(older, f"subsumed by completed checkpoint {cid}", now)
        if pending.stop_job:
            self.stop_in_progress = None
            self.job_status = JobStatus.FINISHED
            self.abort_in_progress(f"job stopped with savepoint {cid}", now)
        self.metrics.pending(len(self.tracker))

    # --- helpers --------------------------------------------------------------------------

    def _count_failure(self, checkpoint_id: int, reason: str, now: int) -> None:
        if self.failures.record_failure(checkpoint_id, reason) and not self.stopped:
            self.job_status = JobStatus.FAILING
            self.failure_reason = self.failures.exceeded_reason
            self.abort_in_progress(f"job failing: {self.failure_reason}", now)

    def abort_in_progress(self, reason: str, now: int) -> list[int]:
        """Abort every checkpoint still collecting acknowledgements (not those being
        finalised: they are whole). Returns the ids aborted."""
        aborted = []
        for pending in self.tracker.pending():
            if pending.status is CheckpointStatus.IN_PROGRESS:
                self.abort(pending, reason, now)
                aborted.append(pending.checkpoint_id)
        return aborted
