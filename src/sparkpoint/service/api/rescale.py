"""Rescaling a running job (docs/operations.md, "Rescaling a running job"). Leader only.

An operator asks (``POST /v1/jobs/{job_id}/rescale``); the request is stored with the
job's record in ZooKeeper and the job's active driver run applies it at its next epoch
boundary, then reports when it took effect (``POST …/rescale/{request_id}/applied``, a
driver call). ``GET /v1/jobs/{job_id}`` (any replica) shows the last request and its
state; ``sparkpoint jobs rescale --wait`` polls it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from sparkpoint.runs.errors import UnknownJobError
from sparkpoint.service.api.models import ErrorReply
from sparkpoint.service.replica import Replica
from sparkpoint.store import RescaleRequest

router = APIRouter(
    prefix="/v1",
    responses={
        307: {"description": "Not the leader: the same path on the leader's address."},
        404: {"model": ErrorReply, "description": "Unknown job, or no rescale request."},
        409: {"model": ErrorReply, "description": "The job is over, or a superseded run."},
        422: {"model": ErrorReply, "description": "A parallelism the job cannot run at."},
        503: {"model": ErrorReply, "description": "No leader (Retry-After)."},
    },
)


class RescaleBody(BaseModel):
    parallelism: int = Field(description="1 to the job's max parallelism (its key groups).")


class AppliedBody(BaseModel):
    run_id: str = Field(max_length=128)
    epoch: int = Field(ge=0, description="The driver run's epoch after which it took effect.")
    checkpoint_id: int | None = Field(None, description="The checkpoint it was planned from.")


class RescaleReply(BaseModel):
    job_id: str
    request_id: str
    parallelism: int
    state: str = Field(
        description='"pending" until the driver applied it, then "applied"; "unchanged" '
        "when the job already runs at that parallelism (nothing is stored)."
    )
    requested_ms: int
    epoch: int | None = None
    checkpoint_id: int | None = None
    applied_ms: int | None = None


def _reply(job_id: str, request: RescaleRequest) -> RescaleReply:
    return RescaleReply(job_id=job_id, **request.to_dict())


@router.post("/jobs/{job_id}/rescale", status_code=202, response_model=RescaleReply)
def request_rescale(job_id: str, body: RescaleBody, request: Request) -> RescaleReply:
    """Run the job at ``parallelism`` from its next epoch boundary: its driver completes
    a checkpoint, then goes on from it at the new parallelism. Stored in ZooKeeper (a
    change of leader keeps it); a later request replaces one still pending."""
    replica: Replica = request.app.state.replica
    asked = replica.active_term().runs.request_rescale(job_id, body.parallelism)
    replica.wake()  # the next heartbeat reply carries it
    return _reply(job_id, asked)


@router.post("/jobs/{job_id}/rescale/{request_id}/applied", response_model=RescaleReply)
def rescale_applied(
    job_id: str, request_id: str, body: AppliedBody, request: Request
) -> dict[str, Any]:
    """The driver run applied the request (idempotent)."""
    replica: Replica = request.app.state.replica
    runs = replica.active_term().runs
    last = runs.rescale_applied(job_id, body.run_id, request_id, body.epoch, body.checkpoint_id)
    if last is None:
        raise UnknownJobError(f"job {job_id}: no rescale request")
    return _reply(job_id, last).model_dump()
