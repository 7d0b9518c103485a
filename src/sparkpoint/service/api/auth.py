"""Who may call what: bearer tokens with a role, checked before any endpoint runs.

The token file (``rest.auth.token-file``) holds one token per line::

    # role      name          token
    driver      clicks-etl    4f0c1e…   (at least 16 characters)
    operator    alice         9b27aa…
    read        prometheus    c51d03…

Blank lines and ``#`` comments are ignored; names and tokens must be unique. Roles grow:
``read`` may only GET, ``driver`` may also register, heartbeat, acknowledge, decline and
ask for a restore plan (for any job), ``operator`` may also trigger checkpoints and
savepoints and call everything else. A POST the table below does not name needs an
operator: a new endpoint is never open by accident. ``/healthz`` and ``/readyz`` are
always open, ``/metrics`` unless ``rest.auth.protect-metrics``. Tokens are compared in
constant time and never logged; the token's *name* is what the audit log records.
"""

from __future__ import annotations

import enum
import hmac
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from sparkpoint import metrics
from sparkpoint.config import SecuritySettings

log = logging.getLogger("sparkpoint.audit")


class Permission(enum.StrEnum):
    READ = "read"
    DRIVE = "drive"
    OPERATE = "operate"


class Role(enum.StrEnum):
    READ = "read"
    DRIVER = "driver"
    OPERATOR = "operator"


GRANTS: dict[Role, frozenset[Permission]] = {
    Role.READ: frozenset({Permission.READ}),
    Role.DRIVER: frozenset({Permission.READ, Permission.DRIVE}),
    Role.OPERATOR: frozenset(Permission),
}

#: Never behind a token: liveness and readiness probes.
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
METRICS_PATH = "/metrics"
#: Route names (the endpoint functions) a driver token may call besides GETs.
DRIVER_CALLS = frozenset(
    {"register_job", "heartbeat", "acknowledge", "decline", "plan", "rescale_applied"}
)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MIN_TOKEN_LENGTH = 16


class TokenFileError(ValueError):
    """The token file is missing or malformed (the message never contains a token)."""


@dataclass(frozen=True, slots=True)
class Caller:
    role: Role
    name: str


@dataclass(frozen=True, slots=True)
class _Entry:
    caller: Caller
    token: bytes


def parse_tokens(text: str, source: str = "token file") -> tuple[_Entry, ...]:
    entries: list[_Entry] = []
    names: set[str] = set()
    tokens: set[bytes] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"{source} line {number}"
        if len(parts) != 3:
            raise TokenFileError(f"{where}: expected '<role> <name> <token>'")
        role, name, token = parts
        if role not in Role.__members__.values():
            raise TokenFileError(f"{where}: role {role!r} is not one of read, driver, operator")
        if not _NAME.match(name):
            raise TokenFileError(f"{where}: name {name!r} is not 1-64 letters, digits, ._@-")
        if len(token) < MIN_TOKEN_LENGTH:
            raise TokenFileError(f"{where}: token shorter than {MIN_TOKEN_LENGTH} characters")
        if name in names or token.encode() in tokens:
            raise TokenFileError(f"{where}: name {name!r} or its token appears twice")
        names.add(name)
        tokens.add(token.encode())
        entries.append(_Entry(Caller(Role(role), name), token.encode()))
    if not entries:
        raise TokenFileError(f"{source}: no tokens")
    return tuple(entries)


class Authenticator:
    """The accepted tokens; :meth:`identify` finds a presented one in constant time."""

    def __init__(self, entries: tuple[_Entry, ...], *, protect_metrics: bool) -> None:
        self._entries = entries
        self.protect_metrics = protect_metrics

    @classmethod
    def from_settings(cls, settings: SecuritySettings) -> Authenticator | None:
        """None when ``rest.auth.enabled`` is false; raises :class:`TokenFileError`."""
        if not settings.auth_enabled:
            return None
        if not settings.token_file:
            raise TokenFileError(
                "rest.auth.enabled is true but rest.auth.token-file is not set "
                "(set rest.auth.enabled=false only for local use)"
            )
        try:
            text = Path(settings.token_file).read_text()
        except OSError as exc:
            raise TokenFileError(f"rest.auth.token-file cannot be read: {exc}") from None
        entries = parse_tokens(text, settings.token_file)
        return cls(entries, protect_metrics=settings.protect_metrics)

    def identify(self, presented: str) -> Caller | None:
        candidate = presented.encode()
        found: Caller | None = None
        for entry in self._entries:  # every entry, so timing does not tell which matched
            if hmac.compare_digest(entry.token, candidate):
                found = entry.caller
        return found


def required_permission(route: BaseRoute, method: str) -> Permission | None:
    """What ``method`` on ``route`` needs (None: open to anyone)."""
    path = getattr(route, "path", "")
    if path in OPEN_PATHS:
        return None
    if method in {"GET", "HEAD"}:
        return Permission.READ
    if getattr(route, "name", "") in DRIVER_CALLS:
        return Permission.DRIVE
    return Permission.OPERATE


class AuthError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _refuse(status: int, code: str, message: str, request: Request) -> AuthError:
    metrics.REST_REFUSALS.labels(code).inc()
    request.state.refused = code
    return AuthError(status, code, message)


async def authorize(request: Request) -> None:
    """App-wide dependency: let the call through or raise :class:`AuthError`."""
    auth: Authenticator | None = request.app.state.auth
    if auth is None:
        request.state.caller = "anonymous"
        return
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    needed = required_permission(route, request.method) if route is not None else None
    if needed is None or (path == METRICS_PATH and not auth.protect_metrics):
        return
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise _refuse(401, "unauthenticated", "a bearer token is required", request)
    caller = auth.identify(presented.strip())
    if caller is None:
        raise _refuse(401, "invalid_token", "the bearer token is not accepted", request)
    request.state.caller = caller.name
    if needed not in GRANTS[caller.role]:
        raise _refuse(
            403,
            "forbidden",
            f"token {caller.name!r} has role {caller.role.value!r}; "
            f"{request.method} {path} needs the {needed.value!r} permission "
            f"({', '.join(r.value for r, p in GRANTS.items() if needed in p)})",
            request,
        )


def install(app: FastAPI, settings: SecuritySettings) -> None:
    """Load the tokens (raising :class:`TokenFileError` early) and map refusals."""
    app.state.auth = Authenticator.from_settings(settings)

    @app.exception_handler(AuthError)
    async def refused(_: Request, exc: AuthError) -> Response:
        headers = {"WWW-Authenticate": 'Bearer realm="sparkpoint"'} if exc.status == 401 else {}
        return JSONResponse(
            {"error": exc.code, "message": exc.message}, status_code=exc.status, headers=headers
        )
