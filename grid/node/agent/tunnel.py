"""The node's end of the relay: one outbound WebSocket to the controller that carries every
engine request for this host (docs/addressing.md "Relay", wire in grid/wire/tunnel.py).

The node dials out (`wss://CONTROLLER/relay/{host_id}`), so it serves behind NAT, on changing
addresses and with every inbound port closed: nothing ever connects to it. The handshake
carries the node credential; the controller's certificate is verified with the node's CA file
(or the system store), and plain `ws://` is refused unless the controller is on loopback. Each
request stream is forwarded to the engine on this host's loopback with the engine key added
here, so the key never leaves the node; the answer goes back as it arrives; a CANCEL from the
controller (its client left) closes the engine connection, which aborts the engine's work.

`RelayTunnel` runs its own event loop on a daemon thread. It reconnects after any failure or
close with exponential backoff (`Backoff`: first 0.5 s, doubling, at most 30 s, with jitter),
reset once a tunnel has been open for a while. `snapshot()` is what status.json shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import random
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from grid.fleet import NODE_HEADER, GridError
from grid.node.agent.engine_hop import EngineHop, EngineHopError
from grid.wire import (
    CHUNK_BYTES,
    MAX_FRAME_BYTES,
    RELAY_PATH,
    Kind,
    RequestHead,
    ResponseHead,
    client_verify,
    engine_path_allowed,
    error_frame,
    frame,
    is_loopback,
    parse,
    split_request,
    whole_frame,
)

log = logging.getLogger("grid.node.tunnel")

# (model id, port) -> the engine's base URL on this host, or None when no such ready engine.
Resolver = Callable[[str, int], str | None]
ENGINE_CONNECT_S, ENGINE_WRITE_S, ENGINE_READ_S = 5.0, 60.0, 600.0
STABLE_AFTER_S = 10.0  # a tunnel open this long resets the backoff
RESOLVE_TTL_S = 1.0  # how long a ready engine's address is reused without asking again


@dataclass
class Backoff:
    """Delays between reconnection attempts: first_s, doubling up to max_s, each scaled by a
    random factor in [1 - jitter, 1] so a restarted controller is not hit by every node at once."""

    first_s: float = 0.5
    max_s: float = 30.0
    jitter: float = 0.2
    rng: random.Random | None = None
    attempt: int = 0

    def next_delay(self) -> float:
        base = min(self.max_s, self.first_s * (2.0 ** min(self.attempt, 32)))
        self.attempt += 1
        draw = (self.rng or random).random()
        return base * (1.0 - self.jitter * draw)

    def reset(self) -> None:
        self.attempt = 0


def relay_url(grid_url: str, host_id: str) -> str:
    """The tunnel's WebSocket URL for a controller URL; plain ws:// only to loopback."""
    parts = urlsplit(grid_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GridError(
            "invalid_controller_url",
            f"{grid_url!r} is not an http(s) URL",
            fix="set grid_url in node.json to the controller's https:// URL",
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise GridError(
            "insecure_transport",
            f"the relay tunnel would carry prompts and answers over plain HTTP to {grid_url}",
            fix="use the controller's https:// URL (grid up --tls-cert ... --tls-key ...)",
            next_command="grid allocator node start --grid https://CONTROLLER:22101 --ca-file CA",
        )
    scheme = "wss" if parts.scheme == "https" else "ws"
    base = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    return f"{base}{RELAY_PATH}/{quote(host_id, safe='')}"


def _refusal_code(exc: BaseException) -> str:
    """The controller's refusal code from a failed handshake (its JSON error body)."""
    response = getattr(exc, "response", None)
    body = getattr(response, "body", None)
    status = getattr(response, "status_code", None)
    try:
        code = json.loads(body or b"{}").get("error", {}).get("code")
    except (ValueError, AttributeError):
        code = None
    if isinstance(code, str) and code:
        return f"{code} (HTTP {status})"
    return f"HTTP {status}" if status else type(exc).__name__


class RelayTunnel:
    def __init__(
        self,
        *,
        grid_url: str,
        host_id: str,
        token: str,
        resolve: Resolver,
        engine_key: Callable[[], str],
        ca_file: str | None = None,
        backoff: Backoff | None = None,
        ping_interval_s: float = 5.0,
        ping_timeout_s: float = 10.0,
    ) -> None:
        self.url = relay_url(grid_url, host_id)
        self.host_id = host_id
        self._token = token
        self._resolve = resolve
        self._engine_key = engine_key
        verify = client_verify(ca_file) if self.url.startswith("wss:") else None
        self._ssl: ssl.SSLContext | None = None
        if verify is True:
            self._ssl = ssl.create_default_context()
        elif isinstance(verify, ssl.SSLContext):
            self._ssl = verify
        self.backoff = backoff or Backoff()
        self._ping_interval_s = ping_interval_s
        self._ping_timeout_s = ping_timeout_s
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        # What status shows (written on the tunnel's thread, read anywhere).
        self.connected = False
        self.connected_since: float | None = None
        self.last_error = ""
        self.connects = 0
        self.requests = 0
        self._resolved: dict[tuple[str, int], tuple[float, str]] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        started = threading.Event()

        def main() -> None:
            asyncio.run(self._main(started))

        self._thread = threading.Thread(target=main, name="grid-relay-tunnel", daemon=True)
        self._thread.start()
        started.wait(5.0)

    def stop(self, timeout_s: float = 5.0) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)

    def snapshot(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "connected": self.connected,
            "connected_since": self.connected_since,
            "connects": self.connects,
            "requests": self.requests,
            "last_error": self.last_error,
        }

    # ------------------------------------------------------------------ the loop

    async def _main(self, started: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        started.set()
        http = EngineHop(
            connect_timeout_s=ENGINE_CONNECT_S, write_timeout_s=ENGINE_WRITE_S,
            read_timeout_s=ENGINE_READ_S,
        )  # fmt: skip
        try:
            while not self._stop.is_set():
                opened = time.monotonic()
                try:
                    await self._session(http)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # refused, unreachable, dropped: try again later
                    self.last_error = _refusal_code(exc) if _is_refusal(exc) else (
                        f"{type(exc).__name__}: {exc}"[:300]
                    )  # fmt: skip
                    log.warning("relay tunnel to %s: %s", self.url, self.last_error)
                finally:
                    self.connected = False
                if time.monotonic() - opened >= STABLE_AFTER_S:
                    self.backoff.reset()
                delay = self.backoff.next_delay()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
        finally:
            await http.aclose()

    async def _session(self, http: EngineHop) -> None:
        from websockets.asyncio.client import connect

        assert self._stop is not None
        async with connect(
            self.url,
            additional_headers={NODE_HEADER: self._token},
            ssl=self._ssl,
            open_timeout=10.0,
            ping_interval=self._ping_interval_s,
            ping_timeout=self._ping_timeout_s,
            max_size=MAX_FRAME_BYTES,
            compression=None,
            proxy=None,
        ) as ws:
            self.connected, self.connected_since = True, time.time()
            self.connects += 1
            self.last_error = ""
            log.info("relay tunnel open to %s", self.url)
            lock = asyncio.Lock()
            tasks: dict[int, asyncio.Task[None]] = {}

            async def send(data: bytes) -> None:
                async with lock:
                    await ws.send(data)

            stopping = asyncio.ensure_future(self._stop.wait())
            closer: list[asyncio.Task[None]] = []
            stopping.add_done_callback(lambda _f: closer.append(asyncio.ensure_future(ws.close())))
            try:
                async for message in ws:  # ends when the tunnel closes (or stop closes it)
                    if isinstance(message, str):
                        raise GridError(
                            "relay_protocol_error",
                            "the controller sent a text frame on the relay tunnel",
                            fix="run the same Grid version on the node and the controller",
                        )
                    kind, stream, payload = parse(message)
                    if kind == Kind.REQUEST:
                        head, body = split_request(payload)
                        self.requests += 1
                        task = asyncio.ensure_future(self._serve(http, send, stream, head, body))
                        tasks[stream] = task
                        task.add_done_callback(functools.partial(_forget, tasks, stream))
                    elif kind == Kind.CANCEL:
                        running = tasks.pop(stream, None)
                        if running is not None:
                            running.cancel()  # closes the engine connection: the engine stops
            finally:
                stopping.cancel()
                for task in list(tasks.values()):
                    task.cancel()

    async def _engine(self, model_id: str, port: int) -> str | None:
        """The engine's base URL: the supervisor's answer (on a worker thread: it takes the
        supervisor's lock), remembered for RESOLVE_TTL_S so a busy tunnel asks once a second."""
        now = time.monotonic()
        cached = self._resolved.get((model_id, port))
        if cached is not None and now - cached[0] < RESOLVE_TTL_S:
            return cached[1]
        base = await asyncio.to_thread(self._resolve, model_id, port)
        if base is not None:
            if len(self._resolved) > 256:
                self._resolved.clear()
            self._resolved[(model_id, port)] = (now, base)
        return base

    async def _serve(
        self,
        http: EngineHop,
        send: Callable[[bytes], Any],
        stream: int,
        head: RequestHead,
        body: bytes,
    ) -> None:
        if not engine_path_allowed(head.method, head.path):
            await send(error_frame(stream, "engine_path_refused", "not an engine API path"))
            return
        base = await self._engine(head.model_id, head.port)
        if base is None:
            await send(
                error_frame(
                    stream,
                    "engine_not_found",
                    f"host {self.host_id} has no ready engine for {head.model_id!r} on port "
                    f"{head.port}",
                )
            )
            return
        headers = {k: v for k, v in head.headers.items() if k.lower() in ("content-type", "accept")}
        headers["Authorization"] = f"Bearer {self._engine_key()}"  # added here, on the node
        try:
            async with http.request(head.method, base + head.path, headers, body) as r:
                kind = r.headers.get("content-type") or "application/json"
                answer = ResponseHead(r.status_code, kind)
                length = r.headers.get("content-length", "")
                if length.isdigit() and int(length) <= CHUNK_BYTES:  # small, known: one frame
                    await send(whole_frame(stream, answer, await r.read()))
                    return
                await send(frame(Kind.RESPONSE, stream, answer.to_json()))
                async for chunk in r.chunks():  # as it arrives (a size would buffer)
                    for at in range(0, len(chunk), CHUNK_BYTES):
                        await send(frame(Kind.DATA, stream, chunk[at : at + CHUNK_BYTES]))
            await send(frame(Kind.END, stream))
        except EngineHopError as exc:
            if exc.timed_out:
                await _quietly(send, error_frame(stream, exc.code, "the engine timed out"))
            else:
                why = f"the engine on port {head.port} failed ({exc.message})"
                await _quietly(send, error_frame(stream, exc.code, why))


async def _quietly(send: Callable[[bytes], Any], data: bytes) -> None:
    with contextlib.suppress(Exception):  # the tunnel itself may be gone
        await send(data)


def _forget(tasks: dict[int, asyncio.Task[None]], stream: int, _done: object) -> None:
    tasks.pop(stream, None)


def _is_refusal(exc: BaseException) -> bool:
    return getattr(exc, "response", None) is not None
