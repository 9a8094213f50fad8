"""The node's last hop of a relayed request: HTTP/1.1 to an engine on this host's loopback.

The tunnel (`grid/node/agent/tunnel.py`) forwards every stream to an engine the supervisor has
ready on this host, always plain HTTP to a loopback address (the engine never listens anywhere
else, and the request never leaves the host). That hop is written on asyncio streams with h11,
the HTTP/1.1 state machine httpx itself runs on, without the client layers in between: it is
on every relayed request's path, and on a shared host the CPU a request costs is latency.

- `EngineHop.request(method, url, headers, body)` opens (or reuses) a connection, sends the
  request and yields an `EngineAnswer` once the status line and headers arrived; its `chunks()`
  yields the body as the engine sends it (de-chunked, never decoded) and `read()` the whole.
- A connection is kept for the next request only when both sides finished the exchange cleanly
  (h11's DONE/DONE, no `Connection: close`); it is reused only while idle less than
  `idle_expiry_s` and not closed by the engine. A request whose reused connection turns out
  closed before any answer byte arrived is sent once more on a fresh one (the engine never read
  it). Any other failure, and leaving the `request` block early (a CANCEL: the task is
  cancelled), closes the connection, which aborts the engine's work.
- Failures raise `EngineHopError` with the stable code the tunnel sends back
  (`engine_unreachable`, or `upstream_timeout` with `timed_out`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from urllib.parse import urlsplit

import h11

READ_BYTES = 64 * 1024


class EngineHopError(Exception):
    def __init__(self, code: str, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.timed_out = timed_out


@contextlib.contextmanager
def _failures() -> Iterator[None]:
    """A socket, protocol or timeout failure on the hop, as an `EngineHopError`."""
    try:
        yield
    except TimeoutError:
        raise EngineHopError("upstream_timeout", "the engine timed out", timed_out=True) from None
    except (OSError, h11.ProtocolError) as exc:
        raise EngineHopError(
            "engine_unreachable", f"the engine failed ({type(exc).__name__})"
        ) from None


class _Stale(Exception):
    """A reused connection the engine had closed before it read anything."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.http = h11.Connection(h11.CLIENT)
        self.idle_since = time.monotonic()
        self.received = 0  # answer bytes of the current exchange

    def usable(self, now: float, expiry_s: float) -> bool:
        return (
            now - self.idle_since < expiry_s
            and not self.writer.is_closing()
            and not self.reader.at_eof()
            and self.http.our_state is h11.IDLE
        )

    async def send(self, request: h11.Request, body: bytes, timeout_s: float) -> None:
        data = self.http.send(request) or b""
        data += (self.http.send(h11.Data(data=body)) or b"") if body else b""
        data += self.http.send(h11.EndOfMessage()) or b""
        self.received = 0
        async with asyncio.timeout(timeout_s):
            self.writer.write(data)
            await self.writer.drain()

    async def next_event(self, timeout_s: float) -> object:
        while True:
            event = self.http.next_event()
            if event is not h11.NEED_DATA:
                return event
            async with asyncio.timeout(timeout_s):
                data = await self.reader.read(READ_BYTES)
            self.received += len(data)
            self.http.receive_data(data)  # b"": the engine closed its end

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class EngineAnswer:
    """The engine's status, headers (lower-case names) and body, as it arrives."""

    def __init__(self, connection: _Connection, response: h11.Response, read_timeout_s: float):
        self._connection = connection
        self._read_timeout_s = read_timeout_s
        self.status_code = response.status_code
        self.headers: Mapping[str, str] = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in response.headers
        }
        self.complete = False

    async def chunks(self) -> AsyncIterator[bytes]:
        while not self.complete:
            with _failures():
                event = await self._connection.next_event(self._read_timeout_s)
            if isinstance(event, h11.Data):
                if event.data:
                    yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.complete = True
            else:
                raise EngineHopError("engine_unreachable", "the engine closed mid-answer")

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


class EngineHop:
    def __init__(
        self,
        *,
        connect_timeout_s: float = 5.0,
        write_timeout_s: float = 60.0,
        read_timeout_s: float = 600.0,
        idle_expiry_s: float = 2.0,
        max_idle: int = 32,
    ) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.write_timeout_s = write_timeout_s
        self.read_timeout_s = read_timeout_s
        self.idle_expiry_s = idle_expiry_s
        self.max_idle = max_idle
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    @contextlib.asynccontextmanager
    async def request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> AsyncIterator[EngineAnswer]:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            raise EngineHopError("engine_unreachable", f"{url!r} is not a loopback engine URL")
        where = (parts.hostname, parts.port)
        authority = f"[{where[0]}]:{where[1]}" if ":" in where[0] else f"{where[0]}:{where[1]}"
        fields = [("Host", authority), *headers.items()]
        if body or method == "POST":
            fields.append(("Content-Length", str(len(body))))
        request = h11.Request(method=method, target=parts.path or "/", headers=fields)
        connection = self._take(where)
        try:
            with _failures():
                if connection is None:
                    connection = await self._open(where)
                    answer = await self._exchange(connection, request, body)
                else:
                    try:
                        answer = await self._exchange(connection, request, body, reused=True)
                    except _Stale:
                        connection.close()
                        connection = await self._open(where)
                        answer = await self._exchange(connection, request, body)
            yield answer
        except BaseException:  # failed, or left early (cancelled): the engine stops too
            if connection is not None:
                connection.close()
            raise
        self._keep(where, connection, answer)

    async def _open(self, where: tuple[str, int]) -> _Connection:
        async with asyncio.timeout(self.connect_timeout_s):
            reader, writer = await asyncio.open_connection(where[0], where[1])
        return _Connection(reader, writer)

    async def _exchange(
        self, connection: _Connection, request: h11.Request, body: bytes, *, reused: bool = False
    ) -> EngineAnswer:
        try:
            await connection.send(request, body, self.write_timeout_s)
            while True:
                event = await connection.next_event(self.read_timeout_s)
                if isinstance(event, h11.Response):
                    return EngineAnswer(connection, event, self.read_timeout_s)
                if not isinstance(event, h11.InformationalResponse):
                    raise h11.RemoteProtocolError("the engine closed without answering")
        except (OSError, h11.ProtocolError):
            if reused and connection.received == 0:
                raise _Stale() from None
            raise

    def _take(self, where: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(where)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.usable(now, self.idle_expiry_s):
                return connection
            connection.close()
        return None

    def _keep(self, where: tuple[str, int], connection: _Connection, answer: EngineAnswer) -> None:
        http = connection.http
        idle = self._idle.setdefault(where, [])
        if (
            answer.complete
            and http.our_state is h11.DONE
            and http.their_state is h11.DONE
            and len(idle) < self.max_idle
        ):
            http.start_next_cycle()
            connection.idle_since = time.monotonic()
            idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
