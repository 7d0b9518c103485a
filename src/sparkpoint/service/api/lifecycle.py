"""Ending a job on request: cancel (docs/architecture.md §11). Leader only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from sparkpoint.service.api.models import ErrorReply
from sparkpoint.service.replica import Replica

router = APIRouter(
    prefix="/v1",
    responses={
        307: {"description": "Not the leader: the same path on the leader's address."},
        404: {"model": ErrorReply, "description": "Unknown job."},
        503: {"model": ErrorReply, "description": "No leader (Retry-After)."},
    },
)


@router.post("/jobs/{job_id}/cancel")
def cancel_job(job_id: str, request: Request) -> dict[str, Any]:
    """Cancel the job for good: pending checkpoints are aborted, none is triggered again,
    and its retained checkpoints, counter and registry record are removed (savepoints
    stay). Cancelling an ended job changes nothing and says how it ended."""
    replica: Replica = request.app.state.replica
    session = replica.active_term().session(job_id)
    aborted = session.coordinator.cancel(f"job {job_id} cancelled")
    replica.wake()  # the tick loop records the status and removes the job at once
    return {"job_id": job_id, "status": session.job_status().value, "aborted": aborted}
