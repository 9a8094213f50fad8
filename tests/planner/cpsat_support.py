"""A small random fleet generator and a bare plan builder for the CP-SAT and explainer tests.

The generator mixes runtimes, backends, tags, tiers, slots, colocation ceilings and exclusions,
pins (some to a host that is not in the snapshot), disk, failure domains, throttled and
ineligible hosts, live managed incumbents and unmanaged replicas. Capacities are multiples of
200 MB so that headroom stays whole and the validator and the engines agree to the megabyte.
"""

from __future__ import annotations

import random
from typing import Any

from grid.fleet.models import FleetSnapshot, Plan, SolverReport
from grid.planner.assemble import assignments_of
from grid.planner.problem import PlacementProblem
from tests.planner.fleets import NOW, snapshot

Key = tuple[str, str]


def random_fleet(
    seed: int, hosts: int, models: int, *, missing_pins: bool = True, loose: bool = False
) -> FleetSnapshot:
    """A seeded fleet; `loose` drops runtime, backend, tag and host-state refusals so that
    most pairs are candidates and capacity decides (dense tiny fleets for brute force)."""
    rng = random.Random(seed)
    model_ids = [f"m{i}" for i in range(models)]
    host_docs = [_host(rng, f"h{i}", model_ids) for i in range(hosts)]
    model_docs = [_model(rng, mid, model_ids, hosts, missing_pins) for mid in model_ids]
    if loose:
        for doc in host_docs:
            doc.update(runtimes=["llama.cpp", "vllm"], backends=["cuda"], tags=["gpu"])
            doc.update(state="accepting", throttle_fraction=1.0, last_heartbeat=NOW - 5)
        for doc in model_docs:
            doc.update(forbidden_tags=[])
    demand: dict[str, dict[str, Any]] = {}
    for doc in model_docs:
        if rng.random() < 0.8:
            entry: dict[str, Any] = {"desired_replicas": rng.randint(0, doc["max_replicas"])}
            if rng.random() < 0.2:
                entry["evidence"] = "inferred"
            if rng.random() < 0.5:
                entry["queue_depth"] = rng.randint(0, 3)
            demand[doc["model_id"]] = entry
    return snapshot(host_docs, model_docs, demand)


def _host(rng: random.Random, host_id: str, model_ids: list[str]) -> dict[str, Any]:
    roll = rng.random()
    doc: dict[str, Any] = {
        "host_id": host_id,
        "capacity_mb": rng.choice([4000, 6000, 8000, 12000, 16000, 24000]),
        "reserved_mb": rng.choice([0, 0, 1000]),
        "external_mb": rng.choice([0, 0, 0, 600]),
        "runtimes": rng.choice([["llama.cpp"], ["llama.cpp"], ["llama.cpp", "vllm"]]),
        "backends": rng.choice([["cuda"], ["metal"], []]),
        "failure_domain": rng.choice(["rack-a", "rack-b", None]),
        "tags": rng.sample(["gpu", "fast", "laptop"], rng.randint(0, 2)),
        "max_models": rng.choice([0, 0, 1, 2, 3]),
        "disk_free_mb": rng.choice([None, None, 2000, 6000, 20000]),
        "cached_models": rng.sample(model_ids, rng.randint(0, min(2, len(model_ids)))),
        "last_heartbeat": NOW - 5,
        "memory_bandwidth_gbps": rng.choice([0, 100, 400]),
    }
    if roll < 0.15:
        doc["state"] = "throttled"
        doc["throttle_fraction"] = 0.5
    elif roll < 0.18:
        doc["state"] = "draining"
    elif roll < 0.21:
        doc["last_heartbeat"] = NOW - 500  # stale
    residencies = []
    for model_id in rng.sample(model_ids, rng.randint(0, min(2, len(model_ids)))):
        kind = rng.random()
        res: dict[str, Any] = {
            "model_id": model_id,
            "memory_mb": rng.choice([1000, 2000, 3000]),
            "loaded_at": NOW - 4000,
            "last_used_at": NOW - 4000,
        }
        if kind < 0.55:
            res["state"] = "ready"
        elif kind < 0.7:
            res["state"] = "draining"
        elif kind < 0.85:
            res["state"] = "ready"
            res["managed"] = False
        else:
            res["state"] = "warming"
        residencies.append(res)
    doc["residencies"] = residencies
    return doc


def _model(
    rng: random.Random, model_id: str, model_ids: list[str], hosts: int, missing_pins: bool
) -> dict[str, Any]:
    max_replicas = rng.randint(1, 3)
    doc: dict[str, Any] = {
        "model_id": model_id,
        "memory_mb": rng.choice([1000, 2000, 3000, 4000, 6000, 9000]),
        "runtimes": rng.choice([["llama.cpp"], ["llama.cpp"], ["llama.cpp", "vllm"], ["vllm"]]),
        "backends": rng.choice([[], [], [], ["cuda"]]),
        "priority": rng.choice([0, 10, 100]),
        "min_replicas": rng.randint(0, 1),
        "max_replicas": max_replicas,
        "min_failure_domains": rng.choice([1, 1, 2]),
        "artifact_size_mb": rng.choice([0, 1000, 3000]),
    }
    if "vllm" in doc["runtimes"] and rng.random() < 0.5:
        doc["runtime_memory_mb"] = {"vllm": doc["memory_mb"] + 1000}
    if rng.random() < 0.15:
        doc["required_tags"] = ["gpu"]
    if rng.random() < 0.15:
        doc["forbidden_tags"] = ["laptop"]
    if rng.random() < 0.25:
        doc["max_colocated_models"] = rng.randint(1, 2)
    if rng.random() < 0.25:
        others = [m for m in model_ids if m != model_id]
        if others:
            doc["colocation_excludes"] = [rng.choice(others)]
    if rng.random() < 0.2:
        pin = "ghost" if missing_pins and rng.random() < 0.3 else f"h{rng.randrange(hosts)}"
        doc["pinned_hosts"] = [pin]
    doc["min_replicas"] = min(doc["min_replicas"], max_replicas)
    return doc


def plan_of(problem: PlacementProblem, placed: set[Key]) -> Plan:
    """A bare plan document for the validator (no explanations: callers ignore those codes)."""
    assignments = assignments_of(problem, placed)
    return Plan(assignments=assignments, solver=SolverReport(engine="test", status="", wall_ms=0))
