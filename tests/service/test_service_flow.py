"""A real controller on loopback, fake nodes over HTTP: observe -> recommend -> automatic."""

from __future__ import annotations

import time

import pytest

from tests.service.harness import ControllerProcess, HttpNode, converge, mint
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


def fleet(server: ControllerProcess, count: int = 3) -> list[HttpNode]:
    nodes = []
    for i in range(1, count + 1):
        fake = FakeNode(f"h{i}", capacity_mb=16384, failure_domain=f"rack-{i}")
        node = HttpNode(fake, server.url, mint(server, fake.host_id))
        node.register()
        nodes.append(node)
    return nodes


def test_rollout_sequence_converges_the_fleet(controller: ControllerProcess) -> None:
    nodes = fleet(controller)
    with controller.admin() as admin:
        admin.put_model(
            "coder",
            {
                "memory_mb": 8192,
                "min_replicas": 2,
                "max_replicas": 3,
                "min_failure_domains": 2,
                "min_residency_s": 0,
            },
        )
        admin.set_mode("observe")
        admin.tick()
        observed = admin.status().model_dump(mode="json")
        assert observed["mode"] == "observe" and observed["proposed_actions"] == []
        assert {d["code"] for d in observed["reconciliation"]["deferred"]} == {"observe_mode"}
        assert sum(len(n.poll()) for n in nodes) == 0

        admin.set_mode("recommend")
        admin.tick()
        recommended = admin.status().model_dump(mode="json")
        proposed = recommended["proposed_actions"]
        assert sorted(a["kind"] for a in proposed) == ["load", "load", "warm", "warm"]
        assert not any(a["executable"] for a in proposed)
        assert sum(len(n.poll()) for n in nodes) == 0  # recommendations are never delivered

        admin.set_mode("automatic")
        converge(nodes)
        final = admin.status().model_dump(mode="json")
    ready = sorted(n.fake.host_id for n in nodes if n.fake.residencies.get("coder"))
    assert len(ready) == 2 and final["pending_commands"] == [] and final["unmet"] == []
    planned = {(a["model_id"], a["host_id"]) for a in final["plan"]["assignments"]}
    assert planned == {("coder", h) for h in ready}
    received = [c["action_id"] for n in nodes for c in n.received]
    assert len(received) == 4 and len(set(received)) == 4
    assert all(c["controller_term"] >= 1 and c["executable"] for n in nodes for c in n.received)
    acks = final["counters"]["acknowledgements"]
    assert acks == {"applied": 4}
    for node in nodes:
        node.close()


def test_observations_feed_the_forecast_and_metrics(controller: ControllerProcess) -> None:
    nodes = fleet(controller, 2)
    now = time.time()
    with controller.admin() as admin:
        admin.put_model("chat", {"memory_mb": 4096, "max_replicas": 2})
        result = admin.observe(
            [{"model_id": "chat", "timestamp": now - i, "service_time_s": 20.0} for i in range(30)]
            + [{"model_id": "never-configured", "timestamp": now}]
            + [{"model_id": "chat", "timestamp": now, "prompt": "secret text"}]
        )
        assert (result.accepted, result.ignored, result.invalid) == (30, 1, 1)
        admin.tick()
        status = admin.status().model_dump(mode="json")
        metrics = admin.metrics()
    assert status["forecasts"]["chat"]["offered_concurrency"] > 0
    assert "never-configured" not in status["forecasts"]
    assert status["plan"]["desired_replicas"]["chat"] >= 1
    assert 'grid_allocator_observations_total{result="accepted"} 30' in metrics
    assert "grid_allocator_ticks_total" in metrics
    for node in nodes:
        node.close()
