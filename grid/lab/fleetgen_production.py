"""Production-shaped fleets: few machine shapes with realistic counts (pure: seed and `now` in).

Real GPU clusters are built from a handful of shapes (a public 1,523-node cluster has 27, a
4,278-node one 10): many 1-GPU inference nodes, fewer 8-GPU nodes, some CPU nodes. Every host
of a shape is identical for the planner (same memory, slots, runtimes, backends, tags, tiers,
disk, heartbeat) except its ID and its pod (the failure domain); a GPU-type tag (`gpu:l4`,
`gpu:h100`, ...) lets a share of the models ask for a GPU type. Demand is skewed across models
(Zipf-like: a few models carry most of the traffic). No residencies: an empty fleet, so hosts
group into few types (grid.planner.types). Everything comes from one `random.Random(seed)`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from grid.fleet import FleetSnapshot, parse_snapshot

DEFAULT_NOW = 1785300000.0
POD_SIZE = 256  # hosts per pod (failure domain)
ZIPF_S = 1.1  # demand of the r-th most popular model ∝ 1 / r^s
GPU_CONSTRAINED_SHARE = 0.3  # share of GPU models that require one GPU type


@dataclass(frozen=True)
class Shape:
    prefix: str
    share: float  # of the fleet's hosts
    capacity_mb: int
    reserved_mb: int
    gpu_tag: str | None
    backends: tuple[str, ...]
    max_models: int
    disk_mb: int
    bandwidth_gbps: float
    compute_gflops: float


SHAPES: tuple[Shape, ...] = (
    Shape("inf-l4", 0.45, 24576, 1024, "gpu:l4", ("cuda",), 2, 400_000, 300.0, 30_000.0),
    Shape("inf-l40s", 0.20, 49152, 2048, "gpu:l40s", ("cuda",), 3, 800_000, 860.0, 90_000.0),
    Shape("inf-a10", 0.12, 24576, 1024, "gpu:a10", ("cuda",), 2, 400_000, 600.0, 31_000.0),
    Shape("hgx-h100", 0.08, 655360, 16384, "gpu:h100", ("cuda",), 8, 4_000_000, 3350.0, 67_000.0),
    Shape("hgx-a100", 0.07, 327680, 8192, "gpu:a100", ("cuda",), 8, 2_000_000, 1550.0, 19_500.0),
    Shape("cpu-std", 0.08, 262144, 16384, None, ("cpu",), 4, 1_000_000, 200.0, 3_000.0),
)
# (prefix, memory range MB, share of the models)
MODEL_SIZES: tuple[tuple[str, tuple[int, int], float], ...] = (
    ("small", (2_000, 9_000), 0.45),
    ("mid", (12_000, 22_000), 0.30),
    ("large", (30_000, 45_000), 0.15),
    ("xl", (70_000, 150_000), 0.10),
)


def apportion(total: int, shares: list[float]) -> list[int]:
    """Largest-remainder apportionment of `total` by shares (deterministic)."""
    exact = [total * s / sum(shares) for s in shares]
    counts = [int(e) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _hosts(n_hosts: int, now: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for shape, count in zip(SHAPES, apportion(n_hosts, [s.share for s in SHAPES]), strict=True):
        tags = ["server", "datacenter"] + (["gpu", shape.gpu_tag] if shape.gpu_tag else [])
        for i in range(count):
            out.append(
                {
                    "host_id": f"{shape.prefix}-{i + 1:05d}",
                    "state": "accepting",
                    "capacity_mb": shape.capacity_mb,
                    "reserved_mb": shape.reserved_mb,
                    "runtimes": ["llama.cpp"],
                    "backends": list(shape.backends),
                    "failure_domain": f"pod-{len(out) // POD_SIZE + 1}",
                    "tags": tags,
                    "data_tiers": ["public", "internal", "confidential"],
                    "max_models": shape.max_models,
                    "disk_free_mb": shape.disk_mb,
                    "memory_bandwidth_gbps": shape.bandwidth_gbps,
                    "compute_gflops": shape.compute_gflops,
                    "last_heartbeat": now - 1.0,
                    "residencies": [],
                }
            )
    return out


def _gpu_tags_fitting(memory_mb: int) -> list[str]:
    return [s.gpu_tag for s in SHAPES if s.gpu_tag and s.capacity_mb - s.reserved_mb >= memory_mb]


def model_kinds(rng: random.Random, n_models: int) -> list[tuple[str, tuple[int, int]]]:
    """(size prefix, memory range) per model: MODEL_SIZES apportioned, in a seeded order."""
    kinds = [
        (prefix, size)
        for (prefix, size, _share), n in zip(
            MODEL_SIZES, apportion(n_models, [s for _p, _r, s in MODEL_SIZES]), strict=True
        )
        for _ in range(n)
    ]
    rng.shuffle(kinds)
    return kinds


def _models(rng: random.Random, n_models: int) -> list[dict[str, Any]]:
    kinds = model_kinds(rng, n_models)
    out: list[dict[str, Any]] = []
    for index, (prefix, (low, high)) in enumerate(kinds, start=1):
        memory = rng.randint(low, high) // 256 * 256
        cpu_ok = prefix == "small" and rng.random() < 0.4
        required: list[str] = []
        fitting = _gpu_tags_fitting(memory)
        if not cpu_ok and fitting and rng.random() < GPU_CONSTRAINED_SHARE:
            required = [rng.choice(fitting)]
        priority = rng.choice([10, 10, 10, 50, 50, 100])
        backends = ["cuda", "cpu"] if cpu_ok else ["cuda"]
        spread = 2 if priority >= 100 else 1
        model_id = f"{prefix}-{index:04d}"
        out.append(model_document(rng, model_id, memory, priority, backends, required, spread))
    return out


def model_document(
    rng: random.Random,
    model_id: str,
    memory: int,
    priority: int,
    backends: list[str],
    required: list[str],
    min_failure_domains: int,
) -> dict[str, Any]:
    """One generated model profile: required baselines from priority 50, up to 64 replicas."""
    return {
        "model_id": model_id,
        "memory_mb": memory,
        "runtimes": ["llama.cpp"],
        "backends": backends,
        "priority": priority,
        "min_replicas": 1 if priority >= 50 else 0,
        "max_replicas": 64,
        "required_tags": required,
        "data_tier": "internal",
        "max_colocated_models": 0,
        "min_failure_domains": min_failure_domains,
        "artifact_size_mb": int(memory * 0.7),
        "replica_concurrency": rng.choice([4, 8, 16]),
        "load_estimate_s": round(5 + memory / 2000, 1),
        "warm_estimate_s": round(2 + memory / 8000, 1),
    }


def document(
    now: float,
    hosts: list[dict[str, Any]],
    models: list[dict[str, Any]],
    demand: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """A generated snapshot document (schema v1) with the default policy."""
    return {
        "schema_version": 1,
        "now": now,
        "policy": {},
        "hosts": hosts,
        "models": models,
        "demand": demand,
    }


def zipf_demand(
    rng: random.Random, models: list[dict[str, Any]], n_hosts: int
) -> dict[str, dict[str, Any]]:
    """Zipf-skewed offered concurrency, scaled so the fleet is contested but not swamped."""
    order = list(range(len(models)))
    rng.shuffle(order)
    weights = [1.0 / (rank + 1) ** ZIPF_S for rank in range(len(models))]
    total_replicas = 2.5 * n_hosts  # more than the fleet holds: the plan must choose
    demand: dict[str, dict[str, Any]] = {}
    for rank, i in enumerate(order):
        model = models[i]
        replicas = total_replicas * weights[rank] / sum(weights)
        if replicas < 0.3:
            continue
        concurrency = round(replicas * model["replica_concurrency"] * 0.7, 2)
        demand[model["model_id"]] = {
            "offered_concurrency": concurrency,
            "rpm": round(concurrency * 20, 1),
            "queue_depth": 0.0,
            "p95_ms": 0.0,
            "error_rate": 0.0,
            "trend": 0.0,
            "evidence": "direct",
        }
    return demand


def production_document(
    hosts: int, models: int, seed: int, *, now: float = DEFAULT_NOW
) -> dict[str, Any]:
    """The production-shaped snapshot as a plain document (schema v1), before validation."""
    if hosts < 1 or models < 1:
        raise ValueError("a generated fleet needs at least one host and one model")
    rng = random.Random(seed)
    model_docs = _models(rng, models)
    return document(now, _hosts(hosts, now), model_docs, zipf_demand(rng, model_docs, hosts))


def generate_production_fleet(
    hosts: int, models: int, seed: int, *, now: float = DEFAULT_NOW
) -> FleetSnapshot:
    """A validated, deterministic production-shaped snapshot."""
    return parse_snapshot(production_document(hosts, models, seed, now=now))
