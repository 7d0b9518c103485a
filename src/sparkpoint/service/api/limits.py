"""Refuse request bodies above a size limit with 413, before any parsing (pure ASGI)."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sparkpoint.service.proxy import BODY_SCOPE_KEY

#: docs/api.md: bodies above 16 MiB get a 413.
MAX_BODY_BYTES = 16 * 1024 * 1024


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": code, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Reads the whole body (at most ``limit`` bytes) and replays it to the app."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _reply(send, 400, "invalid_request", "Content-Length is not a number")
                return
            if size > self.limit:
                await _reply(send, 413, "body_too_large", self._too_large(size))
                return
        chunks: list[bytes] = []
        total = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.limit:
                await _reply(send, 413, "body_too_large", self._too_large(total))
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        scope[BODY_SCOPE_KEY] = body  # kept for a follower forwarding the call (proxy)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self, size: Any) -> str:
        return f"request body of {size} bytes or more exceeds the limit of {self.limit} bytes"
