"""Request body limits, enforced before authentication and before any parsing.

A pure ASGI middleware in front of every route. Admin and node routes accept at most
`ADMIN_BODY_LIMIT` bytes (a node heartbeat or a profile is a few KB); the OpenAI-compatible
`/v1` routes accept up to `OPENAI_BODY_LIMIT` (the proxy's own limit, `MAX_BODY_BYTES`, one rule
in one place). A declared `Content-Length` over the limit is answered 413 at once, without reading
the body. A body without a declared length (chunked) is counted as it arrives: on an admin or
node route it is read here, at most the limit, and cut with 413 the moment it exceeds it (the rest
is never read); on `/v1` the proxy streams it and cuts it itself at the same limit. The 413 has
the usual error shape: `{"error": {"code": "request_too_large", "message", "fix"}}`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from grid.api.errors import error_body
from grid.api.openai_support import MAX_BODY_BYTES

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ADMIN_BODY_LIMIT = 4 * 1024 * 1024
OPENAI_BODY_LIMIT = MAX_BODY_BYTES
OPENAI_PREFIX = "/v1/"


def body_limit(path: str) -> int:
    return OPENAI_BODY_LIMIT if path.startswith(OPENAI_PREFIX) else ADMIN_BODY_LIMIT


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def send_json(
    send: Send, status: int, doc: object, headers: list[tuple[bytes, bytes]]
) -> None:
    """A whole JSON answer from an ASGI middleware (before any route runs)."""
    body = json.dumps(doc).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start + headers})
    await send({"type": "http.response.body", "body": body})


async def _too_large(send: Send, limit: int) -> None:
    doc = error_body(
        "request_too_large",
        f"the request body is larger than {limit} bytes",
        "send a smaller request (see docs/fault-tolerance.md for the limits)",
    )
    await send_json(send, 413, doc, [(b"connection", b"close")])


class BodyLimit:
    """ASGI middleware: see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        limit = body_limit(path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _too_large(send, limit)
            return
        if declared is not None or path.startswith(OPENAI_PREFIX):
            await self.app(scope, receive, send)
            return
        # No declared length: read what comes, at most the limit, then replay it to the app.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            size += len(message.get("body", b""))
            if size > limit:
                await _too_large(send, limit)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay_body(b"".join(chunks), receive), send)


def _replay(messages: list[Message]) -> Receive:
    pending = list(messages)

    async def receive() -> Message:
        return pending.pop(0)

    return receive


def _replay_body(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # http.disconnect, when the client goes away

    return replay
