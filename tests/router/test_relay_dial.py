"""The proxy's dial (grid/api/relay_dial.py) against real sockets: an https engine verified
with its CA answers; with another CA the hop fails `engine_tls_failed` before a byte of the
request is sent and is never retried over plain HTTP; plain HTTP to a non-loopback address is
refused without a connection; a relay route without a tunnel fails `relay_disconnected`."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from grid.api.relay import RelayHub, UpstreamError
from grid.api.relay_dial import Dialer
from grid.api.tls import generate_ca_and_server
from tests.router.builders import route
from tests.router.fake_engine import FakeEngine

pytestmark = pytest.mark.service

KEY = "engine-key-tls-0123456789abcdef0123456789ab"
BODY = b'{"model": "m", "messages": [{"role": "user", "content": "secret prompt"}]}'


@pytest.fixture
def tls_engine(tmp_path: Path) -> Iterator[tuple[FakeEngine, Path, Path]]:
    good = generate_ca_and_server(tmp_path / "good", ["127.0.0.1"])
    other = generate_ca_and_server(tmp_path / "other", ["127.0.0.1"], common_name="Other CA")
    engine = FakeEngine(KEY, "tls", tls=(good.cert_file, good.key_file)).start()
    try:
        yield engine, good.ca_file, other.ca_file
    finally:
        engine.stop()


def _send(dialer: Dialer, **fields: object) -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        try:
            reply = await dialer.send(route("ext", **fields), KEY, "/v1/chat/completions",  # type: ignore[arg-type]
                                      BODY, "application/json", 0.0)  # fmt: skip
            chunks = [c async for c in reply.aiter_raw()]
            await reply.aclose()
            return reply.status_code, b"".join(chunks)
        finally:
            await dialer.aclose()

    return asyncio.run(go())


def test_https_engine_with_its_ca_answers(tls_engine: tuple[FakeEngine, Path, Path]) -> None:
    engine, good, _other = tls_engine
    status, body = _send(Dialer(RelayHub()), port=engine.port, transport="https", ca_file=str(good))
    assert status == 200 and b'"tls"' in body
    assert engine.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"


def test_a_wrong_ca_fails_engine_tls_failed_and_never_falls_back(
    tls_engine: tuple[FakeEngine, Path, Path],
) -> None:
    engine, _good, other = tls_engine
    with pytest.raises(UpstreamError) as failed:
        _send(Dialer(RelayHub()), port=engine.port, transport="https", ca_file=str(other))
    assert failed.value.code == "engine_tls_failed"
    assert "never falls back" in failed.value.message
    assert engine.requests == []  # nothing reached the engine, in clear or otherwise


class Listener:
    """Records every connection attempt (a plain-HTTP fallback would show up here)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_server((host, 0))
        self.accepted = 0
        threading.Thread(target=self._run, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def test_plain_http_off_loopback_and_a_missing_tunnel_are_refused_without_a_dial() -> None:
    with pytest.raises(UpstreamError) as insecure:
        _send(Dialer(RelayHub()), port=39100, address="192.0.2.10")  # TEST-NET: never dialled
    assert insecure.value.code == "insecure_engine_transport"
    listener = Listener()
    with pytest.raises(UpstreamError) as down:
        _send(Dialer(RelayHub()), port=listener.port, transport="relay", relay_connected=True)
    assert down.value.code == "relay_disconnected"
    assert listener.accepted == 0  # a relay route is never dialled straight
