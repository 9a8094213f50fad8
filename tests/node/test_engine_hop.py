"""The tunnel's last hop (grid/node/agent/engine_hop.py) against real HTTP servers on loopback:
a fake engine (an outside thing for the hop) and raw sockets where a test needs a server that
misbehaves on purpose.

Oracles are what the servers saw: how many requests, on which client connections, whether a
reader went away."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from grid.node.agent.engine_hop import EngineHop, EngineHopError
from tests.router.fake_engine import FakeEngine

KEY = "engine-key-hop-0123456789abcdef0123456789abcd"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    fake = FakeEngine(KEY, "hop").start()
    try:
        yield fake
    finally:
        fake.stop()


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}/v1/chat/completions"


async def _ask(hop: EngineHop, port: int, key: str = KEY) -> tuple[int, dict[str, str], bytes]:
    headers = {**HEADERS, "Authorization": f"Bearer {key}"}
    async with hop.request("POST", _url(port), headers, BODY) as answer:
        return answer.status_code, dict(answer.headers), await answer.read()


def test_answers_pass_unchanged_and_one_connection_serves_consecutive_requests(
    engine: FakeEngine,
) -> None:
    async def main() -> list[tuple[int, dict[str, str], bytes]]:
        hop = EngineHop()
        try:
            return [await _ask(hop, engine.port) for _ in range(3)]
        finally:
            await hop.aclose()

    answers = asyncio.run(main())
    assert [a[0] for a in answers] == [200, 200, 200]
    assert json.loads(answers[0][2])["served_by"] == "hop"
    assert answers[0][1]["content-type"] == "application/json"
    assert [r["body"] for r in engine.requests] == [BODY] * 3
    assert engine.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert engine.requests[0]["headers"]["Host"] == f"127.0.0.1:{engine.port}"
    assert len({r["peer"] for r in engine.requests}) == 1  # kept alive, not redialled


def test_an_idle_connection_past_its_expiry_is_not_reused(engine: FakeEngine) -> None:
    async def main() -> None:
        hop = EngineHop(idle_expiry_s=0.05)
        await _ask(hop, engine.port)
        await asyncio.sleep(0.2)
        await _ask(hop, engine.port)
        await hop.aclose()

    asyncio.run(main())
    assert len({r["peer"] for r in engine.requests}) == 2


def test_concurrent_requests_each_get_their_own_connection(engine: FakeEngine) -> None:
    engine.delay_s = 0.2

    async def main() -> list[int]:
        hop = EngineHop()
        answers = await asyncio.gather(*(_ask(hop, engine.port) for _ in range(4)))
        await hop.aclose()
        return [a[0] for a in answers]

    started = time.monotonic()
    assert asyncio.run(main()) == [200] * 4
    assert time.monotonic() - started < 0.75  # side by side, not one after another
    assert len({r["peer"] for r in engine.requests}) == 4


def test_a_chunked_stream_arrives_piece_by_piece(engine: FakeEngine) -> None:
    engine.mode = "sse"

    async def main() -> tuple[str, list[bytes]]:
        hop = EngineHop()
        headers = {**HEADERS, "Authorization": f"Bearer {KEY}"}
        async with hop.request("POST", _url(engine.port), headers, BODY) as answer:
            pieces = [chunk async for chunk in answer.chunks()]
        await hop.aclose()
        return answer.headers["content-type"], pieces

    kind, pieces = asyncio.run(main())
    assert kind == "text/event-stream"
    text = b"".join(pieces).decode()
    assert text.count("data: ") == 4 and text.endswith("data: [DONE]\n\n")
    assert "transfer-encoding" not in text.lower() and "\r\n" not in text  # de-chunked


def test_an_error_status_is_an_answer_not_a_failure(engine: FakeEngine) -> None:
    async def main() -> tuple[int, dict[str, str], bytes]:
        hop = EngineHop()
        try:
            return await _ask(hop, engine.port, key="wrong-key")
        finally:
            await hop.aclose()

    status, _, body = asyncio.run(main())
    assert status == 401 and b"Invalid API Key" in body


def test_leaving_mid_stream_closes_the_connection_and_the_engine_stops(
    engine: FakeEngine,
) -> None:
    engine.mode, engine.delay_s = "slow_sse", 0.02

    async def main() -> int:
        hop = EngineHop()
        got: list[bytes] = []

        async def read() -> None:
            headers = {**HEADERS, "Authorization": f"Bearer {KEY}"}
            async with hop.request("POST", _url(engine.port), headers, BODY) as answer:
                async for chunk in answer.chunks():
                    got.append(chunk)

        task = asyncio.ensure_future(read())
        while len(got) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        idle = sum(len(v) for v in hop._idle.values())
        await hop.aclose()
        return idle

    assert asyncio.run(main()) == 0  # a half-read connection is never pooled
    assert engine.aborted.wait(5.0)


def test_an_engine_slower_than_the_read_timeout_fails_upstream_timeout(
    engine: FakeEngine,
) -> None:
    engine.mode, engine.delay_s = "slow_json", 3.0

    async def main() -> EngineHopError:
        hop = EngineHop(read_timeout_s=0.3)
        try:
            await _ask(hop, engine.port)
        except EngineHopError as exc:
            return exc
        finally:
            await hop.aclose()
        raise AssertionError("no timeout")

    failure = asyncio.run(main())
    assert failure.code == "upstream_timeout" and failure.timed_out
    assert engine.aborted.wait(5.0)  # the hop closed the connection: the engine stopped


def test_a_dropped_or_refused_connection_fails_engine_unreachable(engine: FakeEngine) -> None:
    engine.mode = "drop"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    async def main(port: int) -> EngineHopError:
        hop = EngineHop(connect_timeout_s=2.0)
        try:
            await _ask(hop, port)
        except EngineHopError as exc:
            return exc
        finally:
            await hop.aclose()
        raise AssertionError("no failure")

    for port in (engine.port, closed_port):
        failure = asyncio.run(main(port))
        assert failure.code == "engine_unreachable" and not failure.timed_out
    assert len(engine.requests) == 1  # a dropped answer is not sent again


def test_only_plain_loopback_style_urls_are_dialled() -> None:
    async def main(url: str) -> str:
        hop = EngineHop()
        try:
            async with hop.request("POST", url, HEADERS, BODY):
                pass
        except EngineHopError as exc:
            return exc.code
        return "dialled"

    for url in ("https://127.0.0.1:1/v1/x", "ftp://127.0.0.1:1/v1/x", "http://127.0.0.1/v1/x"):
        assert asyncio.run(main(url)) == "engine_unreachable"


class ClosingServer:
    """A keep-alive server that answers one request per connection and closes the connection
    when the next request arrives, unread (as an engine whose keep-alive timeout passed just as
    the request came), counting the requests it answered and the ones it dropped."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        self.dropped = 0
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.requests += 1
                body = b'{"ok": true}'
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                if conn.recv(1, socket.MSG_PEEK):  # the next request: closed unread
                    self.dropped += 1

    def close(self) -> None:
        self.sock.close()


def test_a_reused_connection_the_engine_closed_is_replaced_and_the_request_sent_once() -> None:
    server = ClosingServer()

    async def main() -> list[int]:
        hop = EngineHop(idle_expiry_s=30.0)
        first = await _ask(hop, server.port)
        second = await _ask(hop, server.port)  # on the kept connection, which the server drops
        await hop.aclose()
        return [first[0], second[0]]

    try:
        assert asyncio.run(main()) == [200, 200]
        assert server.requests == 2 and server.connections == 2 and server.dropped == 1
    finally:
        server.close()
