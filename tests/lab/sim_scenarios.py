"""Hypothesis strategies for simulator scenarios: a small fleet, then a script of disturbances.

Fleets are small (2–4 hosts, 2–4 models) so that one scenario runs in tens of milliseconds with
the heuristic planner; timings are scaled down (short residency, cooldown and backoff) so that a
scenario can converge within a few dozen virtual ticks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from grid.fleet.actions import ActionKind
from grid.fleet.models import DemandEntry, FleetSnapshot, HostState
from grid.fleet.snapshot import parse_snapshot
from grid.lab.simulator import FleetSimulator

START = 1_785_300_000.0
SHAS = ["1" * 64, "2" * 64]

POLICY: dict[str, Any] = {
    "heartbeat_stale_s": 12.0,
    "retry_backoff_base_s": 5.0,
    "retry_backoff_cap_s": 20.0,
    "observation_timeout_s": 10.0,
}


@dataclass
class Event:
    tick: int
    name: str
    args: tuple[Any, ...] = ()


@dataclass
class Scenario:
    doc: dict[str, Any]
    events: list[Event] = field(default_factory=list)

    def snapshot(self) -> FleetSnapshot:
        return parse_snapshot(self.doc)


@st.composite
def fleets(draw: st.DrawFn, *, with_residencies: bool = True) -> dict[str, Any]:
    n_hosts = draw(st.integers(2, 4))
    n_models = draw(st.integers(2, 4))
    model_ids = [f"m{i}" for i in range(n_models)]
    models = []
    for model_id in model_ids:
        max_replicas = draw(st.integers(1, 2))
        prof: dict[str, Any] = {
            "model_id": model_id,
            "memory_mb": draw(st.sampled_from([2048, 4096, 6144])),
            "priority": draw(st.sampled_from([0, 5, 50])),
            "min_replicas": draw(st.integers(0, max_replicas)),
            "max_replicas": max_replicas,
            "min_failure_domains": draw(st.integers(1, 2)),
            "min_residency_s": draw(st.sampled_from([0.0, 10.0])),
            "scale_down_cooldown_s": draw(st.sampled_from([0.0, 15.0])),
            "load_estimate_s": 12.0,
            "warm_estimate_s": 6.0,
        }
        if draw(st.booleans()):
            prof["artifact_sha256"] = draw(st.sampled_from(SHAS))
            prof["artifact_size_mb"] = 1000
            if draw(st.booleans()):
                prof["artifact_source"] = f"hf://grid/{model_id}.gguf"
        if draw(st.integers(0, 5)) == 0:
            prof["pinned_hosts"] = ["h0"]
            prof["max_replicas"] = max(prof["max_replicas"], 1)
        models.append(prof)
    hosts = []
    for i in range(n_hosts):
        doc: dict[str, Any] = {
            "host_id": f"h{i}",
            "capacity_mb": draw(st.sampled_from([8192, 12288, 16384])),
            "failure_domain": "rack-a" if i % 2 == 0 else "rack-b",
            "last_heartbeat": START,
            "max_models": draw(st.sampled_from([0, 0, 2])),
            "residencies": [],
        }
        if with_residencies:
            free = doc["capacity_mb"]
            for prof in models:
                if draw(st.integers(0, 3)) != 0 or prof["memory_mb"] > free:
                    continue
                free -= prof["memory_mb"]
                res: dict[str, Any] = {
                    "model_id": prof["model_id"],
                    "memory_mb": prof["memory_mb"],
                    "state": draw(st.sampled_from(["ready", "ready", "draining", "failed"])),
                    "loaded_at": START - draw(st.sampled_from([0.0, 5.0, 3600.0])),
                    "last_used_at": START - 3600.0,
                    "active_requests": draw(st.sampled_from([0, 0, 1, 2])),
                    "artifact_sha256": prof.get("artifact_sha256"),
                }
                if draw(st.integers(0, 4)) == 0:
                    res["managed"] = False
                    res["state"] = "ready"
                doc["residencies"].append(res)
        hosts.append(doc)
    demand = {}
    for model_id in model_ids:
        load = draw(st.sampled_from([0.0, 0.0, 0.6, 1.5]))
        if load:
            evidence = draw(st.sampled_from(["direct", "direct", "inferred"]))
            demand[model_id] = {"offered_concurrency": load, "evidence": evidence}
    return {
        "schema_version": 1,
        "now": START,
        "policy": dict(POLICY),
        "hosts": hosts,
        "models": models,
        "demand": demand,
    }


EVENT_NAMES = [
    "demand",
    "pause",
    "resume",
    "outage",
    "restore",
    "crash",
    "fail_next",
    "requests",
    "unknown_activity",
    "remove_profile",
    "slow_poll",
    "protect",  # local protection turns the host draining
    "drop_route",  # a READY child loses its route
]


@st.composite
def scenarios(draw: st.DrawFn, *, max_events: int = 6, ticks: int = 10) -> Scenario:
    doc = draw(fleets())
    host_ids = [h["host_id"] for h in doc["hosts"]]
    model_ids = [m["model_id"] for m in doc["models"]]
    events = []
    for _ in range(draw(st.integers(0, max_events))):
        tick = draw(st.integers(0, ticks - 1))
        name = draw(st.sampled_from(EVENT_NAMES))
        host_id = draw(st.sampled_from(host_ids))
        model_id = draw(st.sampled_from(model_ids))
        if name == "demand":
            args: tuple[Any, ...] = (model_id, draw(st.sampled_from([0.0, 0.6, 1.5, 3.0])))
        elif name == "fail_next":
            args = (draw(st.sampled_from(list(ActionKind)[:4])), host_id, draw(st.integers(1, 3)))
        elif name == "requests":
            args = (host_id, model_id, draw(st.integers(0, 3)))
        elif name in {"crash", "unknown_activity", "drop_route"}:
            args = (host_id, model_id)
        elif name == "remove_profile":
            args = (model_id,)
        elif name == "slow_poll":
            args = (host_id, draw(st.integers(2, 3)))
        else:
            args = (host_id,)
        events.append(Event(tick, name, args))
    policy = draw(
        st.sampled_from(
            [
                {},
                {"max_concurrent_mutations": 2},
                {"max_host_mutations": 1},
                {"max_concurrent_mutations": 3, "artifact_fanout": 1},
            ]
        )
    )
    doc["policy"].update(policy)
    return Scenario(doc=doc, events=sorted(events, key=lambda e: e.tick))


def apply_event(sim: FleetSimulator, event: Event) -> None:
    name, args = event.name, event.args
    if name == "demand":
        model_id, load = args
        if model_id in sim.models:
            sim.set_demand(model_id, DemandEntry(offered_concurrency=load) if load else None)
    elif name == "pause":
        sim.pause_host(args[0])
    elif name == "resume":
        sim.resume_host(args[0])
    elif name == "outage":
        sim.outage(args[0])
    elif name == "restore":
        sim.restore(args[0])
    elif name == "crash":
        sim.crash(*args)
    elif name == "fail_next":
        kind, host_id, times = args
        sim.fail_next(kind=kind, host_id=host_id, times=times)
    elif name == "requests":
        sim.set_requests(*args)
    elif name == "unknown_activity":
        sim.set_activity_unknown(*args)
    elif name == "remove_profile":
        sim.remove_profile(args[0])
    elif name == "slow_poll":
        sim.set_poll_every(*args)
    elif name == "protect":
        sim.set_host_state(args[0], HostState.DRAINING)
    elif name == "drop_route":
        sim.drop_route(*args)


def calm_down(sim: FleetSimulator) -> None:
    """End every disturbance: hosts back online and accepting, activity known, no failures."""
    for host_id, host in sim.hosts.items():
        if not host.online:
            sim.restore(host_id)
        sim.resume_host(host_id)
        host.unrouted.clear()
        for res in host.residencies.values():
            res.activity_unknown = False
    sim.failure_rules.clear()
    sim.poll_every.clear()
