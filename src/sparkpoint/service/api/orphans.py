"""Orphaned checkpoint directories: the leader's collector, on request (dry run or real).

Leader only, like the driver endpoints: only a leader that has read the stores decides
what is garbage, so a follower redirects and no leader means a 503.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

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


class OrphanCollectionRequest(BaseModel):
    dry_run: bool = Field(True, description="Report what would be deleted; delete nothing.")
    job_id: str | None = Field(None, description="Only this job (default: every job).")


@router.post("/checkpoints/orphans")
def collect_orphans(body: OrphanCollectionRequest, request: Request) -> dict[str, Any]:
    """Run the orphan collector now over every job (or one) and report, per job, what is
    retained and pending, which directories were (or would be) deleted and which are kept
    because they are younger than the grace period."""
    replica: Replica = request.app.state.replica
    term = replica.active_term()
    if body.job_id is not None:
        term.session(body.job_id)  # UnknownJobError (404) for a job this term does not run
        job_ids: list[str] | None = [body.job_id]
    else:
        job_ids = None
    report = term.orphans.collect(dry_run=body.dry_run, job_ids=job_ids)
    return {**report.to_dict(), "leader": replica.instance_id}
