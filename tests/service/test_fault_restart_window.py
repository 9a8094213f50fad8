"""Issue 15, defect 8: after a controller restart, constructive work beyond the ready set waits
for the restart grace too (no third replica warmed before the other hosts re-register), and the
inference boundary does not answer "nothing is served" while the first heartbeats are due."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from grid.api.settling import ROUTE_SETTLE_S
from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import ENGINE_KEY, chat, configure, register
from tests.runtime.controller.harness import Fleet, profile
from tests.service.harness import ControllerProcess
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


def test_no_extra_replica_is_warmed_before_the_fleet_re_registers(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2"), FakeNode("h3")])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2, pinned_hosts=[]), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    ready = fleet.ready_hosts("m")
    assert len(ready) == 2
    (spare,) = {"h1", "h2", "h3"} - set(ready)
    first, late = ready
    # A restart: the state survives, membership does not (the old lease is given up, as a
    # SIGKILLed holder's is taken over at once).
    fleet.ctl.keeper.release()
    fleet.start("ctl-b")
    fleet.now += 1.0
    for host_id in (first, spare):
        fleet.update(fleet.nodes[host_id], fleet.nodes[host_id].registration())
    got: list[dict[str, object]] = []
    # Only one of the two hosts with a replica (and the spare) heartbeat during the grace.
    for _ in range(3):
        fleet.now += 2.0
        for host_id in (first, spare):
            node = fleet.nodes[host_id]
            delivery = fleet.poll(node)
            got += delivery.commands
            for command in delivery.commands:
                ack = node.execute(command, now=fleet.now, ttl_s=delivery.lease_ttl_s)
                if ack is not None:
                    fleet.acks[host_id].append(ack)
    assert [c for c in got if c["host_id"] == spare] == []
    deferred = {(d.kind.value, d.host_id, d.code) for d in fleet.ctl.last_deferred}
    assert any(host == spare and code == "membership_grace" for _k, host, code in deferred)
    # The late host re-registers; after the grace the fleet stays as it was.
    fleet.update(fleet.nodes[late], fleet.nodes[late].registration())
    fleet.now += fleet.config.membership_grace_s
    before = len(fleet.delivered)
    fleet.settle(4)
    assert fleet.ready_hosts("m") == ready
    assert [c for c in fleet.delivered[before:] if c["host_id"] == spare] == []


def test_requests_right_after_a_restart_wait_for_the_first_heartbeats(
    controller: ControllerProcess,
) -> None:
    fake = FakeEngine(ENGINE_KEY, "alpha-engine").start()
    try:
        configure(controller, "alpha")
        register(controller, "host-alpha", {"alpha": fake})
        controller.stop()
        controller.start()  # routes are memory only: none until the node heartbeats again
        with ThreadPoolExecutor(2) as pool:
            listed = pool.submit(httpx.get, f"{controller.url}/v1/models", timeout=10)
            answered = pool.submit(chat, controller, "alpha")
            time.sleep(0.6)
            register(controller, "host-alpha", {"alpha": fake})
            models = [m["id"] for m in listed.result().json()["data"]]
            reply = answered.result()
        assert models == ["alpha"]
        assert reply.status_code == 200, reply.text
        # After the window an answer is immediate again: an unserved model is not waited for.
        time.sleep(ROUTE_SETTLE_S)
        started = time.monotonic()
        assert httpx.get(f"{controller.url}/v1/models", timeout=10).status_code == 200
        assert time.monotonic() - started < ROUTE_SETTLE_S
    finally:
        fake.stop()
