"""Logical machines and the model catalogue of the scenario lab (pure, seeded).

Machine kinds (the spec's three configurations; numbers are modeled, nothing runs):

| kind          | runtimes                  | backend | memory GB     | disk GB    | slots | perf |
|---------------|---------------------------|---------|---------------|------------|-------|------|
| apple-metal   | llama.cpp                 | metal   | 16, 24, 36    | 60, 120    | 2     | 1.0  |
| comfyui-mps   | comfyui                   | mps     | 24, 32        | 80, 160    | 1     | 0.8  |
| nvidia        | vllm, llama.cpp, comfyui  | cuda    | 48, 80        | 200, 400   | 4     | 3.0  |

`perf` multiplies a replica's device-time capacity (a request's base service time is divided by
it). A ComfyUI/MPS node is a one-model logical node (`max_models` 1). Some artifacts are cached
on some machines from the start (seeded). The fleet for N machines follows a fixed kind pattern
so that every N >= 2 has an NVIDIA host and N >= 3 a ComfyUI/MPS host; sizes are seeded.

Models: the first M entries of `CATALOGUE` (M >= 1; M above its length cycles variants with a
suffix). The first one is the baseline (min_replicas 1): operations traffic names it directly.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from grid.fleet import Host, ModelProfile

GB = 1024


@dataclass(frozen=True)
class MachineKind:
    name: str
    prefix: str
    runtimes: tuple[str, ...]
    backend: str
    memory_gb: tuple[int, ...]
    disk_gb: tuple[int, ...]
    slots: int
    perf: float
    bandwidth_mb_s: float  # artifact download speed (modeled disk / cold-start seconds)


APPLE = MachineKind(
    "apple-metal", "mac", ("llama.cpp",), "metal", (16, 24, 36), (60, 120), 2, 1.0, 400.0
)
MPS = MachineKind("comfyui-mps", "mps", ("comfyui",), "mps", (24, 32), (80, 160), 1, 0.8, 400.0)
NVIDIA = MachineKind(
    "nvidia", "gpu", ("vllm", "llama.cpp", "comfyui"), "cuda", (48, 80), (200, 400), 4, 3.0, 1000.0
)
KINDS = {k.name: k for k in (APPLE, MPS, NVIDIA)}
PATTERN = (NVIDIA, APPLE, MPS, APPLE, NVIDIA, APPLE, APPLE, MPS)


@dataclass(frozen=True)
class Machine:
    """A logical machine: its host row and the lab-only physics facts."""

    host: Host
    kind: MachineKind
    disk_mb: int  # total modeled artifact disk

    @property
    def host_id(self) -> str:
        return self.host.host_id


@dataclass(frozen=True)
class ModelSpec:
    model_id: str
    memory_gb: float
    runtimes: tuple[str, ...]
    scores: tuple[tuple[str, float], ...]
    concurrency: float
    backends: tuple[str, ...] = ()
    artifact_gb: float = 0.0  # 0: same as memory


CATALOGUE: tuple[ModelSpec, ...] = (
    ModelSpec(
        "general-3b",
        3,
        ("llama.cpp", "vllm"),
        (
            ("general", 0.7),
            ("research", 0.5),
            ("marketing", 0.5),
            ("sales", 0.55),
            ("design", 0.4),
            ("coding", 0.3),
        ),
        3.0,
    ),
    ModelSpec("coder-7b", 6, ("llama.cpp", "vllm"), (("coding", 0.92), ("general", 0.4)), 2.0),
    ModelSpec("sdxl-image", 10, ("comfyui",), (("image", 0.85),), 1.0),
    ModelSpec(
        "general-14b",
        12,
        ("llama.cpp", "vllm"),
        (
            ("general", 0.9),
            ("research", 0.9),
            ("marketing", 0.8),
            ("sales", 0.8),
            ("design", 0.7),
            ("coding", 0.6),
        ),
        2.0,
    ),
    ModelSpec("embed-small", 1, ("llama.cpp", "vllm"), (("embedding", 0.95),), 8.0),
    ModelSpec("wan-video", 30, ("comfyui",), (("video", 0.85),), 1.0, backends=("cuda",)),
    ModelSpec(
        "writer-8b",
        7,
        ("llama.cpp", "vllm"),
        (("marketing", 0.95), ("sales", 0.92), ("design", 0.75), ("general", 0.6)),
        2.0,
    ),
    ModelSpec("coder-32b", 24, ("vllm",), (("coding", 1.0), ("research", 0.5)), 2.0),
    ModelSpec("flux-image", 16, ("comfyui",), (("image", 0.95), ("design", 0.3)), 1.0),
    ModelSpec(
        "research-32b",
        22,
        ("vllm",),
        (("research", 1.0), ("general", 0.85), ("sales", 0.7)),
        2.0,
    ),
)

# Modality of each workload word: which models may serve it.
MEDIA_WORDS = {"image": "image", "video": "video", "embedding": "embedding"}


def _sha(model_id: str) -> str:
    return hashlib.sha256(f"grid-scenario-artifact\x00{model_id}".encode()).hexdigest()


def build_models(count: int) -> list[ModelProfile]:
    """The first `count` catalogue models (beyond the catalogue: numbered variants)."""
    out: list[ModelProfile] = []
    for i in range(count):
        spec = CATALOGUE[i % len(CATALOGUE)]
        model_id = (
            spec.model_id if i < len(CATALOGUE) else f"{spec.model_id}-v{i // len(CATALOGUE) + 1}"
        )
        memory = int(spec.memory_gb * GB)
        artifact = int((spec.artifact_gb or spec.memory_gb) * GB * 0.9)
        out.append(
            ModelProfile(
                model_id=model_id,
                memory_mb=memory,
                runtimes=list(spec.runtimes),
                backends=list(spec.backends),
                min_replicas=1 if i == 0 else 0,
                max_replicas=8 if i == 0 else 4,
                priority=1 if i == 0 else 0,
                artifact_size_mb=artifact,
                artifact_sha256=_sha(model_id),
                artifact_source=f"scenario://{model_id}",
                workload_scores=dict(spec.scores),
                replica_concurrency=spec.concurrency,
                expected_service_time_s=6.0,
                load_estimate_s=round(artifact / 400.0, 1),
                warm_estimate_s=round(4.0 + spec.memory_gb / 2, 1),
                min_residency_s=300.0,
                scale_down_cooldown_s=600.0,
            )
        )
    return out


def build_machines(count: int, seed: int, models: list[ModelProfile]) -> list[Machine]:
    """`count` logical machines (kind pattern fixed, sizes and warm caches seeded)."""
    rng = random.Random(f"machines:{seed}:{count}")
    seen: dict[str, int] = {}
    out: list[Machine] = []
    for i in range(count):
        kind = PATTERN[i % len(PATTERN)]
        seen[kind.prefix] = seen.get(kind.prefix, 0) + 1
        host_id = f"{kind.prefix}-{seen[kind.prefix]:02d}"
        memory_mb = rng.choice(kind.memory_gb) * GB
        disk_mb = rng.choice(kind.disk_gb) * GB
        compatible = [m for m in models if set(m.runtimes) & set(kind.runtimes)]
        compatible = [m for m in compatible if not m.backends or kind.backend in m.backends]
        cached: list[str] = []
        used = 0
        for m in compatible:
            if rng.random() < 0.35 and used + m.artifact_size_mb <= disk_mb // 2:
                cached.append(m.model_id)
                used += m.artifact_size_mb
        host = Host(
            host_id=host_id,
            capacity_mb=memory_mb,
            reserved_mb=2 * GB if kind is APPLE else GB,
            runtimes=list(kind.runtimes),
            backends=[kind.backend],
            failure_domain=f"room-{(i % 3) + 1}",
            tags=[kind.name],
            max_models=kind.slots,
            disk_free_mb=disk_mb - used,
            cached_models=sorted(cached),
            compute_gflops=kind.perf * 100.0,
            last_heartbeat=0.0,
        )
        out.append(Machine(host=host, kind=kind, disk_mb=disk_mb))
    return out


def compatible(machine: Machine, model: ModelProfile) -> bool:
    """Runtime, backend and raw memory compatibility (the lab's structural feasibility)."""
    h = machine.host
    if not set(model.runtimes) & set(h.runtimes):
        return False
    if model.backends and not set(model.backends) & set(h.backends):
        return False
    return model.memory_mb <= h.capacity_mb - h.reserved_mb


def serves(model: ModelProfile, workload: str) -> float:
    """The model's suitability for a workload word (0: it cannot serve it)."""
    return model.workload_scores.get(workload, 0.0)


def designated(models: list[ModelProfile], machines: list[Machine], workload: str) -> str | None:
    """The most suitable model for `workload` that some machine can hold (ties: smaller, id)."""
    fits = [
        m for m in models if serves(m, workload) > 0 and any(compatible(x, m) for x in machines)
    ]
    if not fits:
        return None
    best = max(fits, key=lambda m: (serves(m, workload), -m.memory_mb, m.model_id))
    return best.model_id
