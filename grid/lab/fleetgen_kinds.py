"""The catalogue the fleet generator draws from: host kinds, model kinds, residency states.

Data only: each kind gives the ranges and choices `grid.lab.fleetgen` samples from, with weights
that set the mix of a generated fleet. Changing a value here changes every generated fleet
(and models/fleets/fleet-64.json must then be regenerated).
"""

from __future__ import annotations

from dataclasses import dataclass

TIERS_ALL = ["public", "internal", "confidential"]
TIERS_OFFICE = ["public", "internal"]


@dataclass(frozen=True)
class HostKind:
    prefix: str
    weight: float
    capacities_mb: tuple[int, ...]
    reserved_mb: tuple[int, int]
    runtimes: tuple[str, ...]
    optional_runtimes: tuple[str, ...]  # each added with probability 0.3
    backends: tuple[str, ...]
    tags: tuple[str, ...]
    tiers: tuple[str, ...]
    max_models: tuple[int, ...]
    disk_mb: tuple[int, int]
    bandwidth_gbps: tuple[float, float]
    compute_gflops: tuple[float, float]
    site: str  # "rack" (datacenter), "floor" (office desks), "roaming" (own domain)


HOST_KINDS: tuple[HostKind, ...] = (
    HostKind(
        "gpu-h100",
        0.10,
        (81920,),
        (4096, 8192),
        ("llama.cpp", "vllm"),
        ("comfyui",),
        ("cuda",),
        ("server", "gpu", "datacenter"),
        tuple(TIERS_ALL),
        (4, 6, 8),
        (400_000, 2_000_000),
        (2000.0, 3350.0),
        (50_000.0, 67_000.0),
        "rack",
    ),
    HostKind(
        "gpu-l40s",
        0.10,
        (49152,),
        (4096, 6144),
        ("llama.cpp", "vllm"),
        ("comfyui",),
        ("cuda",),
        ("server", "gpu", "datacenter"),
        tuple(TIERS_ALL),
        (3, 4, 6),
        (300_000, 1_000_000),
        (700.0, 900.0),
        (80_000.0, 90_000.0),
        "rack",
    ),
    HostKind(
        "cpu",
        0.07,
        (131072, 262144),
        (8192, 16384),
        ("llama.cpp",),
        (),
        ("cpu",),
        ("server", "cpu", "datacenter"),
        tuple(TIERS_ALL),
        (4, 6, 8),
        (200_000, 1_000_000),
        (150.0, 300.0),
        (2_000.0, 5_000.0),
        "rack",
    ),
    HostKind(
        "ws-4090",
        0.10,
        (24576,),
        (2048, 4096),
        ("llama.cpp", "comfyui"),
        (),
        ("cuda",),
        ("workstation", "gpu"),
        tuple(TIERS_OFFICE),
        (2, 3),
        (100_000, 800_000),
        (900.0, 1008.0),
        (70_000.0, 82_000.0),
        "floor",
    ),
    HostKind(
        "mac-studio",
        0.18,
        (65536, 98304, 131072, 196608),
        (8192, 16384),
        ("llama.cpp",),
        ("comfyui",),
        ("metal",),
        ("mac", "desk"),
        tuple(TIERS_OFFICE),
        (2, 3, 4),
        (100_000, 600_000),
        (400.0, 800.0),
        (14_000.0, 27_000.0),
        "floor",
    ),
    HostKind(
        "mac-mini",
        0.10,
        (24576, 32768, 65536),
        (6144, 8192),
        ("llama.cpp",),
        (),
        ("metal",),
        ("mac", "desk"),
        tuple(TIERS_OFFICE),
        (1, 2, 3),
        (60_000, 400_000),
        (120.0, 273.0),
        (4_000.0, 9_000.0),
        "floor",
    ),
    HostKind(
        "laptop-mac",
        0.28,
        (16384, 24576, 36864, 49152),
        (6144, 8192),
        ("llama.cpp",),
        (),
        ("metal",),
        ("laptop", "employee"),
        ("public",),
        (1, 2),
        (10_000, 200_000),
        (100.0, 400.0),
        (3_000.0, 14_000.0),
        "roaming",
    ),
    HostKind(
        "laptop-linux",
        0.07,
        (16384, 32768),
        (4096, 8192),
        ("llama.cpp",),
        (),
        ("cpu",),
        ("laptop", "employee"),
        ("public",),
        (1, 2),
        (10_000, 150_000),
        (50.0, 90.0),
        (500.0, 1_500.0),
        "roaming",
    ),
)


@dataclass(frozen=True)
class ModelKind:
    prefix: str
    weight: float
    memory_mb: tuple[int, int]
    vllm_factor: float | None  # vLLM footprint = memory x factor (None: no vLLM build)
    runtimes: tuple[str, ...]
    backends: tuple[str, ...]
    priorities: tuple[int, ...]
    max_replicas: tuple[int, ...]
    tiers: tuple[str, ...]
    workload: str
    replica_concurrency: tuple[float, ...]
    load_s: tuple[float, float]
    max_colocated: tuple[int, ...]  # 0: unlimited
    required_tags: tuple[str, ...] = ()


MODEL_KINDS: tuple[ModelKind, ...] = (
    ModelKind(
        "chat-70b",
        0.08,
        (40_000, 46_000),
        1.25,
        ("llama.cpp", "vllm"),
        (),
        (50, 100),
        (1, 2, 3),
        ("internal", "confidential"),
        "general",
        (2.0, 4.0),
        (120.0, 240.0),
        (0, 0, 2),
    ),
    ModelKind(
        "coder",
        0.14,
        (9_000, 24_000),
        1.3,
        ("llama.cpp", "vllm"),
        (),
        (50, 100),
        (2, 3, 4),
        ("internal", "confidential"),
        "coding",
        (1.0, 2.0),
        (60.0, 150.0),
        (0,),
    ),
    ModelKind(
        "chat",
        0.24,
        (2_500, 9_000),
        1.6,
        ("llama.cpp", "vllm"),
        (),
        (10, 50),
        (2, 3, 4),
        ("public", "internal"),
        "general",
        (1.0, 2.0),
        (20.0, 60.0),
        (0,),
    ),
    ModelKind(
        "embed",
        0.14,
        (300, 1_600),
        None,
        ("llama.cpp",),
        (),
        (50, 80),
        (1, 2, 3),
        ("public", "internal"),
        "embedding",
        (4.0, 8.0),
        (5.0, 15.0),
        (0,),
    ),
    ModelKind(
        "image",
        0.12,
        (8_000, 16_000),
        None,
        ("comfyui",),
        ("cuda", "metal"),
        (10, 20),
        (1, 2),
        ("public", "internal"),
        "image",
        (1.0,),
        (30.0, 90.0),
        (2, 0),
    ),
    ModelKind(
        "video",
        0.08,
        (24_000, 40_000),
        None,
        ("comfyui",),
        ("cuda",),
        (10,),
        (1, 2),
        ("internal",),
        "video",
        (1.0,),
        (90.0, 200.0),
        (1,),
        ("gpu",),
    ),
    ModelKind(
        "tiny",
        0.10,
        (180, 400),
        None,
        ("llama.cpp",),
        (),
        (0, 10),
        (1, 2, 4),
        ("public",),
        "general",
        (2.0,),
        (2.0, 6.0),
        (0,),
    ),
)


RESIDENCY_STATE_WEIGHTS = (
    ("ready", 0.8),
    ("warming", 0.06),
    ("loading", 0.06),
    ("draining", 0.04),
    ("failed", 0.04),
)
