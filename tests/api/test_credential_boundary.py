"""Property: a credential is refused for a plain-HTTP URL exactly when its host is not on this
machine's loopback (127.0.0.0/8, ::1, localhost), whatever the address; https always passes.
The oracle is the network membership, written independently of `is_loopback`."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.errors import GridError
from grid.wire import AllocatorClient

pytestmark = pytest.mark.property

LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")


def _refused(url: str, **token: str) -> bool:
    try:
        AllocatorClient(url, **token).close()
    except GridError as err:
        assert err.code == "insecure_transport"
        return True
    return False


@settings(max_examples=60, deadline=None)
@given(
    packed=st.integers(min_value=0, max_value=2**32 - 1),
    kind=st.sampled_from(["operator_token", "node_token"]),
)
def test_ipv4_plain_http_refused_off_loopback(packed: int, kind: str) -> None:
    address = ipaddress.IPv4Address(packed)
    url = f"http://{address}:22101"
    assert _refused(url, **{kind: "secret"}) == (address not in LOOPBACK_V4)
    assert not _refused(f"https://{address}:22101", **{kind: "secret"})
    assert not _refused(url)  # no credential: nothing to protect


@pytest.mark.parametrize(
    ("host", "refused"),
    [("localhost", False), ("LOCALHOST", False), ("[::1]", False), ("[::2]", True),
     ("grid.example.internal", True), ("127.0.0.1.example.com", True)],
)  # fmt: skip
def test_names_and_ipv6(host: str, refused: bool) -> None:
    assert _refused(f"http://{host}:22101", node_token="secret") is refused
