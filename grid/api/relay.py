"""The relay: the controller's end of each node's tunnel (docs/addressing.md "Relay").

Every node agent keeps one outbound WebSocket to the controller (`grid/api/relay_route.py`
accepts it after checking the node credential). `RelayHub` holds the live tunnel of each host;
the router asks `connected(host_id)` while it builds candidate routes, so a host whose tunnel
dropped has no admitted route from that moment on. `RelaySession.request` sends one engine
request down the tunnel as a stream (`grid/wire/tunnel.py`) and returns a `RelayReply` whose
`aiter_raw` yields the engine's answer as it arrives; `aclose` before the end sends CANCEL, so
the node aborts the engine request (a client that left costs the engine nothing more).

Everything runs on the server's event loop; `connected` is also read from the router's worker
threads (a dictionary read). Sessions live in memory only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from grid.api.auth import NodeIdentity
from grid.wire import (
    Kind,
    RequestHead,
    ResponseHead,
    frame,
    parse,
    parse_error,
    request_frame,
    split_whole,
)

log = logging.getLogger("grid.relay")
_CLOSED = -1  # queue marker: the tunnel ended


class UpstreamError(Exception):
    """An engine request that could not be completed (over the tunnel or straight): a stable
    code, a sentence, and whether it timed out."""

    def __init__(self, code: str, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.timed_out = timed_out


class Channel(Protocol):
    """The part of an ASGI WebSocket the session uses (Starlette's `WebSocket`)."""

    async def receive(self) -> Any: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


@dataclass
class _Stream:
    queue: asyncio.Queue[tuple[int, bytes]]


class RelayReply:
    """One engine answer arriving over the tunnel (the subset of httpx.Response the proxy uses)."""

    def __init__(
        self,
        session: RelaySession,
        stream: int,
        head: ResponseHead,
        read_timeout_s: float,
        whole: bytes | None = None,
    ) -> None:
        self._session = session
        self._stream = stream
        self.status_code = head.status
        self.headers: Mapping[str, str] = {"content-type": head.content_type}
        self._read_timeout_s = read_timeout_s
        self._whole = whole  # the answer arrived in one WHOLE frame
        self._done = whole is not None

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        if self._whole is not None:
            body, self._whole = self._whole, None
            if body:
                yield body
        while not self._done:
            kind, payload = await self._session.next_frame(self._stream, self._read_timeout_s)
            if kind == Kind.DATA:
                yield payload
            elif kind == Kind.END:
                self._done = True
                self._session.forget(self._stream)
            elif kind == Kind.ERROR:
                self._done = True
                self._session.forget(self._stream)
                code, message = parse_error(payload)
                raise UpstreamError(code, message or "the node lost the engine mid-answer")
            else:  # _CLOSED, or a frame that has no place here
                self._done = True
                self._session.forget(self._stream)
                raise UpstreamError(
                    "relay_disconnected", "the node's tunnel closed before the answer ended"
                )

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._session.cancel(self._stream)


class RelaySession:
    def __init__(
        self,
        host_id: str,
        channel: Channel,
        *,
        expires_at: float,
        peer: str,
        opened_at: float,
        credential: NodeIdentity | None = None,
    ) -> None:
        self.host_id = host_id
        self.channel = channel
        self.expires_at = expires_at  # the node credential's expiry: the tunnel ends with it
        self.credential = credential  # the handshake's: a revocation closes the tunnel
        self.peer = peer
        self.opened_at = opened_at
        self.closed = False
        self.requests = 0
        self._streams: dict[int, _Stream] = {}
        self._next_stream = 0
        self._send_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ reading

    async def run(self) -> None:
        """Dispatch the node's frames to their streams until the tunnel closes."""
        try:
            while True:
                message = await self.channel.receive()
                if message.get("type") == "websocket.disconnect":
                    return
                data = message.get("bytes")
                if data is None:
                    log.warning("relay %s: a text frame on the tunnel; closing it", self.host_id)
                    return
                try:
                    kind, stream, payload = parse(data)
                except ValueError as exc:
                    log.warning("relay %s: %s; closing the tunnel", self.host_id, exc)
                    return
                entry = self._streams.get(stream)
                if entry is not None:  # a late frame of a cancelled stream is dropped
                    entry.queue.put_nowait((int(kind), payload))
        finally:
            self._end()

    def _end(self) -> None:
        self.closed = True
        for entry in self._streams.values():
            entry.queue.put_nowait((_CLOSED, b""))

    async def next_frame(self, stream: int, timeout_s: float) -> tuple[int, bytes]:
        entry = self._streams.get(stream)
        if entry is None:
            return _CLOSED, b""
        try:
            async with asyncio.timeout(timeout_s):  # no task per frame, as wait_for makes one
                return await entry.queue.get()
        except TimeoutError:
            self.cancel(stream)
            raise UpstreamError(
                "upstream_timeout",
                f"the engine sent nothing for {timeout_s:g} s",
                timed_out=True,
            ) from None

    # ------------------------------------------------------------------ writing

    async def _send(self, data: bytes) -> None:
        if self.closed:
            raise UpstreamError("relay_disconnected", f"host {self.host_id}'s tunnel is closed")
        try:
            async with self._send_lock:
                await self.channel.send_bytes(data)
        except Exception as exc:  # the socket went away under us
            self._end()
            raise UpstreamError(
                "relay_disconnected", f"host {self.host_id}'s tunnel closed ({type(exc).__name__})"
            ) from None

    async def request(
        self, head: RequestHead, body: bytes, *, timeout_s: float, read_timeout_s: float
    ) -> RelayReply:
        """Send one engine request; returns once the engine's status line arrived."""
        self._next_stream = self._next_stream % 0xFFFFFFFF + 1
        stream = self._next_stream
        self._streams[stream] = _Stream(asyncio.Queue())
        self.requests += 1
        try:
            await self._send(request_frame(stream, head, body))
            kind, payload = await self.next_frame(stream, timeout_s)
        except BaseException:  # cancelled (the client left) or failed: the node stops too
            self.cancel(stream)
            raise
        if kind == Kind.WHOLE:
            self.forget(stream)
            try:
                answer, body = split_whole(payload)
            except ValueError:
                raise UpstreamError(
                    "relay_protocol_error", "the node sent an unreadable head"
                ) from None
            return RelayReply(self, stream, answer, read_timeout_s, whole=body)
        if kind == Kind.RESPONSE:
            try:
                return RelayReply(self, stream, ResponseHead.from_json(payload), read_timeout_s)
            except ValueError:
                self.cancel(stream)
                raise UpstreamError(
                    "relay_protocol_error", "the node sent an unreadable head"
                ) from None
        self.forget(stream)
        if kind == Kind.ERROR:
            code, message = parse_error(payload)
            raise UpstreamError(code, message or "the node could not reach the engine")
        raise UpstreamError("relay_disconnected", f"host {self.host_id}'s tunnel closed")

    def cancel(self, stream: int) -> None:
        """Abort a stream: CANCEL goes out on its own task, because the caller may be a task
        being cancelled (anyio cancels every further await of a cancelled scope)."""
        if self._streams.pop(stream, None) is None or self.closed:
            return
        task = asyncio.get_running_loop().create_task(
            self._send_quietly(frame(Kind.CANCEL, stream))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_quietly(self, data: bytes) -> None:
        with contextlib.suppress(UpstreamError):
            await self._send(data)

    def forget(self, stream: int) -> None:
        self._streams.pop(stream, None)

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self._end()
        with contextlib.suppress(Exception):
            await self.channel.close(code, reason)


class RelayHub:
    """The live tunnel of each host (at most one: a new tunnel replaces the old one)."""

    def __init__(self) -> None:
        self._sessions: dict[str, RelaySession] = {}

    def connected(self, host_id: str, now: float) -> bool:
        session = self._sessions.get(host_id)
        return session is not None and not session.closed and session.expires_at > now

    def session(self, host_id: str, now: float) -> RelaySession | None:
        return self._sessions.get(host_id) if self.connected(host_id, now) else None

    async def attach(self, session: RelaySession) -> None:
        previous = self._sessions.get(session.host_id)
        self._sessions[session.host_id] = session
        if previous is not None and previous is not session:
            log.info("relay %s: a new tunnel replaces the old one", session.host_id)
            await previous.close(1012, "replaced by a newer tunnel")
        log.info("relay %s: tunnel open from %s", session.host_id, session.peer)

    def detach(self, session: RelaySession) -> None:
        if self._sessions.get(session.host_id) is session:
            del self._sessions[session.host_id]
            log.info("relay %s: tunnel closed", session.host_id)

    def describe(self, now: float) -> list[dict[str, Any]]:
        """The live tunnels, for status (no secret: host, peer address, age, counts)."""
        return [
            {
                "host_id": s.host_id,
                "connected": self.connected(s.host_id, now),
                "peer": s.peer,
                "connected_for_s": round(max(0.0, now - s.opened_at), 3),
                "requests": s.requests,
                "open_streams": s.open_streams,
            }
            for s in sorted(self._sessions.values(), key=lambda s: s.host_id)
        ]
