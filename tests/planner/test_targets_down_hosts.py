"""Replicas on a host that is down, unhealthy or silent are not held by the cooldown.

Hand-worked fleet: model m (cooldown 600 s, max 5 replicas), no demand, one READY replica on
each of three hosts, each used 60 s ago (inside the cooldown). A host that stopped heartbeating
(last heartbeat older than the policy's 90 s) or whose local protection
loop reports it unhealthy or quarantined still *reports* its last residencies, but those
processes serve nothing: only the replicas on the healthy, heartbeating hosts stay desired.
Pressure asks for ready + 1, and ready counts only replicas that serve.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.planner.targets import compute_targets
from tests.planner.fleets import NOW, host, model, resident, snapshot

pytestmark = pytest.mark.unit

COOLDOWN = {"max_replicas": 5, "scale_down_cooldown_s": 600.0}


def _fleet(bad: dict[str, Any], demand: dict[str, Any] | None = None) -> int:
    used = {"last_used_at": NOW - 60, "loaded_at": NOW - 10_000}
    hosts = [
        host("h1", 65536, residencies=[resident("m", 4096, **used)]),
        host("h2", 65536, residencies=[resident("m", 4096, **used)]),
        host("h3", 65536, residencies=[resident("m", 4096, **used)], **bad),
    ]
    snap = snapshot(hosts, [model("m", **COOLDOWN)], demand={"m": demand} if demand else None)
    return compute_targets(snap)["m"].desired


def test_all_three_healthy_hosts_hold_three() -> None:
    assert _fleet({}) == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"last_heartbeat": NOW - 300},  # down: silent for 300 s > 90 s
        {"last_heartbeat": NOW - 91},  # one second past the stale limit
        {"state": "unhealthy"},
        {"state": "quarantined"},
    ],
)
def test_a_replica_on_a_dead_host_is_not_held(bad: dict[str, Any]) -> None:
    assert _fleet(bad) == 2


def test_a_replica_on_a_draining_host_still_serves_and_is_held() -> None:
    # draining takes no new work but its engines still serve (the drain's whole point)
    assert _fleet({"state": "draining"}) == 3


def test_pressure_counts_only_serving_replicas() -> None:
    # load 0.5 x 1.2 + queue 1 = 1.6 -> ceil(1.6 / 0.75) = 3; pressure asks for ready + 1 with
    # ready = 2 serving replicas -> 3 (it would be 4 if the silent host's replica counted)
    demand = {"offered_concurrency": 0.5, "queue_depth": 1}
    assert _fleet({"last_heartbeat": NOW - 300}, demand) == 3
