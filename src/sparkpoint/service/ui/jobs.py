"""The Jobs page's row for a job: the status model's view of it, its driver runs, its
driver's last progress report and its last checkpoint."""

from __future__ import annotations

from typing import Any

from sparkpoint.service.status import JobState, StatusReader

_OPERATOR_FIELDS = ("uid", "name", "parallelism", "max_parallelism", "keyed")


def job_row(
    reader: StatusReader, state: JobState, report: dict[str, Any] | None, now_ms: int
) -> dict[str, Any]:
    """``report`` is the job's last progress report as the leader heard it (if any)."""
    job = reader.job_view(state)
    retained = reader.retained(state)
    completed = [p for p in retained if not p.is_savepoint]
    last = completed[-1] if completed else None
    driver_run, standby_run = state.driver_runs()
    return {
        "job_id": job["job_id"],
        "status": job["status"],
        "status_reason": job.get("status_reason"),
        "connected": job.get("connected"),
        "registered_ms": job.get("registered_ms"),
        "operators": [{k: op[k] for k in _OPERATOR_FIELDS} for op in job["graph"]["operators"]],
        "driver_run": driver_run,
        "standby_run": standby_run,
        "progress": _of_run(report, driver_run, now_ms),
        "last_checkpoint": None
        if last is None
        else {
            "id": last.checkpoint_id,
            "completed_ms": last.completion_timestamp_ms,
            "age_ms": max(now_ms - last.completion_timestamp_ms, 0),
            "duration_ms": last.duration_ms,
            "state_size": last.state_size,
            "checkpointed_size": last.checkpointed_size,
        },
        "retained": len(retained),
    }


def _of_run(report: dict[str, Any] | None, run_id: str | None, now: int) -> dict[str, Any] | None:
    """``report`` if the job's current driver run sent it (a replaced run's is not shown)."""
    if report is None or (run_id and report.get("run_id") != run_id):
        return None
    return {**report, "age_ms": max(now - int(report["reported_ms"]), 0)}
