"""How a route is reached (grid/router/routes.py `transport_refusal`), the relay's frames
(grid/wire/tunnel.py) and the tunnel's reconnection backoff: table-driven, with hand-worked
expectations."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grid.fleet.errors import GridError
from grid.node.agent.tunnel import Backoff, relay_url
from grid.router import choose_route, route_refusal, transport_refusal
from grid.wire import (
    FrameError,
    Kind,
    RequestHead,
    ResponseHead,
    engine_path_allowed,
    error_frame,
    frame,
    parse,
    parse_error,
    request_frame,
    split_request,
    split_whole,
    whole_frame,
)
from tests.router.builders import NOW, TTL, route

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("transport", "address", "connected", "expected"),
    [
        ("relay", "10.0.0.5", True, None),  # the address is never dialled over the relay
        ("relay", "127.0.0.1", False, "relay_disconnected"),  # no fallback to a direct dial
        ("http", "127.0.0.1", False, None),
        ("http", "127.0.0.7", False, None),  # any 127.x is loopback
        ("http", "::1", False, None),
        ("http", "localhost", False, None),
        ("http", "10.0.0.5", False, "insecure_engine_transport"),
        ("http", "192.168.1.20", True, "insecure_engine_transport"),
        ("http", "gpu-01.lan", False, "insecure_engine_transport"),
        ("https", "gpu-01.lan", False, None),
        ("carrier-pigeon", "127.0.0.1", True, "insecure_engine_transport"),
    ],
)
def test_transport_table(
    transport: str, address: str, connected: bool, expected: str | None
) -> None:
    candidate = route("h", transport=transport, address=address, relay_connected=connected)
    assert transport_refusal(candidate) == expected
    assert route_refusal(candidate, NOW, lease_ttl_s=TTL) == expected


def test_base_url_scheme_follows_the_transport() -> None:
    assert route("h", 8443, transport="https", address="gpu-01.lan").base_url == (
        "https://gpu-01.lan:8443"
    )
    assert route("h", 39100, address="::1").base_url == "http://[::1]:39100"


def test_a_dropped_tunnel_closes_its_routes_and_says_so() -> None:
    down = route("a", transport="relay", relay_connected=False)
    refusal = choose_route([down], "m", NOW, lease_ttl_s=TTL)
    assert refusal.code == "relay_disconnected"  # type: ignore[union-attr]
    up = route("b", transport="relay", relay_connected=True)
    chosen = choose_route([down, up], "m", NOW, lease_ttl_s=TTL)
    assert chosen.route.host_id == "b"  # type: ignore[union-attr]
    insecure = route("c", address="10.1.2.3")
    refusal = choose_route([insecure], "m", NOW, lease_ttl_s=TTL)
    assert refusal.code == "insecure_engine_transport"  # type: ignore[union-attr]
    mixed = choose_route([down, insecure], "m", NOW, lease_ttl_s=TTL)
    assert mixed.code == "not_admitted"  # type: ignore[union-attr]


def test_frames_round_trip() -> None:
    head = RequestHead("POST", "/v1/embeddings", "embed", 39101, {"content-type": "a/b"})
    kind, stream, payload = parse(request_frame(7, head, b'{"input": "x"}'))
    assert (kind, stream) == (Kind.REQUEST, 7)
    assert split_request(payload) == (head, b'{"input": "x"}')
    kind, stream, payload = parse(frame(Kind.RESPONSE, 0xFFFFFFFF, ResponseHead(201).to_json()))
    assert (kind, stream, ResponseHead.from_json(payload)) == (
        Kind.RESPONSE,
        0xFFFFFFFF,
        ResponseHead(201, "application/json"),
    )
    assert parse_error(parse(error_frame(3, "engine_not_found", "gone"))[2]) == (
        "engine_not_found",
        "gone",
    )
    assert parse(frame(Kind.DATA, 1, b"\x00\xff"))[2] == b"\x00\xff"
    kind, stream, payload = parse(whole_frame(9, ResponseHead(200, "text/plain"), b"all of it"))
    assert (kind, stream, split_whole(payload)) == (
        Kind.WHOLE,
        9,
        (ResponseHead(200, "text/plain"), b"all of it"),
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"\x01\x00", b"\x09\x00\x00\x00\x01", b"\x01\x00\x00\x00\x00payload"],
)
def test_malformed_frames_are_refused(data: bytes) -> None:
    with pytest.raises(FrameError):
        parse(data)


def test_malformed_request_heads_are_refused() -> None:
    for payload in (b"", b"\x00\x00\x00\x09{}", b"\x00\x00\x00\x02[]", b"\x00\x00\x00\x02{}"):
        with pytest.raises(FrameError):
            split_request(payload)


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("POST", "/v1/chat/completions", True),
        ("POST", "/v1/embeddings", True),
        ("GET", "/v1/models", True),
        ("POST", "/slots", False),  # not the engine's API: its admin surface
        ("POST", "/v1/../slots", False),
        ("POST", "/v1//x", False),
        ("POST", "/v1/x?y=1", False),
        ("DELETE", "/v1/models", False),
        ("POST", "/v1/\u00e9", False),
        ("POST", "/health", False),
    ],
)
def test_only_engine_api_paths_cross_the_tunnel(method: str, path: str, allowed: bool) -> None:
    assert engine_path_allowed(method, path) is allowed


def test_backoff_doubles_to_its_cap_with_bounded_jitter() -> None:
    plain = Backoff(first_s=0.5, max_s=30.0, jitter=0.0)
    assert [plain.next_delay() for _ in range(9)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    plain.reset()
    assert plain.next_delay() == 0.5
    jittered = Backoff(first_s=1.0, max_s=8.0, jitter=0.2, rng=random.Random(7))
    bases = [1, 2, 4, 8, 8]
    for base in bases:
        assert 0.8 * base <= jittered.next_delay() <= base


@given(st.integers(min_value=0, max_value=200), st.floats(min_value=0.0, max_value=1.0))
def test_backoff_never_exceeds_its_cap(attempt: int, jitter: float) -> None:
    backoff = Backoff(first_s=0.25, max_s=12.0, jitter=jitter, attempt=attempt)
    delay = backoff.next_delay()
    assert 0.0 <= delay <= 12.0


def test_relay_url_never_plain_to_a_remote_controller() -> None:
    assert relay_url("https://ctl.lan:22101", "gpu 1") == "wss://ctl.lan:22101/relay/gpu%201"
    assert relay_url("http://127.0.0.1:22100/", "h") == "ws://127.0.0.1:22100/relay/h"
    with pytest.raises(GridError) as refused:
        relay_url("http://10.0.0.1:22101", "h")
    assert refused.value.code == "insecure_transport"
