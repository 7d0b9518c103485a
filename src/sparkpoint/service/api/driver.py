"""Driver-facing endpoints: leader only (a follower redirects, 503 while none leads)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from sparkpoint.checkpoint import JobGraph, OperatorSubtaskState, serde
from sparkpoint.coordinator import Acknowledgement, CheckpointStatus
from sparkpoint.runs.errors import InvalidRequestError
from sparkpoint.runs.messages import RestoreMode
from sparkpoint.service.api.models import (
    AckModel,
    AckReply,
    AcksRequest,
    DeclineRequest,
    ErrorReply,
    HeartbeatReply,
    HeartbeatRequest,
    RegisterReply,
    RegisterRequest,
    ReleaseRequest,
    RestorePlanReply,
    RestorePlanRequest,
    SavepointRequest,
    TriggerReply,
    TriggerRequest,
)
from sparkpoint.service.replica import Replica
from sparkpoint.service.targets import check_savepoint_target
from sparkpoint.service.term import Term

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorReply, "description": text}
    for code, text in {
        400: "Invalid option or target.",
        404: "Unknown job or checkpoint.",
        409: "Conflict: finished checkpoint, duplicate ack, graph conflict, rejected trigger, "
        "superseded driver run (run_superseded).",
        413: "Body larger than 16 MiB.",
        422: "Malformed body, or a subtask the checkpoint does not wait for.",
        503: "No leader (Retry-After), or this leader lost leadership while answering.",
    }.items()
}
_ERRORS[307] = {"description": "Not the leader: the same path on the leader's address."}

router = APIRouter(prefix="/v1", responses=_ERRORS)

_STATUS = {
    CheckpointStatus.IN_PROGRESS: "pending",
    CheckpointStatus.FINALIZING: "pending",
    CheckpointStatus.COMPLETED: "completed",
    CheckpointStatus.FAILED: "failed",
}


def _term(request: Request) -> Term:
    replica: Replica = request.app.state.replica
    return replica.active_term()


def _state(ack: AckModel) -> OperatorSubtaskState:
    try:
        return OperatorSubtaskState(
            keyed=tuple(serde.keyed_from_dict(h) for h in ack.state.keyed),
            operator=tuple(serde.operator_from_dict(h) for h in ack.state.operator),
        )
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InvalidRequestError(
            f"state of operator {ack.operator_uid!r} subtask {ack.subtask}: {exc}"
        ) from exc


@router.post("/jobs", response_model=RegisterReply)
def register_job(body: RegisterRequest, request: Request) -> RegisterReply:
    """Register a job (idempotent for the same graph); keeps its checkpoints and counter.
    Starts a new driver run: earlier runs are refused from now on."""
    term = _term(request)
    graph = JobGraph.from_dict(body.graph.model_dump())
    registration = term.runs.register(
        graph,
        body.checkpoint_config,
        replace=body.replace,
        standby=body.standby,
        address=body.probe_address,
    )
    return RegisterReply(
        job_id=graph.job_id,
        leader_term=term.epoch,
        leader_epoch=term.epoch,
        status=registration.session.job_status().value,
        notification_seq=registration.notification_seq,
        run_id=registration.run_id,
        role=registration.role,  # type: ignore[arg-type]
    )


@router.post("/jobs/{job_id}/heartbeat", response_model=HeartbeatReply)
def heartbeat(job_id: str, body: HeartbeatRequest, request: Request) -> dict[str, Any]:
    """Mark the job connected; the reply carries notices after ``after_seq``. A standby
    run's heartbeat carries none: it only learns whether it was granted the job."""
    term = _term(request)
    was_connected = term.session(job_id).connected()
    beat = term.runs.heartbeat(job_id, body.run_id, body.after_seq)
    if beat.role == "active" and body.progress is not None:
        request.app.state.driver_progress.note(job_id, body.run_id, body.progress.model_dump())
    if beat.role == "active" and not was_connected:
        # The driver is heard for the first time in this term (a failover, or it is back
        # from a gap): let the worker trigger what is due now, so that the trigger rides
        # on this reply instead of waiting for the next heartbeat. Bounded: a slow round
        # only delays this reply, never loses a notice (the next heartbeat carries it).
        request.app.state.replica.wake()
        term.await_rounds(2, timeout_s=0.2)
        beat = term.runs.heartbeat(job_id, body.run_id, body.after_seq)
    return {
        "leader_term": term.epoch,
        "leader_epoch": term.epoch,
        "job_status": beat.job_status.value,
        "notifications": [n.to_dict() for n in beat.notices],
        "role": beat.role,
        "notification_seq": beat.notification_seq,
        "rescale": None if beat.rescale is None else beat.rescale.to_dict(),
    }


@router.post("/jobs/{job_id}/release")
def release(job_id: str, body: ReleaseRequest, request: Request) -> dict[str, Any]:
    """A driver run ends cleanly: its standby, if any, is granted the job now."""
    _term(request).runs.release(job_id, body.run_id)
    return {}


@router.post("/jobs/{job_id}/checkpoints/{checkpoint_id}/acks", response_model=AckReply)
def acknowledge(job_id: str, checkpoint_id: int, body: AcksRequest, request: Request) -> AckReply:
    """Acknowledge subtasks of a checkpoint, all or nothing."""
    acks = [Acknowledgement(a.operator_uid, a.subtask, _state(a)) for a in body.acks]
    result = _term(request).runs.acknowledge(job_id, checkpoint_id, acks, body.run_id)
    return AckReply(
        checkpoint_id=result.checkpoint_id,
        status=_STATUS[result.status],  # type: ignore[arg-type]
        remaining=result.remaining,
        reason=result.reason,
    )


@router.post("/jobs/{job_id}/checkpoints/{checkpoint_id}/decline")
def decline(
    job_id: str, checkpoint_id: int, body: DeclineRequest, request: Request
) -> dict[str, Any]:
    """A subtask could not snapshot: the checkpoint fails."""
    _term(request).runs.decline(
        job_id, checkpoint_id, body.operator_uid, body.subtask, body.reason, body.run_id
    )
    return {}


@router.post("/jobs/{job_id}/restore-plan", response_model=RestorePlanReply)
def plan(job_id: str, body: RestorePlanRequest, request: Request) -> dict[str, Any]:
    """Which checkpoint to restore and what every new subtask reads."""
    graph = JobGraph.from_dict(body.graph.model_dump())
    planned = _term(request).runs.restore_plan(
        job_id,
        graph,
        run_id=body.run_id,
        pointer=body.pointer,
        allow_non_restored_state=body.allow_non_restored_state,
        mode=None if body.restore_mode is None else RestoreMode.of(body.restore_mode),
    )
    return planned.to_dict()


@router.post("/jobs/{job_id}/checkpoints", status_code=202, response_model=TriggerReply)
def trigger_checkpoint(
    job_id: str, request: Request, body: TriggerRequest | None = None
) -> TriggerReply:
    """Trigger a checkpoint now (ignores interval, pause and concurrency)."""
    run_id = body.run_id if body is not None else None
    return TriggerReply(checkpoint_id=_term(request).runs.trigger_checkpoint(job_id, run_id))


@router.post("/jobs/{job_id}/savepoints", status_code=202, response_model=TriggerReply)
def trigger_savepoint(job_id: str, body: SavepointRequest, request: Request) -> TriggerReply:
    """Trigger a savepoint into ``target_dir`` (or the configured savepoint directory)."""
    term = _term(request)
    if body.run_id is not None:
        term.session(job_id).check_run(body.run_id)
    if not body.target_dir and term.storage.savepoint_dir is None:
        raise InvalidRequestError("no target_dir given and no state.savepoints.dir configured")
    roots = request.app.state.replica.config.storage.savepoint_roots
    check_savepoint_target(body.target_dir, roots)  # before anything is triggered
    checkpoint_id = term.runs.trigger_savepoint(job_id, body.target_dir or None, stop=body.stop)
    return TriggerReply(checkpoint_id=checkpoint_id)
