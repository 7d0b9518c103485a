"""The per-job checkpoint metrics of ``sparkpoint.metrics``, bound to one job's label."""

from __future__ import annotations

from sparkpoint import metrics
from sparkpoint.checkpoint import CheckpointPointer


class JobMetrics:
    """Records one job's checkpoint metrics. An expired checkpoint counts as failed too
    (as in Flink's failed-checkpoint count), and in the expired counter."""

    def __init__(self, job_id: str, *, interval_ms: int | None = None) -> None:
        self.job_id = job_id
        self._triggered = metrics.CHECKPOINTS_TRIGGERED.labels(job_id=job_id)
        self._completed = metrics.CHECKPOINTS_COMPLETED.labels(job_id=job_id)
        self._failed = metrics.CHECKPOINTS_FAILED.labels(job_id=job_id)
        self._expired = metrics.CHECKPOINTS_EXPIRED.labels(job_id=job_id)
        self._pending = metrics.PENDING_CHECKPOINTS.labels(job_id=job_id)
        self._duration = metrics.CHECKPOINT_DURATION.labels(job_id=job_id)
        self._finalize = metrics.CHECKPOINT_FINALIZE_DURATION.labels(job_id=job_id)
        self._last_ts = metrics.LAST_CHECKPOINT_TIMESTAMP.labels(job_id=job_id)
        self._last_size = metrics.LAST_CHECKPOINT_SIZE.labels(job_id=job_id)
        self._last_checkpointed = metrics.LAST_CHECKPOINT_CHECKPOINTED_SIZE.labels(job_id=job_id)
        self._last_id = metrics.LAST_CHECKPOINT_ID.labels(job_id=job_id)
        if interval_ms is not None:
            metrics.CHECKPOINT_INTERVAL.labels(job_id=job_id).set(interval_ms / 1000)

    def triggered(self) -> None:
        self._triggered.inc()

    def failed(self, *, expired: bool = False) -> None:
        self._failed.inc()
        if expired:
            self._expired.inc()

    def pending(self, count: int) -> None:
        self._pending.set(count)

    def finalized(self, seconds: float) -> None:
        self._finalize.observe(seconds)

    def completed(self, pointer: CheckpointPointer) -> None:
        self._completed.inc()
        self._last_id.set(pointer.checkpoint_id)
        self._duration.observe(pointer.duration_ms / 1000)
        self._last_ts.set(pointer.completion_timestamp_ms / 1000)
        self._last_size.set(pointer.state_size)
        self._last_checkpointed.set(pointer.checkpointed_size)

    def remove(self) -> None:
        """The job ended here: its series leave the /metrics page."""
        metrics.remove_job(self.job_id)
