"""Issue 15, defect 8: after a controller restart, constructive work beyond the ready set waits
for the restart grace too (no third replica warmed before the other hosts re-register), and the
inference boundary does not answer "nothing is served" while the first heartbeats are due."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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


def test_a_replacement_delivered_before_a_sigkill_is_waited_for_not_doubled(
    tmp_path: Path,
) -> None:
    """Issue 22, item 7: a controller SIGKILLed just after delivering a replacement came back,
    heard first from the host whose replica had died (no READY replica in view, so it was
    "restored at once" there), and then ran 3 replicas for max 2 until a drain 44 s later.
    While the fleet settles, a model the restored book places on a host not back yet waits."""
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2"), FakeNode("h3")])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    first, second = fleet.ready_hosts("m")
    (spare,) = {"h1", "h2", "h3"} - {first, second}
    # The first replica's child dies while its host is briefly unhealthy; the controller
    # delivers a replacement WARM to the spare, which takes it, and the controller is SIGKILLed
    # before the spare answers. The first host recovers meanwhile.
    fleet.nodes[first].residencies.clear()
    fleet.nodes[first].state = "unhealthy"
    taken: list[dict[str, Any]] = []
    while not taken:
        fleet.now += 2.0
        for host_id in (first, second, spare):
            delivery = fleet.poll(fleet.nodes[host_id])
            taken += [c for c in delivery.commands if c["kind"] == "warm"]
    (replacement,) = taken
    assert replacement["host_id"] == spare
    fleet.nodes[first].state = "accepting"
    fleet.ctl.keeper.release()  # a SIGKILLed holder's lease is taken over at once
    fleet.start("ctl-b")

    def replicas() -> int:
        return sum(1 for n in fleet.nodes.values() if "m" in n.residencies)

    # The host that lost its replica is the first to re-register: no READY replica in view.
    fleet.now += 0.5
    fleet.update(fleet.nodes[first], fleet.nodes[first].registration())
    fleet.now += 1.0
    early = fleet.poll(fleet.nodes[first]).commands
    assert [c for c in early if c["kind"] == "warm"] == []  # it waits for the spare's replica
    # The others come back; the spare finishes the replacement it took before the kill.
    fleet.update(fleet.nodes[second], fleet.nodes[second].registration())
    ack = fleet.nodes[spare].execute(replacement, now=fleet.now, ttl_s=30.0)
    assert ack is not None
    fleet.acks[spare].append(ack)
    fleet.update(fleet.nodes[spare], fleet.nodes[spare].registration())
    most = replicas()
    for _ in range(8):
        for command in fleet.step():
            most = max(most, replicas())
            assert command["kind"] != "warm", command
    assert most == 2
    assert sorted(fleet.ready_hosts("m")) == sorted([second, spare])


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
