"""The state document in etcd: chunked under the request limit, fenced, quarantined when it does
not decode (grid/runtime/controller/etcd/store.py), on a real etcd cluster."""

from __future__ import annotations

import json
import time

import pytest

from grid.fleet.errors import GridError
from grid.runtime.controller import Controller, ControllerConfig
from grid.runtime.controller.etcd import EtcdClient, EtcdLease, EtcdStore, parse_store_url
from tests.ha.cluster import EtcdCluster

pytestmark = pytest.mark.service
ETCD_REQUEST_LIMIT = 1536 * 1024  # etcd's default --max-request-bytes


def leader(client: EtcdClient, prefix: str) -> tuple[EtcdLease, EtcdStore]:
    held = EtcdLease(client, prefix, controller_id="a", url="http://a", ttl_s=10)
    with held.campaigning():
        assert held.acquire(time.time()).granted
    store = EtcdStore(
        client, prefix, fence=held.fence, term_key=held.term_key, leader_key=held.leader_key
    )
    return held, store


def big_document(n: int) -> dict[str, object]:
    return {
        "schema_version": 1,
        "mode": "automatic",
        "records": [{"action_id": f"a{i:06d}", "note": "x" * 200} for i in range(n)],
        "timings": [{"host": f"h{i}", "ms": i} for i in range(n // 10)],
    }


def stored_values(client: EtcdClient, prefix: str) -> list[int]:
    """The size of every value stored under the prefix."""
    return [len(kv.value) for kv in client.get_prefix(prefix + "/")]


def test_a_document_far_over_the_request_limit_round_trips_in_chunks(
    client: EtcdClient, store_url: str
) -> None:
    prefix = parse_store_url(store_url).prefix
    _held, store = leader(client, prefix)
    document = big_document(20_000)
    assert len(json.dumps(document)) > 3 * ETCD_REQUEST_LIMIT
    store.save(document)
    assert max(stored_values(client, prefix)) < ETCD_REQUEST_LIMIT // 4
    reader = EtcdStore(client, prefix, fence=lambda: None, term_key="", leader_key="")
    assert reader.load().document == document


def test_an_unchanged_part_is_not_written_again(client: EtcdClient, store_url: str) -> None:
    prefix = parse_store_url(store_url).prefix
    _held, store = leader(client, prefix)
    document = big_document(5_000)
    store.save(document)
    before = {kv.key: kv.mod_revision for kv in client.get_prefix(f"{prefix}/state/blob/")}
    store.save({**document, "mode": "observe"})
    after = {kv.key: kv.mod_revision for kv in client.get_prefix(f"{prefix}/state/blob/")}
    assert after == before  # the chunks of `records` and `timings` were kept as they were
    store.save({**document, "records": document["records"][:10]})  # type: ignore[index]
    shrunk = {kv.key for kv in client.get_prefix(f"{prefix}/state/blob/")}
    assert len(shrunk) < len(before)  # the chunks no manifest names are gone


def test_a_standby_cannot_write(client: EtcdClient, store_url: str) -> None:
    prefix = parse_store_url(store_url).prefix
    standby = EtcdStore(client, prefix, fence=lambda: None, term_key="t", leader_key="l")
    with pytest.raises(GridError) as refused:
        standby.save({"mode": "observe"})
    assert refused.value.code == "state_fenced"
    assert client.get(f"{prefix}/state/manifest") is None


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b'{"format": 1, "inline": {}, "parts": {"records": ["00"]}}', b"[" * 500],
)
def test_an_undecodable_document_is_quarantined_and_the_controller_starts_clean(
    client: EtcdClient, store_url: str, raw: bytes
) -> None:
    prefix = parse_store_url(store_url).prefix
    held, store = leader(client, prefix)
    client.put(f"{prefix}/state/manifest", raw)
    revision = client.get(f"{prefix}/state/manifest")
    assert revision is not None
    ctl = Controller(store, now=time.time(), config=ControllerConfig(), lease=held)
    assert ctl.mode.value == "recommend"
    assert "state_quarantined" in ctl.warnings
    copy = client.get(f"{prefix}/quarantine/{revision.mod_revision}/manifest")
    assert copy is not None and copy.value == raw
    assert client.get(f"{prefix}/state/manifest") is None  # the leader removed it


def test_a_schema_mismatch_is_quarantined_too(client: EtcdClient, store_url: str) -> None:
    prefix = parse_store_url(store_url).prefix
    held, store = leader(client, prefix)
    store.save({"schema_version": 1, "mode": "sideways"})
    ctl = Controller(store, now=time.time(), config=ControllerConfig(), lease=held)
    assert ctl.mode.value == "recommend" and "state_quarantined" in ctl.warnings
    assert client.get_prefix(f"{prefix}/quarantine/")


def test_state_survives_a_member_loss(cluster: EtcdCluster, store_url: str) -> None:
    target = parse_store_url(store_url)
    client = EtcdClient(target)
    try:
        _held, store = leader(client, target.prefix)
        store.save({"mode": "automatic", "saved_at": 1.0})
        first = cluster.members[0]
        cluster.kill_member(first)
        try:
            store.save({"mode": "automatic", "saved_at": 2.0})
            reader = EtcdStore(
                client, target.prefix, fence=lambda: None, term_key="", leader_key=""
            )
            assert reader.load().document == {"mode": "automatic", "saved_at": 2.0}
        finally:
            cluster.start_member(first)
    finally:
        client.close()
