"""Fleet generators for planner tests.

`clean_fleet(seed)`: a seeded, reproducible fleet without live residencies (6–8 hosts, 9–12
models) whose demand exceeds its capacity, for the reference-optimum acceptance test.
`fleets()`: a Hypothesis strategy for small messy fleets — live residencies of managed models in
every state, external and manual ones, throttled and ineligible hosts, pins to missing hosts,
residencies whose artifact digest no longer matches the profile.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.fleet.snapshot import parse_snapshot
from tests.planner.fleets import NOW

Doc = dict[str, Any]

RUNTIME_SETS = [["llama.cpp"], ["llama.cpp"], ["llama.cpp", "vllm"], ["vllm"]]
HOST_RUNTIME_SETS = [["llama.cpp"], ["llama.cpp", "vllm"], ["llama.cpp", "vllm"], ["vllm"]]
BACKENDS = ["cuda", "metal", "cpu"]
TAGS = ["server", "laptop", "gpu"]
DOMAINS = ["rack-a", "rack-b", "rack-c"]
SHA_A = "a" * 64
SHA_B = "b" * 64


# ----------------------------------------------------------------------------- clean fleets


def _clean_host(rng: random.Random, i: int) -> Doc:
    roll = rng.random()
    state, throttle = "accepting", 1.0
    if roll < 0.15:
        state, throttle = "throttled", rng.choice([0.5, 0.75])
    elif roll < 0.22:
        state = rng.choice(["paused", "draining"])
    heartbeat = NOW - rng.choice([0, 5, 30])
    if rng.random() < 0.06:
        heartbeat = NOW - 400  # stale: ineligible
    return {
        "host_id": f"h{i:02d}",
        "state": state,
        "throttle_fraction": throttle,
        "capacity_mb": rng.choice([8192, 12288, 16384, 24576, 32768]),
        "reserved_mb": rng.choice([0, 0, 1024, 2048]),
        "external_mb": rng.choice([0, 0, 0, 1024]),
        "runtimes": rng.choice(HOST_RUNTIME_SETS),
        "backends": sorted(rng.sample(BACKENDS, rng.choice([1, 1, 2]))),
        "failure_domain": rng.choice(DOMAINS),
        "tags": sorted(rng.sample(TAGS, rng.choice([0, 1, 1, 2]))),
        "data_tiers": rng.choice(
            [["public", "internal"]] * 3 + [["public"], ["public", "internal", "restricted"]]
        ),
        "max_models": rng.choice([0, 0, 2, 3, 4]),
        "disk_free_mb": rng.choice([None, None, 6000, 12000, 30000]),
        "memory_bandwidth_gbps": float(rng.choice([100, 400, 800, 3000])),
        "compute_gflops": float(rng.choice([2000, 10000, 30000])),
        "last_heartbeat": heartbeat,
    }


def _clean_model(rng: random.Random, i: int, model_ids: list[str], host_ids: list[str]) -> Doc:
    memory = rng.randrange(2048, 12289, 512)
    runtimes = rng.choice(RUNTIME_SETS)
    doc: Doc = {
        "model_id": model_ids[i],
        "memory_mb": memory,
        "runtimes": runtimes,
        "backends": [] if rng.random() < 0.8 else [rng.choice(BACKENDS)],
        "priority": rng.choice([0, 50, 50, 100]),
        "min_replicas": rng.choice([0, 0, 1]),
        "max_replicas": rng.choice([1, 2, 2, 3]),
        "data_tier": rng.choice(["public", "internal", "internal", "internal", "restricted"]),
        "max_colocated_models": rng.choice([0, 0, 0, 1, 2, 3]),
        "min_failure_domains": rng.choice([1, 1, 2]),
        "artifact_size_mb": rng.randrange(1000, 9001, 500),
        "load_estimate_s": float(rng.choice([30, 60, 120])),
    }
    if "vllm" in runtimes and rng.random() < 0.5:
        doc["runtime_memory_mb"] = {"vllm": int(memory * rng.choice([0.75, 1.25]))}
    if rng.random() < 0.2:
        doc["pinned_hosts"] = [rng.choice([*host_ids, "h99-offline"])]
    if rng.random() < 0.12:
        doc["required_tags"] = [rng.choice(TAGS)]
    if rng.random() < 0.1:
        doc["forbidden_tags"] = [rng.choice(TAGS)]
    if rng.random() < 0.2:
        doc["colocation_excludes"] = [rng.choice(model_ids)]
    return doc


def _clean_demand(rng: random.Random, prof: Doc) -> Doc | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    evidence = "inferred" if rng.random() < 0.2 else "direct"
    if roll < 0.6:
        return {"desired_replicas": rng.randint(0, 3), "evidence": evidence}
    return {
        "offered_concurrency": round(rng.uniform(0.1, 2.5), 2),
        "queue_depth": float(rng.choice([0, 0, 1, 3])),
        "p95_ms": float(rng.choice([0, 500, 4000])),
        "error_rate": rng.choice([0.0, 0.0, 0.1]),
        "rpm": float(rng.randint(0, 60)),
        "evidence": evidence,
    }


def clean_fleet(seed: int) -> FleetSnapshot:
    """A reproducible clean fleet, tight enough that usually not every replica fits."""
    rng = random.Random(seed)
    hosts = [_clean_host(rng, i) for i in range(rng.randint(6, 8))]
    host_ids = [h["host_id"] for h in hosts]
    model_ids = [f"m{i:02d}" for i in range(rng.randint(9, 12))]
    models = [_clean_model(rng, i, model_ids, host_ids) for i in range(len(model_ids))]
    demand = {}
    for prof in models:
        entry = _clean_demand(rng, prof)
        if entry is not None:
            demand[prof["model_id"]] = entry
    for h in hosts:
        h["cached_models"] = sorted(rng.sample(model_ids, rng.choice([0, 1, 2])))
    # Size models against the typical host: a host holds one to a few of them, and the
    # fleet is asked for more than it holds (the acceptance test checks that it is).
    allocs = sorted(max(0, h["capacity_mb"] - h["reserved_mb"] - h["external_mb"]) for h in hosts)
    typical = allocs[len(allocs) // 2]
    for prof in models:
        memory = prof["memory_mb"]
        prof["memory_mb"] = int(typical * rng.uniform(0.12, 0.55)) // 256 * 256
        if "runtime_memory_mb" in prof:
            prof["runtime_memory_mb"] = {
                rt: int(prof["memory_mb"] * mb / memory) // 256 * 256
                for rt, mb in prof["runtime_memory_mb"].items()
            }
    doc = {"schema_version": 1, "now": NOW, "hosts": hosts, "models": models, "demand": demand}
    return parse_snapshot(doc)


# ----------------------------------------------------------------------------- Hypothesis

# Hypothesis shrinks toward the first element of `sampled_from`, so the ordinary case comes
# first and rarer cases are repeated less.
RESIDENCY_STATES = ["ready", "ready", "cached", "loading", "warming", "draining", "failed"]


@st.composite
def _residency(draw: st.DrawFn, model_ids: list[str], profiles: dict[str, Doc]) -> Doc:
    model_id = draw(st.sampled_from(model_ids))
    prof = profiles[model_id]
    owner = draw(st.sampled_from(["managed", "managed", "managed", "external", "manual"]))
    state = draw(st.sampled_from(RESIDENCY_STATES))
    extra = draw(st.sampled_from([0, 0, 512]))
    doc: Doc = {
        "model_id": model_id,
        "memory_mb": 0 if state == "cached" else prof["memory_mb"] + extra,
        "state": state,
        "managed": owner == "managed",
        "last_used_at": NOW - draw(st.sampled_from([10, 300, 5000])),
        "loaded_at": NOW - 20_000,
        "active_requests": draw(st.sampled_from([0, 0, 1])),
    }
    if owner == "manual":
        doc["ownership"] = "manual"
    digest = draw(st.sampled_from(["profile", "profile", "profile", "none", "other"]))
    if digest == "profile" and prof.get("artifact_sha256"):
        doc["artifact_sha256"] = prof["artifact_sha256"]
    elif digest == "other":
        doc["artifact_sha256"] = SHA_B  # an older revision of the weights
    return doc


@st.composite
def _host(draw: st.DrawFn, i: int, model_ids: list[str], profiles: dict[str, Doc]) -> Doc:
    state = draw(st.sampled_from(["accepting"] * 8 + ["throttled"] * 3 + ["paused", "draining"]))
    age = draw(st.sampled_from([0, 0, 10, 60, 0, 10, 0, 30, 200, -120]))  # 200: stale; -120: future
    residencies: dict[str, Doc] = {}
    for res in draw(st.lists(_residency(model_ids, profiles), max_size=2)):
        residencies.setdefault(res["model_id"], res)  # one residency per model per host
    return {
        "host_id": f"h{i}",
        "state": state,
        "throttle_fraction": draw(st.sampled_from([0.5, 0.8])) if state == "throttled" else 1.0,
        "capacity_mb": draw(st.sampled_from([8192, 12288, 6144, 16384])),
        "reserved_mb": draw(st.sampled_from([0, 1024])),
        "external_mb": draw(st.sampled_from([0, 0, 2048])),
        "runtimes": draw(st.sampled_from(HOST_RUNTIME_SETS)),
        "failure_domain": draw(st.sampled_from(["rack-a", "rack-b", None])),
        "tags": draw(st.sampled_from([[], ["server"], ["laptop"]])),
        "max_models": draw(st.sampled_from([0, 3, 0, 2, 0, 1])),
        "disk_free_mb": draw(st.sampled_from([None, 20000, 3000])),
        "cached_models": draw(st.lists(st.sampled_from(model_ids), max_size=2, unique=True)),
        "ownership": draw(st.sampled_from(["managed"] * 12 + ["manual"])),
        "last_heartbeat": NOW - age,
        "residencies": list(residencies.values()),
    }


@st.composite
def _model(draw: st.DrawFn, model_id: str, model_ids: list[str]) -> Doc:
    memory = draw(st.sampled_from([2048, 3072, 4096, 1024, 6144]))
    min_r = draw(st.sampled_from([0, 0, 1]))
    doc: Doc = {
        "model_id": model_id,
        "memory_mb": memory,
        "runtimes": draw(st.sampled_from(RUNTIME_SETS)),
        "priority": draw(st.sampled_from([10, 0, 10, 50])),
        "min_replicas": min_r,
        "max_replicas": draw(st.sampled_from([2, 1, 3])),
        "max_colocated_models": draw(st.sampled_from([0, 0, 0, 0, 2, 1])),
        "min_failure_domains": draw(st.sampled_from([1, 1, 2])),
        "artifact_size_mb": draw(st.sampled_from([1000, 0, 2500])),
        "artifact_sha256": draw(st.sampled_from([None, SHA_A])),
        "min_residency_s": draw(st.sampled_from([0.0, 300.0])),
        "pinned_hosts": draw(st.sampled_from([[], [], [], ["h0"], ["h1"], ["ghost"]])),
        "forbidden_tags": draw(st.sampled_from([[], [], ["laptop"]])),
        "colocation_excludes": draw(
            st.sampled_from([[], [], [], [draw(st.sampled_from(model_ids))]])
        ),
    }
    if "vllm" in doc["runtimes"] and draw(st.booleans()):
        doc["runtime_memory_mb"] = {"vllm": memory + draw(st.sampled_from([-1024, 1024]))}
    return doc


@st.composite
def _demand(draw: st.DrawFn) -> Doc | None:
    kind = draw(st.sampled_from(["override", "forecast", "override", "forecast", "none"]))
    if kind == "none":
        return None
    evidence = draw(st.sampled_from(["direct", "direct", "inferred"]))
    if kind == "override":
        return {"desired_replicas": draw(st.sampled_from([1, 2, 3, 0])), "evidence": evidence}
    return {
        "offered_concurrency": draw(st.sampled_from([1.0, 0.3, 2.0, 0.0])),
        "queue_depth": draw(st.sampled_from([0.0, 0.0, 2.0])),
        "rpm": draw(st.sampled_from([5.0, 0.0])),
        "evidence": evidence,
    }


@st.composite
def fleets(draw: st.DrawFn, max_hosts: int = 5, max_models: int = 6) -> FleetSnapshot:
    """Small messy fleets: every residency state and owner, ineligible hosts, stale pins."""
    n_models = draw(st.sampled_from([n for n in (4, 3, 5, 2, 6, 1) if n <= max_models]))
    n_hosts = draw(st.sampled_from([n for n in (3, 4, 2, 5, 1) if n <= max_hosts]))
    model_ids = [f"m{i}" for i in range(n_models)]
    models = [draw(_model(m, model_ids)) for m in model_ids]
    profiles = {p["model_id"]: p for p in models}
    hosts = [draw(_host(i, model_ids, profiles)) for i in range(n_hosts)]
    demand = {}
    for m in model_ids:
        entry = draw(_demand())
        if entry is not None:
            demand[m] = entry
    doc = {
        "schema_version": 1,
        "now": NOW,
        "policy": {"memory_headroom_fraction": draw(st.sampled_from([0.05, 0.0, 0.1]))},
        "hosts": hosts,
        "models": models,
        "demand": demand,
    }
    return parse_snapshot(doc)
