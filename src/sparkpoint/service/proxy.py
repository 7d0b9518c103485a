"""A follower forwards a leader-only call to the leader, when the caller asks for it.

Behind a Kubernetes Service or a single port-forward, a caller reaches some replica but
cannot resolve the leader's pod address a 307 names. A caller that sends
``Sparkpoint-Proxy: allow`` (the sparkpoint client always does) gets the leader's own
answer through the follower instead. One hop only: the forwarded call carries no
``allow``, so a replica that lost leadership meanwhile answers 307/503 itself.

What the caller is told when forwarding fails: 503 (retry elsewhere) only when the call
never reached the leader; after that, 502 ``in_doubt`` (the leader may have acted).
"""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.responses import JSONResponse, Response

log = logging.getLogger(__name__)

HEADER = "sparkpoint-proxy"
ALLOW = "allow"
#: The body the service already read (the body-limit middleware keeps it here).
BODY_SCOPE_KEY = "sparkpoint.body"
# The caller's token too: the leader checks it again (docs/security.md).
_FORWARDED_REQUEST_HEADERS = ("content-type", "accept", "authorization")
_RETURNED_HEADERS = ("content-type", "retry-after", "location")
TIMEOUT_S = 30.0


def wanted(request: Request) -> bool:
    return request.headers.get(HEADER, "").lower() == ALLOW


async def forward(request: Request, leader_address: str) -> Response:
    import httpx  # only a follower asked to forward needs it: replicas start without it

    url = leader_address.rstrip("/") + request.url.path
    if request.url.query:
        url += f"?{request.url.query}"
    body = request.scope.get(BODY_SCOPE_KEY, b"")
    headers = {k: v for k, v in request.headers.items() if k in _FORWARDED_REQUEST_HEADERS}
    headers[HEADER] = "forwarded"
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as http:
            answer = await http.request(request.method, url, content=body, headers=headers)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # never reached the leader
        return _error(503, "leader_unreachable", f"the leader at {leader_address}: {exc}")
    except httpx.HTTPError as exc:
        log.warning("forwarding %s %s to %s failed: %s", request.method, url, leader_address, exc)
        return _error(502, "in_doubt", f"forwarded to the leader, outcome unknown: {exc}")
    returned = {k: v for k, v in answer.headers.items() if k in _RETURNED_HEADERS}
    return Response(answer.content, status_code=answer.status_code, headers=returned)


def _error(status: int, code: str, message: str) -> JSONResponse:
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)
