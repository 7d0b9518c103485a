"""Status endpoints (any replica), a router over the status model
(:mod:`sparkpoint.service.status`), and probes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from sparkpoint.service.api.models import ErrorReply, ProbeReply
from sparkpoint.service.replica import Replica
from sparkpoint.service.status import StatusReader

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorReply, "description": "Unknown job or checkpoint."},
    503: {"model": ErrorReply, "description": "ZooKeeper unreachable."},
}

router = APIRouter(prefix="/v1", responses=_ERRORS)
probes = APIRouter()


def _reader(request: Request) -> StatusReader:
    replica: Replica = request.app.state.replica
    return StatusReader(replica.backend, replica.storage, replica.term)


@router.get("/leader")
def leader(request: Request) -> dict[str, Any]:
    """The leader as published in ZooKeeper, every contender, and this replica."""
    replica: Replica = request.app.state.replica
    term = replica.term
    return {
        **_reader(request).leader(),
        "this": {
            "instance_id": replica.instance_id,
            "state": replica.state(),
            "address": replica.address,
            "term": term.epoch if term is not None else None,
            "epoch": term.epoch if term is not None else None,  # deprecated alias of "term"
            "ready": replica.is_ready(),
        },
    }


@router.get("/jobs")
def jobs(request: Request) -> dict[str, Any]:
    return {"jobs": _reader(request).jobs()}


@router.get("/jobs/{job_id}")
def job(job_id: str, request: Request) -> dict[str, Any]:
    return _reader(request).job(job_id)


@router.get("/jobs/{job_id}/checkpoints")
def checkpoints(job_id: str, request: Request) -> dict[str, Any]:
    """Counts, latest completed/failed/restored/savepoint, history and retained pointers."""
    return _reader(request).checkpoints(job_id)


@router.get("/jobs/{job_id}/checkpoints/{checkpoint_id}")
def checkpoint(job_id: str, checkpoint_id: int, request: Request) -> dict[str, Any]:
    return _reader(request).checkpoint(job_id, checkpoint_id)


@probes.get("/healthz", response_model=ProbeReply)
def healthz() -> ProbeReply:
    """The process is alive."""
    return ProbeReply(status="ok")


@probes.get(
    "/readyz",
    response_model=ProbeReply,
    responses={503: {"model": ProbeReply, "description": "Not ready."}},
)
def readyz(request: Request) -> Response:
    """Connected to ZooKeeper and leading (recovered) or following a known leader."""
    replica: Replica = request.app.state.replica
    known = replica.known_leader() or {}
    leader = {k: known.get(k) for k in ("instance_id", "address")} if known else None
    body = {"detail": replica.state(), "leader": leader}
    if replica.is_ready():
        return JSONResponse({"status": "ready", **body})
    return JSONResponse({"status": "not ready", **body}, status_code=503)


@probes.get("/metrics", include_in_schema=False)
def metrics() -> Response:
    """Prometheus exposition of the default registry."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
