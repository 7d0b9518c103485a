"""Read-only endpoints the web UI needs beyond the status API (docs/ui.md): a router
over the status model (:mod:`sparkpoint.service.status`) and what the replica asks of
the others (:mod:`sparkpoint.service.ui.peers`).

Every replica answers them, a follower from ZooKeeper and storage alone. Nothing here
writes: the restore preview plans in memory, unlike the driver's restore-plan request,
which also aborts pending checkpoints and moves the counter.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fastapi import APIRouter, Query, Request

from sparkpoint.checkpoint import InvalidCheckpointValue
from sparkpoint.metadata import MetadataError
from sparkpoint.recovery import plan_restore
from sparkpoint.runs.errors import InvalidRequestError
from sparkpoint.service.api.models import ErrorReply
from sparkpoint.service.replica import Replica
from sparkpoint.service.status import StatusReader
from sparkpoint.service.ui import LeadershipHistory, RetainedCache
from sparkpoint.service.ui.jobs import job_row
from sparkpoint.service.ui.peers import PeerProbe, cluster_view, leader_progress, own_view
from sparkpoint.service.ui.progress import ProgressBoard
from sparkpoint.storage import StorageError

_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorReply, "description": "Unknown job or checkpoint."},
    422: {"model": ErrorReply, "description": "A parameter is out of range."},
    503: {"model": ErrorReply, "description": "ZooKeeper unreachable."},
}

router = APIRouter(prefix="/v1/ui", responses=_ERRORS, tags=["ui"])

#: Most points the duration/size chart gets (the newest completed checkpoints).
CHART_POINTS = 1000
#: How many of the newest retained checkpoints the retained list shows.
RETAINED_SHOWN = 10


def _replica(request: Request) -> Replica:
    replica: Replica = request.app.state.replica
    return replica


def _history(request: Request) -> LeadershipHistory:
    history: LeadershipHistory = request.app.state.leadership_history
    return history


def _reader(request: Request) -> StatusReader:
    """The status model for one request; a follower reads retained checkpoints through
    this replica's cache (the UI polls)."""
    replica = _replica(request)
    cache: RetainedCache = request.app.state.ui_retained
    return StatusReader(replica.backend, replica.storage, replica.term, retained=cache.retained)


def _auth(request: Request) -> str | None:
    return request.headers.get("authorization")


def _now_ms() -> int:
    return int(time.time() * 1000)


@router.get("/replica")
def replica_view(request: Request) -> dict[str, Any]:
    """This replica: its role, its ZooKeeper connection, the leadership changes it saw."""
    return {**own_view(_replica(request)), "changes": _history(request).changes()}


@router.get("/cluster")
def cluster(request: Request) -> dict[str, Any]:
    """The leader and its lease, every contender's own view, and the failover history."""
    probe: PeerProbe = request.app.state.peer_probe
    return cluster_view(_replica(request), probe, _history(request), _auth(request))


@router.get("/jobs")
def jobs(request: Request) -> dict[str, Any]:
    """Every job with its operators' parallelism, its last checkpoint and its driver run."""
    reader = _reader(request)
    progress = _progress_reports(request)
    now = _now_ms()
    rows = [job_row(reader, s, progress.get(s.job_id), now) for s in reader.states()]
    return {"now_ms": now, "source": reader.source, "jobs": rows}


@router.get("/progress")
def progress_reports(request: Request) -> dict[str, Any]:
    """What each job's driver reported in its last heartbeat to this replica (the
    leader's are the current ones): epoch, records, records/s, source lag."""
    board: ProgressBoard = request.app.state.driver_progress
    return {"now_ms": _now_ms(), "jobs": board.all()}


def _progress_reports(request: Request) -> dict[str, dict[str, Any]]:
    """The drivers' progress as the leader heard it: its own board on the leader."""
    replica = _replica(request)
    if replica.state() == "leader":
        board: ProgressBoard = request.app.state.driver_progress
        return board.all()
    return leader_progress(replica, _auth(request))


@router.get("/jobs/{job_id}/history")
def history(
    job_id: str,
    request: Request,
    offset: int = Query(0, ge=0),
    limit: int = Query(25, ge=1, le=500),
) -> dict[str, Any]:
    """One page of the checkpoint history, the overview's counts, and the chart series."""
    merged, overview = _reader(request).history(job_id)
    chart = [
        [
            e["id"],
            e["trigger_timestamp"],
            e["end_to_end_duration"],
            e["state_size"],
            e["checkpointed_size"],
        ]
        for e in merged
        if e["status"] == "COMPLETED"
    ][:CHART_POINTS]
    chart.reverse()
    return {
        "now_ms": _now_ms(),
        "source": overview["source"],
        "counts": overview["counts"],
        "summary": overview.get("summary"),
        "latest": overview["latest"],
        "options": overview.get("options"),
        "retained_count": len(overview["retained"]),
        "retained": list(reversed(overview["retained"][-RETAINED_SHOWN:])),
        "total": len(merged),
        "offset": offset,
        "limit": limit,
        "page": merged[offset : offset + limit],
        "chart": {
            "columns": ["id", "trigger_ms", "duration_ms", "size_bytes", "checkpointed_bytes"],
            "rows": chart,
        },
    }


@router.get("/jobs/{job_id}/checkpoints/{checkpoint_id}/verify")
def verify(job_id: str, checkpoint_id: int, request: Request) -> dict[str, Any]:
    """`sparkpoint metadata inspect --verify` on a retained checkpoint: every state file
    exists with its recorded size."""
    replica = _replica(request)
    reader = _reader(request)
    pointer = reader.retained_pointer(reader.state(job_id), checkpoint_id)
    try:
        checkpoint = replica.storage.read_metadata(pointer.metadata_uri, pointer.metadata_checksum)
        checks = replica.storage.verify(checkpoint)
    except (StorageError, MetadataError) as exc:  # unreadable: that is the answer
        return {
            "checkpoint_id": checkpoint_id,
            "metadata_uri": pointer.metadata_uri,
            "ok": False,
            "files": 0,
            "error": f"{type(exc).__name__}: {exc}",
            "problems": [],
        }
    problems = [c.to_dict() for c in checks if not c.ok]
    return {
        "checkpoint_id": checkpoint_id,
        "metadata_uri": pointer.metadata_uri,
        "ok": not problems,
        "files": len(checks),
        "error": None,
        "problems": problems,
    }


@router.get("/jobs/{job_id}/restore-preview")
def restore_preview(
    job_id: str,
    request: Request,
    parallelism: int = Query(..., description="The new parallelism of every operator."),
    checkpoint_id: int | None = Query(None, description="A retained checkpoint; default newest."),
) -> dict[str, Any]:
    """The restore plan at ``parallelism``, computed without touching the job."""
    replica = _replica(request)
    reader = _reader(request)
    state = reader.state(job_id)
    graph = state.record.graph
    try:
        rescaled = dataclasses.replace(
            graph,
            operators=tuple(
                dataclasses.replace(op, parallelism=parallelism) for op in graph.operators
            ),
        )
    except InvalidCheckpointValue as exc:
        raise InvalidRequestError(f"parallelism {parallelism}: {exc}") from exc
    pointer = reader.retained_pointer(state, checkpoint_id)
    checkpoint = replica.storage.read_metadata(pointer.metadata_uri, pointer.metadata_checksum)
    plan = plan_restore(checkpoint, rescaled)
    return {
        "checkpoint_id": pointer.checkpoint_id,
        "metadata_uri": pointer.metadata_uri,
        "parallelism": parallelism,
        "old_parallelism": {op.uid: op.parallelism for op in graph.operators},
        "plan": plan.to_dict(),
    }
