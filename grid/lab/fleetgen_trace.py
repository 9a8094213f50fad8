"""Trace-shaped GPU fleets: racks of 32 nodes as failure domains, ten GPU types (pure).

Shaped after the 4,278-node GPU cluster of a public production trace (Alibaba's GPU-cluster
spot trace, `node_info_df.csv`: 4,278 nodes; three GPU kinds on all but a handful of them,
each on about a third of the nodes — A100-SXM4-80GB nodes with 4 or 8 GPUs, single-GPU A10
nodes, and an unnamed series with one or two GPUs per node — and a tail of rare kinds; 13 node
configurations). Here: ten GPU types (`gpu:<type>` tags) in thirteen node configurations, the
three large kinds at those shares and seven rare ones; nodes are racked 32 to a rack, each rack
one configuration and one failure domain (`rack-N`), as real rows are built. Of the models
(default 300), a third ask for one GPU type (chosen by node count among the types whose nodes
hold them), a third need two failure domains, priorities 10/50/100 with required baselines
from 50, Zipf-skewed demand (fleetgen_production.zipf_demand). No residencies: hosts group
into one host type per rack (types.py: the failure domain is in the signature once a model
asks for domain spread). Everything comes from one `random.Random(seed)`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from grid.fleet import FleetSnapshot, parse_snapshot
from grid.lab.fleetgen_production import (
    apportion,
    document,
    model_document,
    model_kinds,
    zipf_demand,
)

DEFAULT_NOW = 1785300000.0
TRACE_HOSTS = 4278  # the trace's cluster; the shares below reproduce its node counts there
RACK_SIZE = 32  # nodes per rack (one failure domain)
GPU_CONSTRAINED_SHARE = 1 / 3
SPREAD_SHARE = 1 / 3  # of the models, asking for two failure domains


@dataclass(frozen=True)
class NodeConfig:
    gpu_type: str
    gpus: int
    gpu_mb: int  # memory per GPU
    share: float  # of the fleet's nodes
    max_models: int


CONFIGS: tuple[NodeConfig, ...] = (
    NodeConfig("a100-80g", 8, 81920, 0.2340, 8),
    NodeConfig("a100-80g", 4, 81920, 0.0989, 4),
    NodeConfig("a10", 1, 24576, 0.3336, 2),
    NodeConfig("series-1", 1, 49152, 0.2800, 2),
    NodeConfig("series-1", 2, 49152, 0.0526, 3),
    NodeConfig("a100-40g", 8, 40960, 0.0005, 8),
    NodeConfig("series-2", 8, 98304, 0.0002, 8),
    NodeConfig("a30", 1, 24576, 0.0002, 2),
    NodeConfig("v100", 8, 32768, 0.0000, 8),
    NodeConfig("t4", 1, 16384, 0.0000, 1),
    NodeConfig("l4", 1, 24576, 0.0000, 2),
    NodeConfig("h800", 8, 81920, 0.0000, 8),
    NodeConfig("v100", 4, 32768, 0.0000, 4),
)


def _node_counts(n_hosts: int) -> list[int]:
    """Nodes per configuration: the shares, with at least one node of each GPU type when the
    fleet has room (the rare types of the trace have one or two nodes)."""
    counts = apportion(n_hosts, [max(c.share, 1e-6) for c in CONFIGS])
    present = {c.gpu_type for c, n in zip(CONFIGS, counts, strict=True) if n}
    for i, cfg in enumerate(CONFIGS):
        if cfg.gpu_type in present:
            continue
        largest = max(range(len(counts)), key=lambda j: counts[j])
        if counts[largest] > 1:
            counts[largest] -= 1
            counts[i] += 1
            present.add(cfg.gpu_type)
    return counts


def _hosts(n_hosts: int, now: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rack = 0
    for cfg, count in zip(CONFIGS, _node_counts(n_hosts), strict=True):
        memory = cfg.gpus * cfg.gpu_mb
        prefix = f"{cfg.gpu_type}x{cfg.gpus}"
        for i in range(count):
            if i % RACK_SIZE == 0:
                rack += 1  # racks hold one configuration
            out.append(
                {
                    "host_id": f"{prefix}-{i + 1:05d}",
                    "state": "accepting",
                    "capacity_mb": memory,
                    "reserved_mb": min(16384, memory // 16),
                    "runtimes": ["llama.cpp"],
                    "backends": ["cuda"],
                    "failure_domain": f"rack-{rack:04d}",
                    "tags": ["server", "datacenter", "gpu", f"gpu:{cfg.gpu_type}"],
                    "data_tiers": ["public", "internal", "confidential"],
                    "max_models": cfg.max_models,
                    "disk_free_mb": 500_000 * max(1, cfg.gpus // 2),
                    "memory_bandwidth_gbps": 600.0 * cfg.gpus,
                    "compute_gflops": 30_000.0 * cfg.gpus,
                    "last_heartbeat": now - 1.0,
                    "residencies": [],
                }
            )
    return out


def _models(rng: random.Random, n_models: int, hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nodes: dict[str, int] = {}
    largest: dict[str, int] = {}
    for h in hosts:
        gpu = h["tags"][-1]
        nodes[gpu] = nodes.get(gpu, 0) + 1
        largest[gpu] = max(largest.get(gpu, 0), h["capacity_mb"] - h["reserved_mb"])
    kinds = model_kinds(rng, n_models)
    constrained = set(rng.sample(range(n_models), round(n_models * GPU_CONSTRAINED_SHARE)))
    spread_models = set(rng.sample(range(n_models), round(n_models * SPREAD_SHARE)))
    out: list[dict[str, Any]] = []
    for index, (prefix, (low, high)) in enumerate(kinds, start=1):
        memory = rng.randint(low, high) // 256 * 256
        required: list[str] = []
        fitting = sorted(g for g, mb in largest.items() if mb >= memory)
        if fitting and index - 1 in constrained:
            required = [rng.choices(fitting, weights=[nodes[g] for g in fitting])[0]]
        priority = rng.choice([10, 10, 50, 50, 100])
        spread = 2 if index - 1 in spread_models else 1
        model_id = f"{prefix}-{index:04d}"
        out.append(model_document(rng, model_id, memory, priority, ["cuda"], required, spread))
    return out


def trace_document(
    hosts: int = TRACE_HOSTS, models: int = 300, seed: int = 64, *, now: float = DEFAULT_NOW
) -> dict[str, Any]:
    """The trace-shaped snapshot as a plain document (schema v1), before validation."""
    if hosts < 1 or models < 1:
        raise ValueError("a generated fleet needs at least one host and one model")
    rng = random.Random(seed)
    host_docs = _hosts(hosts, now)
    model_docs = _models(rng, models, host_docs)
    return document(now, host_docs, model_docs, zipf_demand(rng, model_docs, hosts))


def generate_trace_fleet(
    hosts: int = TRACE_HOSTS, models: int = 300, seed: int = 64, *, now: float = DEFAULT_NOW
) -> FleetSnapshot:
    """A validated, deterministic trace-shaped snapshot."""
    return parse_snapshot(trace_document(hosts, models, seed, now=now))
