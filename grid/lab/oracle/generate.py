"""Seeded generator of realistic oracle traces (pure: the same arguments give the same trace).

A workday starting at `start_hour`: every model has a base load and one or two diurnal peaks
(morning and afternoon surges, a lunch dip), multiplicative noise minute to minute, and bursts;
hosts come in a few kinds (so identical hosts exist, as in real fleets), a few hosts have an
outage, and some start with initial replicas. Demand is sized so that the peaks compete for
memory: the oracle has real choices. Values carry three decimals (exact in the oracle's scale).
"""

from __future__ import annotations

import math
import random
from typing import Any

from grid.lab.oracle.trace import Trace, parse_trace

HOST_KINDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (  # name, MB, slots, runtimes
    ("gpu80", 81920, 4, ("llama.cpp", "vllm")),
    ("gpu48", 49152, 3, ("llama.cpp", "vllm")),
    ("gpu24", 24576, 2, ("llama.cpp", "vllm")),
    ("mac64", 65536, 3, ("llama.cpp", "mlx")),
    ("cpu32", 32768, 2, ("llama.cpp",)),
)
MODEL_KINDS: tuple[tuple[str, int, tuple[str, ...], float], ...] = (  # name, MB, runtimes, conc
    ("coder-32b", 36000, ("llama.cpp", "vllm"), 4.0),
    ("chat-8b", 9000, ("llama.cpp", "vllm", "mlx"), 6.0),
    ("chat-70b", 45000, ("vllm", "llama.cpp"), 3.0),
    ("embed", 1500, ("llama.cpp", "vllm", "mlx"), 16.0),
    ("coder-7b", 8000, ("llama.cpp", "mlx"), 6.0),
    ("vision-11b", 14000, ("vllm",), 3.0),
    ("research-27b", 30000, ("llama.cpp", "mlx", "vllm"), 3.0),
    ("small-3b", 4000, ("llama.cpp", "mlx"), 8.0),
    ("image-sdxl", 12000, ("vllm",), 2.0),
)


def _curve(rng: random.Random, minutes: int, start_hour: float, level: float) -> list[float]:
    peaks = [(rng.uniform(9.5, 11.5), rng.uniform(0.6, 1.4)), (rng.uniform(13.5, 16.5), 1.0)]
    if rng.random() < 0.4:
        peaks = peaks[:1] if rng.random() < 0.5 else peaks[1:]
    base = rng.uniform(0.05, 0.3)
    burst_at = rng.randrange(minutes)
    burst_len = rng.randint(10, 40)
    out = []
    noise = 1.0
    for t in range(minutes):
        hour = start_hour + t / 60.0
        shape = base + sum(w * math.exp(-(((hour - c) / 1.1) ** 2)) for c, w in peaks)
        if 12.0 <= hour < 13.0:
            shape *= 0.7  # lunch
        if burst_at <= t < burst_at + burst_len:
            shape *= 1.8
        noise = 0.8 * noise + 0.2 * rng.lognormvariate(0.0, 0.25)
        out.append(round(max(0.0, level * shape * noise), 3))
    return out


def generate_document(
    hosts: int, models: int, minutes: int, seed: int, *, start_hour: float = 8.0
) -> dict[str, Any]:
    """A trace document (JSON-ready) with `hosts` hosts and `models` models."""
    rng = random.Random(seed)
    host_docs: list[dict[str, Any]] = []
    kinds = [HOST_KINDS[rng.randrange(3)] for _ in range(max(1, hosts // 2))]
    for i in range(hosts):
        name, cap, slots, runtimes = kinds[i % len(kinds)] if i % 2 else rng.choice(HOST_KINDS)
        host_docs.append(
            {
                "host_id": f"{name}-{i:02d}",
                "capacity_mb": cap,
                "max_models": slots,
                "runtimes": list(runtimes),
                "down": [],
            }
        )
    for i in rng.sample(range(hosts), k=max(0, hosts // 8)):
        start = rng.randrange(minutes // 4, max(minutes // 4 + 1, minutes - 30))
        host_docs[i]["down"] = [[start, min(minutes, start + rng.randint(15, 60))]]
    model_docs: list[dict[str, Any]] = []
    for j in range(models):
        name, mem, runtimes, conc = MODEL_KINDS[j % len(MODEL_KINDS)]
        model_docs.append(
            {
                "model_id": f"{name}-{j:02d}" if j >= len(MODEL_KINDS) else name,
                "memory_mb": mem,
                "runtimes": list(runtimes),
                "replica_concurrency": conc,
            }
        )
    total_mb = sum(h["capacity_mb"] for h in host_docs)
    need_mb = sum(m["memory_mb"] for m in model_docs)
    # at the peaks, demand asks for about 1.4× the replicas that the fleet's memory can hold
    replicas_per_model = 1.4 * total_mb / max(1, need_mb)
    demand = {
        m["model_id"]: _curve(
            rng,
            minutes,
            start_hour,
            m["replica_concurrency"] * replicas_per_model * rng.uniform(0.4, 1.2),
        )
        for m in model_docs
    }
    initial = []
    for h in host_docs[: hosts // 4]:
        fits = [
            m
            for m in model_docs
            if m["memory_mb"] <= h["capacity_mb"] and set(m["runtimes"]) & set(h["runtimes"])
        ]
        if fits:
            initial.append({"model_id": rng.choice(fits)["model_id"], "host_id": h["host_id"]})
    return {
        "schema_version": 1,
        "minutes": minutes,
        "hold_minutes": 2,
        "load_minutes": 1,
        "hosts": host_docs,
        "models": model_docs,
        "demand": demand,
        "initial": initial,
    }


def generate_trace(hosts: int, models: int, minutes: int, seed: int) -> Trace:
    return parse_trace(generate_document(hosts, models, minutes, seed))
