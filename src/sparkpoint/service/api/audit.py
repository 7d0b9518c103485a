"""The audit log: every call that may change something, who made it, on which job, and
how it ended — one line on the ``sparkpoint.audit`` logger per call.

Example line::

    POST /v1/jobs/clicks/savepoints caller=alice job=clicks status=202

``caller`` is the token's name (never the token), ``anonymous`` with authentication off,
``-`` when no accepted token was presented. GETs and probes are not audited, nor are
heartbeats and acknowledgements unless refused (they are a driver's steady traffic).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("sparkpoint.audit")

_READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})
#: A driver's steady traffic (several calls a second per job): audited only when refused.
ROUTINE_CALLS = frozenset({"heartbeat", "acknowledge"})


async def note_job(request: Request) -> None:
    """App-wide dependency: remember the job of a registration (its id is in the body)."""
    route = request.scope.get("route")
    if request.method in _READ_ONLY or getattr(route, "name", "") != "register_job":
        return
    try:
        data: Any = json.loads(await request.body())
        request.state.job_id = str(data["graph"]["job_id"])[:128]
    except (ValueError, KeyError, TypeError):
        pass  # the body's own validation will refuse it; the line says job=-


class AuditLog:
    """ASGI middleware writing the audit line once the answer is sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _READ_ONLY:
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            _write(scope, status)


def _write(scope: Scope, status: int) -> None:
    state = scope.get("state", {})
    routine = getattr(scope.get("route"), "name", "") in ROUTINE_CALLS
    if routine and status not in (401, 403):
        return
    job = scope.get("path_params", {}).get("job_id") or state.get("job_id", "-")
    refused = state.get("refused")
    log.info(
        "%s %s caller=%s job=%s status=%d%s",
        scope["method"],
        scope["path"],
        state.get("caller", "-"),
        job,
        status,
        f" refused={refused}" if refused else "",
    )
