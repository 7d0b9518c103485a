"""Read-only endpoints the web UI needs beyond the status API (docs/ui.md).

Every replica answers them, a follower from ZooKeeper and storage alone (like
:class:`~sparkpoint.service.status.StatusReader`). Nothing here writes: the restore
preview plans in memory, unlike the driver's restore-plan request, which also aborts
pending checkpoints and moves the counter.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx
from fastapi import APIRouter, Query, Request

from sparkpoint.checkpoint import CheckpointPointer, InvalidCheckpointValue, JobGraph
from sparkpoint.ha import HAError
from sparkpoint.metadata import MetadataError
from sparkpoint.recovery import plan_restore
from sparkpoint.runs.errors import (
    InvalidRequestError,
    UnknownCheckpointIdError,
    UnknownJobError,
)
from sparkpoint.service.api.models import ErrorReply
from sparkpoint.service.replica import Replica
from sparkpoint.service.status import StatusReader, pointer_record
from sparkpoint.service.ui import LeadershipHistory, RetainedCache
from sparkpoint.service.ui.peers import PEER_TIMEOUT_S, PeerProbe, own_view
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
    replica = _replica(request)
    return StatusReader(replica.backend, replica.storage, replica.term)


def _now_ms() -> int:
    return int(time.time() * 1000)


@router.get("/replica")
def replica_view(request: Request) -> dict[str, Any]:
    """This replica: its role, its ZooKeeper connection, the leadership changes it saw."""
    return {**own_view(_replica(request)), "changes": _history(request).changes()}


@router.get("/cluster")
def cluster(request: Request) -> dict[str, Any]:
    """The leader and its lease, every contender's own view, and the failover history."""
    replica = _replica(request)
    leader = replica.known_leader()
    _history(request).observe(leader)  # also covers the embedded backend (no watch)
    now = _now_ms()
    lease = None
    if leader is not None:
        lease = {
            "age_ms": max(now - int(leader.get("renewed_ms") or 0), 0),
            "renewals": leader.get("renewals"),
            "renewed_ms": leader.get("renewed_ms"),
            "leading_for_ms": max(now - int(leader.get("since_ms") or now), 0),
        }
    try:
        contenders = replica.backend.contenders()
    except HAError:  # ZooKeeper unreachable: still show this replica's own view
        contenders = []
    auth = request.headers.get("authorization")
    probe: PeerProbe = request.app.state.peer_probe
    replicas = probe.views(contenders, replica, auth)
    if not any(r.get("instance_id") == replica.instance_id for r in replicas):
        replicas.append({**own_view(replica), "in_election": False, "answered": True})
    return {
        "now_ms": now,
        "served_by": own_view(replica),
        "leader": leader,
        "lease": lease,
        "replicas": replicas,
        "changes": _history(request).changes(),
    }


@router.get("/jobs")
def jobs(request: Request) -> dict[str, Any]:
    """Every job with its operators' parallelism, its last checkpoint and its driver run."""
    reader = _reader(request)
    replica = _replica(request)
    now = _now_ms()
    progress = _progress_reports(request)
    out = []
    for summary in reader.jobs():
        job = reader.job(summary["job_id"])
        retained = _retained(request, summary["job_id"])
        completed = [p for p in retained if not p.is_savepoint]
        last = completed[-1] if completed else None
        out.append(
            {
                "job_id": job["job_id"],
                "status": job["status"],
                "status_reason": job.get("status_reason"),
                "connected": job.get("connected"),
                "registered_ms": job.get("registered_ms"),
                "operators": [
                    {k: op[k] for k in ("uid", "name", "parallelism", "max_parallelism", "keyed")}
                    for op in job["graph"]["operators"]
                ],
                **(runs := _driver_runs(job, replica, summary["job_id"])),
                "progress": _of_run(progress.get(job["job_id"]), runs["driver_run"], now),
                "last_checkpoint": None
                if last is None
                else {
                    "id": last.checkpoint_id,
                    "completed_ms": last.completion_timestamp_ms,
                    "age_ms": max(now - last.completion_timestamp_ms, 0),
                    "duration_ms": last.duration_ms,
                    "state_size": last.state_size,
                    "checkpointed_size": last.checkpointed_size,
                },
                "retained": len(retained),
            }
        )
    return {"now_ms": now, "source": reader.source, "jobs": out}


@router.get("/progress")
def progress_reports(request: Request) -> dict[str, Any]:
    """What each job's driver reported in its last heartbeat to this replica (the
    leader's are the current ones): epoch, records, records/s, source lag."""
    board: ProgressBoard = request.app.state.driver_progress
    return {"now_ms": _now_ms(), "jobs": board.all()}


def _progress_reports(request: Request) -> dict[str, dict[str, Any]]:
    """The drivers' progress as the leader heard it: drivers heartbeat to the leader only,
    so a follower asks it (nothing when it does not answer in time)."""
    replica = _replica(request)
    if replica.state() == "leader":
        return dict(progress_reports(request)["jobs"])
    leader = replica.known_leader()
    if not leader or not leader.get("address"):
        return {}
    auth = request.headers.get("authorization")
    try:
        answer = httpx.get(
            f"{leader['address']}/v1/ui/progress",
            timeout=PEER_TIMEOUT_S,
            headers={"authorization": auth} if auth else {},
        )
        answer.raise_for_status()
        return dict(answer.json()["jobs"])
    except (httpx.HTTPError, ValueError, KeyError):
        return {}


def _of_run(report: dict[str, Any] | None, run_id: str | None, now: int) -> dict[str, Any] | None:
    """``report`` if the job's current driver run sent it (a replaced run's is not shown)."""
    if report is None or (run_id and report.get("run_id") != run_id):
        return None
    return {**report, "age_ms": max(now - int(report["reported_ms"]), 0)}


def _driver_runs(job: dict[str, Any], replica: Replica, job_id: str) -> dict[str, Any]:
    """The current (and standby) driver run: from the status answer if it carries them,
    else from the job's record, whichever version of it this replica knows."""
    run = next((job[k] for k in ("driver_run", "run_id") if job.get(k)), None)
    standby = job.get("standby_run_id") or None
    if run is None:
        record = replica.backend.registry(None).get(job_id)
        run = getattr(record, "run_id", None) or None
        standby = standby or getattr(record, "standby_run_id", None) or None
    return {"driver_run": run, "standby_run": standby}


def _retained(request: Request, job_id: str) -> list[CheckpointPointer]:
    replica = _replica(request)
    term = replica.term
    if term is not None and term.ready.is_set():
        try:
            return term.session(job_id).store.get_all()
        except UnknownJobError:  # not (yet) a session of this term: read what is durable
            pass
    cache: RetainedCache | None = getattr(request.app.state, "ui_retained", None)
    if cache is None:  # one per app; a second made by a racing request is harmless
        cache = request.app.state.ui_retained = RetainedCache(replica.backend)
    return cache.retained(job_id)


def _merged_history(request: Request, job_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The leader's recent history (failed and running ones too) joined with every retained
    checkpoint, newest first; and the overview it came with."""
    reader = _reader(request)
    if reader.source == "leader":
        overview = reader.checkpoints(job_id)
    else:  # the status API's follower answer, from the cached retained list
        reader.job(job_id)  # 404 for an unknown job
        retained = _retained(request, job_id)
        overview = {
            **StatusReader.durable_overview(retained),
            "retained": [p.to_dict() for p in retained],
            "source": reader.source,
        }
    entries = {int(e["id"]): e for e in overview["history"]}
    for raw in overview["retained"]:
        pointer = CheckpointPointer.from_dict(raw)
        entries.setdefault(pointer.checkpoint_id, pointer_record(pointer))
    retained_ids = {int(r["checkpoint_id"]) for r in overview["retained"]}
    for cid, entry in entries.items():
        entry["retained"] = cid in retained_ids
    return [entries[k] for k in sorted(entries, reverse=True)], overview


@router.get("/jobs/{job_id}/history")
def history(
    job_id: str,
    request: Request,
    offset: int = Query(0, ge=0),
    limit: int = Query(25, ge=1, le=500),
) -> dict[str, Any]:
    """One page of the checkpoint history, the overview's counts, and the chart series."""
    merged, overview = _merged_history(request, job_id)
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


def _pointer(request: Request, job_id: str, checkpoint_id: int | None) -> CheckpointPointer:
    retained = _retained(request, job_id)
    if checkpoint_id is None:
        if not retained:
            raise UnknownCheckpointIdError(f"job {job_id!r} retains no checkpoint")
        return retained[-1]
    for pointer in retained:
        if pointer.checkpoint_id == checkpoint_id:
            return pointer
    raise UnknownCheckpointIdError(f"checkpoint {checkpoint_id} of job {job_id!r} is not retained")


@router.get("/jobs/{job_id}/checkpoints/{checkpoint_id}/verify")
def verify(job_id: str, checkpoint_id: int, request: Request) -> dict[str, Any]:
    """`sparkpoint metadata inspect --verify` on a retained checkpoint: every state file
    exists with its recorded size."""
    replica = _replica(request)
    _reader(request).job(job_id)  # 404 for an unknown job
    pointer = _pointer(request, job_id, checkpoint_id)
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
    problems = [
        {
            "operator": c.operator_uid,
            "subtask": c.subtask,
            "path": c.path,
            "expected_size": c.expected_size,
            "actual_size": c.actual_size,
            "problem": c.problem,
        }
        for c in checks
        if not c.ok
    ]
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
    job = _reader(request).job(job_id)
    graph = JobGraph.from_dict(job["graph"])
    try:
        rescaled = dataclasses.replace(
            graph,
            operators=tuple(
                dataclasses.replace(op, parallelism=parallelism) for op in graph.operators
            ),
        )
    except InvalidCheckpointValue as exc:
        raise InvalidRequestError(f"parallelism {parallelism}: {exc}") from exc
    pointer = _pointer(request, job_id, checkpoint_id)
    checkpoint = replica.storage.read_metadata(pointer.metadata_uri, pointer.metadata_checksum)
    plan = plan_restore(checkpoint, rescaled)
    return {
        "checkpoint_id": pointer.checkpoint_id,
        "metadata_uri": pointer.metadata_uri,
        "parallelism": parallelism,
        "old_parallelism": {op.uid: op.parallelism for op in graph.operators},
        "plan": plan.to_dict(),
    }
