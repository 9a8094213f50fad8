"""Issue 15, defects 2 and 6: a node record belongs to the host of the credential that drives it,
and an oversized body is refused (413, the error shape) before authentication and parsing."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlparse

import httpx
import pytest

from grid.api.limits import ADMIN_BODY_LIMIT, OPENAI_BODY_LIMIT
from grid.fleet.errors import GridError
from tests.service.harness import ControllerProcess, mint, node_client
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


def _refusal(call: object) -> tuple[int, str]:
    with pytest.raises(GridError) as err:
        call()  # type: ignore[operator]
    return int(err.value.details["http_status"]), err.value.code


def _status_hosts(server: ControllerProcess) -> list[str]:
    with server.public() as public:
        return sorted(h["host_id"] for h in public.status().model_dump(mode="json")["hosts"])


def test_a_credential_cannot_squat_another_hosts_record(controller: ControllerProcess) -> None:
    """logical-02's credential claims `logical-01.allocator` before logical-01 registers (as
    after a controller restart): the real host still gets its record, the squatter is refused."""
    one = FakeNode("logical-01", node_id="logical-01.allocator")
    two = FakeNode("logical-02", node_id="logical-02.allocator")
    t1, t2 = mint(controller, "logical-01"), mint(controller, "logical-02")
    with (
        node_client(controller.url, t1) as c1,
        node_client(controller.url, t2) as c2,
    ):
        c2.put_node(two.node_id, two.registration())
        squat = _refusal(lambda: c2.put_node(one.node_id, two.registration()))
        assert squat == (403, "wrong_host")
        # The real host registers and heartbeats normally (no lock-out) ...
        assert c1.put_node(one.node_id, one.registration()).host_id == "logical-01"
        assert c1.put_node(one.node_id, one.heartbeat()).host_id == "logical-01"
        # ... and the other host still cannot drive it afterwards.
        assert _refusal(lambda: c2.put_node(one.node_id, two.heartbeat())) == (403, "wrong_host")
        assert c2.put_node(two.node_id, two.heartbeat()).host_id == "logical-02"
    assert _status_hosts(controller) == ["logical-01", "logical-02"]


def test_a_host_takes_its_own_record_back_from_a_squatter(controller: ControllerProcess) -> None:
    """Even a record another credential bound under a neutral-looking name is the real host's
    once the name is in that host's namespace (`<host_id>` or `<host_id>.<role>`)."""
    two = FakeNode("h2")
    t1, t2 = mint(controller, "h1"), mint(controller, "h2")
    with (
        node_client(controller.url, t1) as c1,
        node_client(controller.url, t2) as c2,
    ):
        c2.put_node("h2.allocator", two.registration())
        one = FakeNode("h1", node_id="h1")
        # h1 is not registered yet, so the bare name `h1` looks like any other name to the
        # controller and h2 may bind it ...
        assert c2.put_node("h1", two.heartbeat()).host_id == "h2"
        # ... but h1 takes it back, and from then on it is h1's record alone.
        assert c1.put_node(one.node_id, one.registration()).host_id == "h1"
        assert c1.put_node(one.node_id, one.heartbeat()).host_id == "h1"
        assert _refusal(lambda: c2.put_node("h1", two.heartbeat())) == (403, "wrong_host")
    with controller.public() as public:
        records = {
            h["host_id"]: h["node_records"]
            for h in public.status().model_dump(mode="json")["hosts"]
        }
    assert records == {"h1": 1, "h2": 1}


def _raw_request(url: str, head: str, chunks: int, chunk: bytes) -> str:
    """Send a request head and up to `chunks` body chunks; return what the server answered
    (the first bytes), or '' when it answered nothing within 5 s of the last chunk sent."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname, parsed.port), timeout=5) as sock:
        sock.sendall(head.encode("ascii"))
        try:
            for _ in range(chunks):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server cut the body: read what it answered
        sock.settimeout(5)
        answer = b""
        try:
            while piece := sock.recv(65536):
                answer += piece
        except (TimeoutError, ConnectionResetError):
            pass
        return answer.decode("latin-1")


def test_an_oversized_declared_body_is_refused_at_once_before_authentication(
    controller: ControllerProcess,
) -> None:
    assert ADMIN_BODY_LIMIT <= 8 * 1024 * 1024 < OPENAI_BODY_LIMIT
    for path, method in (
        ("/allocator/mode", "PUT"),
        ("/nodes/h1.allocator", "PUT"),
        ("/allocator/observations", "POST"),
    ):
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: 300000000\r\n\r\n"
        )
        started = time.monotonic()
        answer = _raw_request(controller.url, head, 0, b"")
        assert answer.startswith("HTTP/1.1 413"), (path, answer[:200])
        assert '"code":"request_too_large"' in answer.replace(" ", "")
        assert time.monotonic() - started < 5
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {OPENAI_BODY_LIMIT + 1}\r\n\r\n"
    )
    assert _raw_request(controller.url, head, 0, b"").startswith("HTTP/1.1 413")


def test_a_streamed_oversized_body_is_cut_without_reading_it_all(
    controller: ControllerProcess,
) -> None:
    """Chunked upload, no length: the controller answers 413 after the limit while the client
    is still sending; it never waits for (or buffers) the rest."""
    size = 1024 * 1024
    chunk = f"{size:x}\r\n".encode() + b" " * size + b"\r\n"
    head = (
        "PUT /allocator/mode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    answer = _raw_request(controller.url, head, ADMIN_BODY_LIMIT // size + 4, chunk)
    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    # The controller is unharmed and bodies under the limit still work.
    with controller.admin() as admin:
        admin.put_model("m", {"memory_mb": 1024})
    response = httpx.put(f"{controller.url}/allocator/mode", json={"mode": "x" * 1000})
    assert response.status_code == 401
