"""Every refusal as ``{"error", "message"}`` with its status code, in one place.

The coordinator's own request errors changed nothing (docs/coordinator.md); the service's
are refused before any change. A coordination error (fenced, disconnected, in doubt) while
acting as leader makes the replica step down, and the caller is told to retry (503).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from sparkpoint.checkpoint import InvalidCheckpointValue
from sparkpoint.config import ConfigError
from sparkpoint.coordinator import (
    CheckpointFinishedError,
    CoordinatorStoppedError,
    DuplicateAcknowledgeError,
    InvalidSubtaskStateError,
    SupersededRunError,
    TriggerFailedError,
    TriggerRejectedError,
    UnexpectedSubtaskError,
    UnknownCheckpointError,
)
from sparkpoint.ha import HAError
from sparkpoint.recovery import CheckpointLoadError, RestoreValidationError
from sparkpoint.runs.errors import (
    InvalidParallelismError,
    InvalidRequestError,
    JobGraphConflictError,
    JobNotRunningError,
    JobNotSettledError,
    NotLeaderError,
    SavepointTargetError,
    ServiceError,
    UnknownCheckpointIdError,
    UnknownJobError,
)
from sparkpoint.service import proxy
from sparkpoint.storage import PermissionDenied

log = logging.getLogger(__name__)

#: Refusals that map straight to a status: (exception, status, code, retry?).
_REFUSALS: tuple[tuple[type[Exception], int, str, bool], ...] = (
    (UnknownCheckpointError, 404, "unknown_checkpoint", False),
    (CheckpointFinishedError, 409, "checkpoint_finished", False),
    (DuplicateAcknowledgeError, 409, "duplicate_ack", False),
    (SupersededRunError, 409, "run_superseded", False),
    (UnexpectedSubtaskError, 422, "unexpected_subtask", False),
    (InvalidSubtaskStateError, 422, "invalid_state", False),
    (TriggerRejectedError, 409, "trigger_rejected", False),
    (CoordinatorStoppedError, 503, "leadership_lost", True),
    (JobNotSettledError, 503, "job_not_settled", True),
    (TriggerFailedError, 500, "trigger_failed", False),
    (ConfigError, 400, "invalid_option", False),  # a bad checkpointing option
    (InvalidCheckpointValue, 422, "invalid_request", False),
    (RestoreValidationError, 422, "restore_validation", False),
    (CheckpointLoadError, 422, "checkpoint_unreadable", False),
    (PermissionDenied, 422, "storage_permission_denied", False),
)


#: The service's own refusals by type.
_SERVICE_STATUS: dict[type[ServiceError], int] = {
    UnknownJobError: 404,
    UnknownCheckpointIdError: 404,
    JobGraphConflictError: 409,
    InvalidRequestError: 422,
    InvalidParallelismError: 422,
    JobNotRunningError: 409,
    SavepointTargetError: 422,
}


def error(status: int, code: str, message: str, *, retry: bool = False) -> JSONResponse:
    headers = {"Retry-After": "1"} if retry else None
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


def _not_leader(request: Request, exc: NotLeaderError) -> Response:
    if exc.leader_address:
        target = exc.leader_address.rstrip("/") + request.url.path
        if request.url.query:
            target += f"?{request.url.query}"
        return RedirectResponse(target, status_code=307)
    return error(503, exc.code, exc.message, retry=True)


def install(app: FastAPI) -> None:
    """Register the exception handlers on ``app``."""

    @app.exception_handler(NotLeaderError)
    async def not_leader(request: Request, exc: NotLeaderError) -> Response:
        if exc.leader_address and proxy.wanted(request):
            return await proxy.forward(request, exc.leader_address)
        return _not_leader(request, exc)

    @app.exception_handler(ServiceError)
    async def service_error(_: Request, exc: ServiceError) -> Response:
        return error(_SERVICE_STATUS.get(type(exc), 500), exc.code, exc.message)

    for exc_type, status, code, retry in _REFUSALS:

        async def refused(
            _: Request, exc: Exception, status: int = status, code: str = code, retry: bool = retry
        ) -> Response:
            return error(status, code, str(exc), retry=retry)

        app.add_exception_handler(exc_type, refused)

    @app.exception_handler(HAError)
    async def coordination(request: Request, exc: HAError) -> Response:
        if request.method == "GET":
            return error(503, "zookeeper_unavailable", str(exc), retry=True)
        # A write as leader failed in a way that may mean we are no longer leader.
        request.app.state.replica.step_down(f"{type(exc).__name__}: {exc}")
        return error(503, "leadership_lost", str(exc), retry=True)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()[:10]
        )
        return error(422, "invalid_request", problems or "malformed request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error(exc.status_code, code, str(exc.detail))
