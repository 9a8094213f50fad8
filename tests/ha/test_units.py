"""Pure parts of the controller cluster: the store URL, the term rule, the document split, and
the node's failover client (against fake controller endpoints, tests/support)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.errors import GridError
from grid.fleet.wire import NodeUpdate
from grid.node.agent.link import FailoverClient
from grid.runtime.controller.etcd import next_term, parse_store_url, split_document
from grid.runtime.controller.etcd.store import CHUNK_BYTES, INLINE_BYTES
from tests.support.fake_controllers import FakeControllerEndpoint

pytestmark = pytest.mark.unit


def test_a_store_url_lists_members_and_an_optional_prefix() -> None:
    target = parse_store_url("etcd://10.0.0.1:2379,[::1]:2380,ctl-c:2379/site-a/")
    assert target.endpoints == ("10.0.0.1:2379", "[::1]:2380", "ctl-c:2379")
    assert target.prefix == "/site-a"
    assert target.base_urls()[0] == "http://10.0.0.1:2379"
    assert parse_store_url("etcd://h:1").prefix == "/grid"
    tls = parse_store_url("etcd://h:1", ca_file="/ca.pem")
    assert tls.base_urls() == ["https://h:1"]


@pytest.mark.parametrize(
    "url", ["etcd://h", "etcd://h:0x", "etcd://,h:1", "redis://h:1", "etcd://a:b@h:1"]
)
def test_a_malformed_store_url_is_refused(url: str) -> None:
    with pytest.raises(GridError) as refused:
        parse_store_url(url)
    assert refused.value.code == "invalid_store_url" and refused.value.fix


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(GridError) as refused:
        parse_store_url("etcd://h:1", cert_file="/c.pem")
    assert refused.value.code == "etcd_tls_incomplete"


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_takeover_term_is_above_every_term_and_the_floor(counter: int, floor: int) -> None:
    term = next_term(counter, floor)
    assert term > counter and term > floor
    assert term == max(counter, floor) + 1  # the smallest such term: nodes cap term jumps


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.dictionaries(
        st.sampled_from(["mode", "records", "demand", "timings", "profiles"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=300),
            lambda inner: (
                st.lists(inner, max_size=40)
                | st.dictionaries(st.text(max_size=8), inner, max_size=8)
            ),
            max_leaves=400,
        ),
    )
)
def test_a_split_document_joins_back_and_no_chunk_is_too_large(doc: dict[str, object]) -> None:
    inline, parts = split_document(doc)
    assert set(inline) | set(parts) == set(doc) and not set(inline) & set(parts)
    rebuilt = dict(inline)
    for name, chunks in parts.items():
        assert all(len(c) <= CHUNK_BYTES for c in chunks)
        rebuilt[name] = json.loads(b"".join(chunks))
    assert rebuilt == doc
    for value in inline.values():
        assert len(json.dumps(value, separators=(",", ":"))) <= INLINE_BYTES


def test_a_large_part_is_chunked() -> None:
    doc = {"records": ["x" * 1000] * 1000}
    _inline, parts = split_document(doc)
    assert len(parts["records"]) == -(
        -len(json.dumps(doc["records"], separators=(",", ":"))) // CHUNK_BYTES
    )


UPDATE = NodeUpdate(host_id="h1")


def test_the_node_follows_the_leader_a_standby_names_within_one_heartbeat() -> None:
    a = FakeControllerEndpoint("http://a", "down")
    b = FakeControllerEndpoint("http://b", "standby", leader_url="http://c")
    c = FakeControllerEndpoint("http://c")
    d = FakeControllerEndpoint("http://d")
    client = FailoverClient([a, b, d, c])
    client.put_node("h1.allocator", UPDATE)
    assert client.base_url == "http://c"
    assert (len(a.calls), len(b.calls), len(c.calls), len(d.calls)) == (1, 1, 1, 0)
    client.put_node("h1.allocator", UPDATE)  # the next heartbeat goes straight to the leader
    assert (len(a.calls), len(c.calls)) == (1, 2)


def test_a_leader_outside_the_list_is_never_dialled() -> None:
    a = FakeControllerEndpoint("http://a", "standby", leader_url="http://evil")
    b = FakeControllerEndpoint("http://b")
    client = FailoverClient([a, b])
    client.put_node("n", UPDATE)
    assert client.base_url == "http://b"


def test_with_no_leader_anywhere_the_heartbeat_fails_and_a_real_refusal_is_not_retried() -> None:
    a = FakeControllerEndpoint("http://a", "standby")
    b = FakeControllerEndpoint("http://b", "down")
    with pytest.raises(GridError) as failed:
        FailoverClient([a, b]).put_node("n", UPDATE)
    assert failed.value.code in {"no_leader", "controller_unreachable"}
    refusing = FakeControllerEndpoint("http://r", "refuse")
    other = FakeControllerEndpoint("http://o")
    with pytest.raises(GridError) as refused:
        FailoverClient([refusing, other]).put_node("n", UPDATE)
    assert refused.value.code == "invalid_node_credential" and not other.calls
