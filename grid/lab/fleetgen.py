"""Deterministic generator of realistic heterogeneous fleets (pure: seed and `now` in).

A generated fleet mixes datacenter GPU servers, CPU servers, GPU workstations, Mac Studios and
minis, and employee laptops (some throttled or paused), grouped into racks and office floors;
models range from tiny GGUFs and embedders to 70B chat models, image and video pipelines. Demand
is sized so that a good part of it fits and the rest competes: the planner has real choices.

Everything comes from one `random.Random(seed)`, consumed in a fixed order, so the same
arguments always give the same snapshot. The result is validated by `parse_snapshot`. The kinds
sampled from (and their weights) live in `grid.lab.fleetgen_kinds`.
"""

from __future__ import annotations

import math
import random
from typing import Any, TypeVar

from grid.fleet import FleetSnapshot, parse_snapshot
from grid.lab.fleetgen_kinds import (
    HOST_KINDS,
    MODEL_KINDS,
    RESIDENCY_STATE_WEIGHTS,
    HostKind,
    ModelKind,
)

K = TypeVar("K")

DEFAULT_NOW = 1785300000.0


def _pick_state(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    x = rng.random() * sum(w for _s, w in weighted)
    for state, weight in weighted:
        x -= weight
        if x < 0:
            return state
    return weighted[-1][0]


def _kinds_in_proportion(
    rng: random.Random, kinds: tuple[K, ...], weights: list[float], count: int
) -> list[K]:
    """Largest-remainder apportionment by weight, then a seeded shuffle: stable mix at any size."""
    total = sum(weights)
    exact = [count * w / total for w in weights]
    floors = [math.floor(e) for e in exact]
    order = sorted(range(len(kinds)), key=lambda i: (floors[i] - exact[i], i))
    for i in order[: count - sum(floors)]:
        floors[i] += 1
    out = [kind for kind, n in zip(kinds, floors, strict=True) for _ in range(n)]
    rng.shuffle(out)
    return out


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(256):064x}"


# ----------------------------------------------------------------------------- hosts


def _host(
    rng: random.Random, kind: HostKind, index: int, n_hosts: int, now: float
) -> dict[str, Any]:
    host_id = f"{kind.prefix}-{index:04d}"
    runtimes = list(kind.runtimes) + [r for r in kind.optional_runtimes if rng.random() < 0.3]
    racks = max(1, n_hosts // 24)
    floors = max(1, n_hosts // 16)
    if kind.site == "rack":
        domain: str | None = f"rack-{rng.randrange(racks) + 1}"
    elif kind.site == "floor":
        domain = f"floor-{rng.randrange(floors) + 1}"
    else:
        domain = None  # a laptop is its own failure domain
    state, throttle = "accepting", 1.0
    roll = rng.random()
    if kind.site == "roaming":
        if roll < 0.2:
            state, throttle = "throttled", rng.choice([0.5, 0.6, 0.75])
        elif roll < 0.27:
            state = "paused"
    elif roll < 0.03:
        state = "draining"
    elif roll < 0.05:
        state = "unhealthy"
    heartbeat_age = rng.uniform(0.5, 25.0) if rng.random() > 0.03 else rng.uniform(200.0, 900.0)
    disk = rng.randint(*kind.disk_mb) if rng.random() > 0.1 else None
    return {
        "host_id": host_id,
        "state": state,
        "throttle_fraction": throttle,
        "capacity_mb": rng.choice(kind.capacities_mb),
        "reserved_mb": rng.randint(*kind.reserved_mb) // 512 * 512,
        "external_mb": rng.choice([0, 0, 0, 0, 2048, 4096]) if kind.site != "rack" else 0,
        "runtimes": runtimes,
        "backends": list(kind.backends),
        "failure_domain": domain,
        "tags": list(kind.tags),
        "data_tiers": list(kind.tiers),
        "max_models": rng.choice(kind.max_models),
        "disk_free_mb": disk,
        "cached_models": [],
        "memory_bandwidth_gbps": round(rng.uniform(*kind.bandwidth_gbps), 1),
        "compute_gflops": round(rng.uniform(*kind.compute_gflops), 1),
        "last_heartbeat": round(now - heartbeat_age, 3),
        "residencies": [],
    }


# ----------------------------------------------------------------------------- models


def _model(rng: random.Random, kind: ModelKind, index: int, scale: float) -> dict[str, Any]:
    memory = rng.randint(*kind.memory_mb) // 64 * 64
    runtime_memory = {}
    if kind.vllm_factor is not None:
        runtime_memory["vllm"] = int(memory * kind.vllm_factor) // 64 * 64
    max_replicas = rng.choice(kind.max_replicas) * math.ceil(scale)
    priority = rng.choice(kind.priorities)
    load_s = round(rng.uniform(*kind.load_s), 1)
    tier = rng.choice(kind.tiers)
    forbidden = ["laptop"] if tier == "confidential" or memory > 20_000 else []
    return {
        "model_id": f"{kind.prefix}-{index:03d}",
        "memory_mb": memory,
        "runtime_memory_mb": runtime_memory,
        "runtimes": list(kind.runtimes),
        "backends": list(kind.backends),
        "priority": priority,
        "min_replicas": 1 if priority >= 80 or rng.random() < 0.15 else 0,
        "max_replicas": max_replicas,
        "pinned_hosts": [],
        "required_tags": list(kind.required_tags),
        "forbidden_tags": forbidden,
        "data_tier": tier,
        "max_colocated_models": rng.choice(kind.max_colocated),
        "colocation_excludes": [],
        "min_failure_domains": 2 if priority >= 80 and max_replicas >= 2 else 1,
        "artifact_size_mb": int(memory * rng.uniform(0.55, 0.8)),
        "artifact_sha256": _sha(rng) if rng.random() < 0.6 else None,
        "workload_scores": {kind.workload: round(rng.uniform(0.5, 1.0), 2)},
        "replica_concurrency": rng.choice(kind.replica_concurrency),
        "load_estimate_s": load_s,
        "warm_estimate_s": round(load_s * rng.uniform(0.2, 0.4), 1),
        "latency_slo_ms": rng.choice([None, 2000.0, 5000.0, 15000.0]),
    }


def _footprint(model: dict[str, Any], runtime: str) -> int:
    return int(model["runtime_memory_mb"].get(runtime, model["memory_mb"]))


def _compatible(model: dict[str, Any], host: dict[str, Any]) -> list[str]:
    """Runtimes the pair shares if every static filter passes (else empty)."""
    if model["backends"] and not set(model["backends"]) & set(host["backends"]):
        return []
    if model["data_tier"] not in host["data_tiers"]:
        return []
    if not set(model["required_tags"]) <= set(host["tags"]):
        return []
    if set(model["forbidden_tags"]) & set(host["tags"]):
        return []
    return sorted(set(model["runtimes"]) & set(host["runtimes"]))


def _usable_mb(host: dict[str, Any]) -> int:
    return int(host["capacity_mb"]) - int(host["reserved_mb"]) - int(host["external_mb"])


def _add_constraints(
    rng: random.Random, models: list[dict[str, Any]], hosts: list[dict[str, Any]]
) -> None:
    """A few pins (to hosts that can take the model), exclusions and exclusive models."""
    images = [m["model_id"] for m in models if m["model_id"].startswith("image")]
    for model in models:
        if model["model_id"].startswith("video") and images:
            model["colocation_excludes"] = [rng.choice(images)]
        if rng.random() < 0.06:
            fitting = [
                h["host_id"]
                for h in hosts
                if _compatible(model, h)
                and min(_footprint(model, rt) for rt in _compatible(model, h)) <= _usable_mb(h)
            ]
            if fitting:
                model["pinned_hosts"] = [rng.choice(fitting)]
                model["max_replicas"] = max(model["max_replicas"], 1)
    chats = [m for m in models if m["model_id"].startswith(("chat", "coder"))]
    for model in chats:
        if rng.random() < 0.05:
            model["max_colocated_models"] = 1  # interference-sensitive: an exclusive host


# ----------------------------------------------------------------------------- state


def _add_residencies(
    rng: random.Random, models: list[dict[str, Any]], hosts: list[dict[str, Any]], now: float
) -> None:
    """Live residencies that physically fit, cached weights, and some external engines."""
    for host in hosts:
        compatible = [(m, _compatible(m, host)) for m in models]
        compatible = [(m, rts) for m, rts in compatible if rts]
        for model, _rts in compatible:
            if rng.random() < 0.12:
                host["cached_models"].append(model["model_id"])
        if not compatible or host["state"] in {"unhealthy"}:
            continue
        room = _usable_mb(host)
        slots = host["max_models"]
        if "vllm" in host["runtimes"] and rng.random() < 0.2:
            # A pre-existing vLLM daemon Grid discovered but does not own.
            ext_mb = min(room // 3, rng.choice([8192, 16384, 24576]))
            vllm_models = [
                m for m, rts in compatible if "vllm" in rts and _footprint(m, "vllm") <= ext_mb
            ]
            if vllm_models and rng.random() < 0.5:
                model = rng.choice(vllm_models)
                model_id, ext_mb = model["model_id"], _footprint(model, "vllm")
            else:
                model_id = f"ext-{host['host_id']}"
            host["residencies"].append(
                {
                    "model_id": model_id,
                    "memory_mb": ext_mb,
                    "state": "ready",
                    "managed": False,
                    "runtime": "vllm",
                    "loaded_at": round(now - rng.uniform(3600, 604800), 1),
                }
            )
            room -= ext_mb
            slots -= 1
        wanted = rng.choice([0, 0, 1, 1, 2, 3])
        rng.shuffle(compatible)
        for model, rts in compatible:
            if wanted <= 0 or slots <= 0:
                break
            runtime = min(rts, key=lambda rt: (_footprint(model, rt), rt))
            mem = _footprint(model, runtime)
            if mem > room or any(r["model_id"] == model["model_id"] for r in host["residencies"]):
                continue
            state = _pick_state(rng, RESIDENCY_STATE_WEIGHTS)
            loaded = now - rng.uniform(60, 172800)
            host["residencies"].append(
                {
                    "model_id": model["model_id"],
                    "memory_mb": mem,
                    "state": state,
                    "managed": True,
                    "runtime": runtime,
                    "artifact_sha256": model["artifact_sha256"],
                    "loaded_at": round(loaded, 1),
                    "last_used_at": round(now - rng.uniform(5, 7200), 1),
                    "active_requests": rng.choice([0, 0, 0, 1, 2]),
                }
            )
            room -= mem
            slots -= 1
            wanted -= 1


def _demand(
    rng: random.Random, models: list[dict[str, Any]], scale: float
) -> dict[str, dict[str, Any]]:
    demand: dict[str, dict[str, Any]] = {}
    for model in models:
        roll = rng.random()
        if roll < 0.2:
            continue  # baseline only (or idle)
        inferred = roll < 0.35
        base = rng.choice([0.2, 0.5, 0.8, 1.2, 2.0, 3.5]) * rng.uniform(0.7, 1.3)
        concurrency = round(base * scale * model["replica_concurrency"], 2)
        if inferred:
            concurrency = round(min(concurrency, 1.2), 2)
        slo = model["latency_slo_ms"]
        p95 = round((slo or 4000.0) * rng.uniform(0.4, 1.4), 1)
        demand[model["model_id"]] = {
            "offered_concurrency": concurrency,
            "rpm": round(concurrency * rng.uniform(5, 40), 1),
            "queue_depth": 0.0 if inferred or rng.random() < 0.75 else float(rng.randint(1, 6)),
            "p95_ms": 0.0 if inferred else p95,
            "error_rate": 0.0 if rng.random() < 0.85 else round(rng.uniform(0.0, 0.1), 3),
            "trend": round(rng.uniform(-0.5, 0.8), 2),
            "evidence": "inferred" if inferred else "direct",
        }
    return demand


def fleet_document(
    hosts: int, models: int, seed: int, *, residencies: bool = True, now: float = DEFAULT_NOW
) -> dict[str, Any]:
    """The snapshot as a plain document (schema v1), before validation."""
    if hosts < 1 or models < 1:
        raise ValueError("a generated fleet needs at least one host and one model")
    rng = random.Random(seed)
    host_kinds = _kinds_in_proportion(rng, HOST_KINDS, [k.weight for k in HOST_KINDS], hosts)
    host_docs = [_host(rng, kind, i + 1, hosts, now) for i, kind in enumerate(host_kinds)]
    model_kinds = _kinds_in_proportion(rng, MODEL_KINDS, [k.weight for k in MODEL_KINDS], models)
    # Larger fleets per model carry more demand per model, so capacity stays contested.
    scale = max(1.0, hosts / models / 2.0)
    model_docs = [_model(rng, kind, i + 1, scale) for i, kind in enumerate(model_kinds)]
    _add_constraints(rng, model_docs, host_docs)
    if residencies:
        _add_residencies(rng, model_docs, host_docs, now)
    return {
        "schema_version": 1,
        "now": now,
        "policy": {},
        "hosts": host_docs,
        "models": model_docs,
        "demand": _demand(rng, model_docs, scale),
    }


def generate_fleet(
    hosts: int, models: int, seed: int, *, residencies: bool = True, now: float = DEFAULT_NOW
) -> FleetSnapshot:
    """A validated, deterministic fleet snapshot of `hosts` hosts and `models` model profiles."""
    return parse_snapshot(fleet_document(hosts, models, seed, residencies=residencies, now=now))


def what_if_document(snap: FleetSnapshot) -> dict[str, Any]:
    """A compact snapshot for committing as an example: no clock, defaults left out.

    `now`, heartbeats and residency timestamps are dropped, so a reader plans it "as of now"
    with every host freshly seen (the behaviour `load_snapshot` gives hand-written fleets).
    """
    doc = snap.model_dump(mode="json", exclude_defaults=True)
    doc.pop("now", None)
    for host in doc.get("hosts", []):
        host.pop("last_heartbeat", None)
        for res in host.get("residencies", []):
            res.pop("loaded_at", None)
            res.pop("last_used_at", None)
    return {"schema_version": 1, **doc}
