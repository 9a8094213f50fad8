"""A receipt is acknowledged only once it is durable in etcd: a standby or a leader whose write
fails answers an error, so the node keeps the receipt and sends it again (HAController)."""

from __future__ import annotations

import time

import pytest

from grid.fleet.errors import GridError
from grid.runtime.controller import ControllerConfig
from grid.runtime.controller.etcd import (
    EtcdClient,
    EtcdLease,
    EtcdStore,
    HAController,
    parse_store_url,
)
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service
ACK = {"action_id": "a-1", "status": "succeeded", "message": "warm", "duration_seconds": 1.0}


def member(client: EtcdClient, prefix: str, name: str) -> HAController:
    lease = EtcdLease(client, prefix, controller_id=name, url=f"http://{name}", ttl_s=5)
    store = EtcdStore(
        client, prefix, fence=lease.fence, term_key=lease.term_key, leader_key=lease.leader_key
    )
    return HAController(store, now=time.time(), config=ControllerConfig(), lease=lease)


def test_a_standby_keeps_routes_fresh_but_leaves_receipts_with_the_node(
    client: EtcdClient, store_url: str
) -> None:
    prefix = parse_store_url(store_url).prefix
    leader, standby = member(client, prefix, "a"), member(client, prefix, "b")
    with leader.etcd_lease.campaigning():
        assert leader.ensure_lease(time.time())
    standby.etcd_lease.observe()
    node = FakeNode("h1")
    now = time.time()
    standby.node_update("h1.allocator", "h1", node.registration(), now)
    with pytest.raises(GridError) as refused:
        standby.node_update("h1.allocator", "h1", node.heartbeat([ACK]), now + 1)
    assert refused.value.code == "not_leader"
    assert refused.value.details["leader_url"] == "http://a"
    assert standby.registry.hosts["h1"].received_at == now + 1  # the routes were refreshed
    assert standby.counters.acks == {}  # and no receipt was taken
    assert not standby.tick(now + 2).ok  # a standby never plans or issues


def test_a_leader_that_cannot_write_does_not_acknowledge_until_it_can(
    client: EtcdClient, store_url: str
) -> None:
    prefix = parse_store_url(store_url).prefix
    leader = member(client, prefix, "a")
    now = time.time()
    with leader.etcd_lease.campaigning():
        assert leader.ensure_lease(now)
    node = FakeNode("h1")
    leader.node_update("h1.allocator", "h1", node.registration(), now)
    leader.put_profile("m", {"memory_mb": 100, "min_replicas": 1}, now)
    leader.set_mode("automatic", now)
    revision = leader.node_update("h1.allocator", "h1", node.heartbeat(), now).revision
    assert leader.tick(now).ok
    commands = leader.poll_commands("h1", revision, now).commands
    assert commands, "the leader delivers the first command"
    ack = node.execute(commands[0], now=now)
    assert ack is not None
    held = leader.etcd_lease.held
    assert held is not None
    client.put(f"{prefix}/term", str(held.term + 1))  # another controller took the next term
    for attempt in range(2):  # the first answer and the node's retry are both refused
        with pytest.raises(GridError) as refused:
            leader.node_update("h1.allocator", "h1", node.heartbeat([ack]), now + 1 + attempt)
        assert refused.value.code == "state_fenced"
    assert ack["action_id"] in leader.unsaved_acks
