"""Safety invariants of the predictive cache on the simulator (planner + reconciler + simulated
nodes), over generated fleets, prediction schedules and demand:

- no warm: a predictive load is never followed by a warm the plan did not ask for, and every
  predictive action claims no memory (a load) or touches disk only (an evict);
- no drain: with no demand beyond the predictions, no drain or unload is ever issued;
- reserve respected: when a predictive load is issued, the host's reported free disk, less
  every load still in flight there, less the artifact, leaves the reserve free;
- nothing protected evicted: every evict names an entry the tick's snapshot reports with that
  exact SHA-256, never warmed, with no live residency, not pinned there, not planned there, on
  a managed host that offers the evict actuator; the simulated node refuses nothing.

The disk model is the lab's: a host's free disk is its total less the artifacts it caches.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.actions import ActionKind, RecordStatus
from grid.fleet.models import LIVE_STATES, DemandEntry, FleetSnapshot
from grid.fleet.prefetch import Prediction
from grid.lab.simulator import FleetSimulator, SimConfig

pytestmark = pytest.mark.property

NOW = 1_785_300_000.0
TICK_S = 600.0  # ten minutes: a run crosses the 15 min maturity and the 6 h TTL
MODELS = ["video", "image", "coder", "embed"]
SIZES = {"video": 9000, "image": 6000, "coder": 4000, "embed": 1000}


class DiskFleet(FleetSimulator):
    """The shared simulator with the lab's disk model and a prediction schedule."""

    def __init__(self, snap: FleetSnapshot, disk_mb: dict[str, int]) -> None:
        super().__init__(snap, config=SimConfig(tick_s=TICK_S, seed=1))
        self.disk_mb = disk_mb
        self.predictions: list[Prediction] = []

    def free(self, host_id: str) -> int:
        host = self.hosts[host_id]
        return self.disk_mb[host_id] - sum(SIZES[m] for m in host.cached)

    def snapshot(self) -> FleetSnapshot:
        base = super().snapshot()
        hosts = [h.model_copy(update={"disk_free_mb": self.free(h.host_id)}) for h in base.hosts]
        return base.model_copy(update={"hosts": hosts, "predictions": list(self.predictions)})


def build(hosts: list[dict[str, Any]], reserve: int) -> DiskFleet:
    doc = {
        "now": NOW,
        "policy": {"predictive_disk_reserve_mb": reserve},
        "hosts": [
            {
                "host_id": h["host_id"],
                "capacity_mb": h["capacity_mb"],
                "last_heartbeat": NOW,
                "ownership": "manual" if h["manual"] else "managed",
                "actuator_capabilities": ["load", "warm", "drain", "unload"]
                + (["evict"] if h["evict"] else []),
                "cached_models": h["cached"],
                "disk_free_mb": 0,
            }
            for h in hosts
        ],
        "models": [
            {
                "model_id": m,
                "memory_mb": 4096,
                "artifact_size_mb": SIZES[m],
                "artifact_sha256": f"{i + 1:064x}",
                "artifact_source": f"hf://o/r/{m}.gguf",
                "max_replicas": 2,
                "min_residency_s": 0.0,
                "scale_down_cooldown_s": 0.0,
                **({"pinned_hosts": ["h0"]} if m == "embed" else {}),
            }
            for i, m in enumerate(MODELS)
        ],
    }
    return DiskFleet(FleetSnapshot.model_validate(doc), {h["host_id"]: h["disk"] for h in hosts})


host_st = st.fixed_dictionaries(
    {
        "capacity_mb": st.sampled_from([8192, 16384]),
        "disk": st.sampled_from([12000, 20000, 30000]),
        "manual": st.booleans(),
        "evict": st.booleans(),
        "cached": st.lists(st.sampled_from(MODELS[:3]), max_size=1, unique=True),
    }
)
phase_st = st.tuples(
    st.integers(1, 6),  # ticks
    st.lists(st.sampled_from(MODELS[:3]), max_size=2, unique=True),  # predicted models
    st.lists(st.sampled_from(MODELS[:3]), max_size=1, unique=True),  # demanded models
)


def check_tick(sim: DiskFleet, report: Any, reserve: int, demand_free: bool) -> None:
    snap, plan = report.snapshot, report.plan
    hosts = {h.host_id: h for h in snap.hosts}
    planned = {(a.model_id, a.host_id) for a in plan.assignments}
    inflight: dict[str, int] = {}
    for rec in sim.records.values():
        if rec.kind is ActionKind.LOAD and rec.is_open and rec.created_at < snap.now:
            inflight[rec.host_id] = inflight.get(rec.host_id, 0) + SIZES[rec.model_id]
    for action in report.result.actions:
        host = hosts[action.host_id]
        if action.kind is ActionKind.WARM:
            assert (action.model_id, action.host_id) in planned  # no unplanned warm
        if demand_free:
            assert action.kind not in (ActionKind.DRAIN, ActionKind.UNLOAD)
        if action.predictive and action.kind is ActionKind.LOAD:
            assert action.memory_mb == 0
            assert host.disk_free_mb is not None
            left = host.disk_free_mb - inflight.get(action.host_id, 0) - SIZES[action.model_id]
            assert left >= reserve
            inflight[action.host_id] = inflight.get(action.host_id, 0) + SIZES[action.model_id]
        if action.kind is ActionKind.EVICT:
            assert action.predictive and action.memory_mb == 0
            assert host.ownership.value == "managed" and "evict" in host.actuator_capabilities
            entry = next(e for e in host.predictive_cache if e.model_id == action.model_id)
            assert entry.sha256 == action.artifact_sha256 and not entry.warmed
            live = [r for r in host.residencies if r.model_id == action.model_id]
            assert all(r.state not in LIVE_STATES for r in live)
            assert (action.model_id, action.host_id) not in planned
            assert not (action.model_id == "embed" and action.host_id == "h0")


@settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    hosts=st.lists(host_st, min_size=1, max_size=3),
    reserve=st.sampled_from([0, 5000, 10240]),
    phases=st.lists(phase_st, min_size=1, max_size=5),
)
def test_the_predictive_cache_never_warms_drains_overfills_or_evicts_protected(
    hosts: list[dict[str, Any]], reserve: int, phases: list[tuple[int, list[str], list[str]]]
) -> None:
    sim = build([{"host_id": f"h{i}", **h} for i, h in enumerate(hosts)], reserve)
    ever_demanded = False
    for ticks, predicted, demanded in [*phases, (40, [], [])]:  # then 6+ h with no prediction
        ever_demanded = ever_demanded or bool(demanded)
        sim.predictions = [
            Prediction(
                model_id=m, source="image", target="video", confidence=0.8, offered_concurrency=1.0
            )
            for m in predicted
        ]
        for m in MODELS:
            sim.set_demand(m, DemandEntry(offered_concurrency=1.0) if m in demanded else None)
        for _ in range(ticks):
            report = sim.step()
            check_tick(sim, report, reserve, demand_free=not ever_demanded)
    refused = [
        r
        for r in sim.records.values()
        if r.kind is ActionKind.EVICT and r.status is RecordStatus.FAILED
    ]
    assert refused == []  # the node never had to refuse an evict the controller sent
    assert all(v.code != "memory_overcommit" for v in sim.violations)
    # Entries that were never warmed and are no longer predicted expired where the node
    # offers the actuator; a used download stayed.
    for host_id, host in sim.hosts.items():
        doc = host.to_model()
        for e in doc.predictive_cache:
            expired = sim.now - e.cached_at >= 6 * 3600
            evictable = doc.ownership.value == "managed" and "evict" in doc.actuator_capabilities
            if expired and evictable and not e.warmed:
                assert any(r.model_id == e.model_id for r in host.residencies.values()) or (
                    e.model_id == "embed" and host_id == "h0"
                ), (host_id, e)
