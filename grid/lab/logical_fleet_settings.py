"""Settings of a logical fleet (`grid test start`): machines, model, capacity shares, ports.

A logical fleet partitions one machine into N node agents. Their capacity shares are carved out
of the memory the machine has free when the fleet starts, so the N nodes together never report
more than the machine has; an explicit `--capacities-gib` list is checked against the same bound.
"""

from __future__ import annotations

import math
from pathlib import Path

import psutil
from pydantic import BaseModel, ConfigDict, Field

from grid.fleet import GridError
from grid.node.artifacts import (
    GEMMA3_270M_MODEL_ID,
    GEMMA3_270M_SHA256,
    SMOLLM2_MODEL_ID,
    SMOLLM2_SHA256,
    gemma3_270m_path,
    sha256_file,
    smollm2_path,
)

MAX_MACHINES = 32
DEFAULT_PORT = 22100
DEFAULT_ENGINE_PORT_BASE = 39200
PORTS_PER_NODE = 10
DEFAULT_SHARE_CAP_MB = 4096
USABLE_FRACTION = 0.9  # of the memory free at start; the rest covers Grid's own processes
KNOWN_MEMORY_MB = {SMOLLM2_MODEL_ID: 256, GEMMA3_270M_MODEL_ID: 512}
# The shipped gemma GGUF carries no chat template: llama.cpp's built-in `gemma` one formats it.
KNOWN_CHAT_TEMPLATES = {GEMMA3_270M_MODEL_ID: "gemma"}


class FleetModel(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model_id: str
    path: str
    sha256: str
    memory_mb: int = Field(gt=0)
    chat_template: str | None = None  # the profile's llama.cpp template (gemma has none inside)


class CandidateModel(FleetModel):
    """A model every logical node holds but nothing pins: the allocator may load it on its own
    (`grid test start --candidate-model`), scored for the workloads named by
    `--workload-model WORKLOAD=MODEL`."""

    workload_scores: dict[str, float] = Field(default_factory=dict)


class FleetSettings(BaseModel):
    """What `grid test start` was asked for; a second start with equal settings is a no-op."""

    model_config = ConfigDict(extra="forbid")

    machines: int = Field(ge=1, le=MAX_MACHINES)
    model: FleetModel
    capacities_mb: list[int]
    port: int = Field(default=DEFAULT_PORT, gt=0, lt=65536)
    engine_port_base: int = Field(default=DEFAULT_ENGINE_PORT_BASE, ge=1024)
    heartbeat_s: float = Field(default=1.0, gt=0)
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=1, ge=0)
    priority: int = Field(default=0, ge=0)
    min_residency_s: float = Field(default=60.0, ge=0)
    scale_down_cooldown_s: float = Field(default=120.0, ge=0)
    threads: int = Field(default=1, ge=1)
    model_scores: dict[str, float] = Field(default_factory=dict)  # the baseline's workloads
    candidates: list[CandidateModel] = Field(default_factory=list)
    # Each machine on its own loopback address (127.0.0.2, ...) and the controller on TLS with a
    # generated CA: real addressing and verification on one machine (docs/addressing.md).
    distinct_addresses: bool = False

    def address(self, index: int) -> str | None:
        """The engine address machine `index` advertises (None: the shared 127.0.0.1)."""
        return f"127.0.0.{index + 2}" if self.distinct_addresses else None

    def catalog_models(self) -> list[FleetModel]:
        return [self.model, *self.candidates]

    def host_id(self, index: int) -> str:
        return f"logical-{index + 1:02d}"

    def failure_domain(self, index: int) -> str:
        return f"logical-domain-{index + 1:02d}"

    def engine_ports(self, index: int) -> tuple[int, int]:
        low = self.engine_port_base + index * PORTS_PER_NODE
        return low, low + PORTS_PER_NODE - 1


def resolve_model(name: str, weights_dir: Path, memory_mb: int | None = None) -> FleetModel:
    """A shipped model by id (smollm2-135m, gemma-3-270m) or a local GGUF by path."""
    if name == SMOLLM2_MODEL_ID:
        path, digest = smollm2_path(), SMOLLM2_SHA256
    elif name == GEMMA3_270M_MODEL_ID:
        path, digest = gemma3_270m_path(weights_dir), GEMMA3_270M_SHA256
    else:
        path = Path(name).expanduser().absolute()
        if path.suffix != ".gguf" or not path.is_file():
            raise GridError(
                "unknown_model",
                f"{name!r} is neither a shipped model ({SMOLLM2_MODEL_ID}, "
                f"{GEMMA3_270M_MODEL_ID}) nor an existing .gguf file",
                fix="pass --model smollm2-135m, --model gemma-3-270m or a GGUF path",
            )
        digest = sha256_file(path)
    model_id = path.name if name not in KNOWN_MEMORY_MB else name
    default_mb = KNOWN_MEMORY_MB.get(model_id) or max(
        256, math.ceil(path.stat().st_size / 2**20 * 2)
    )
    return FleetModel(
        model_id=model_id,
        path=str(path),
        sha256=digest,
        memory_mb=memory_mb or default_mb,
        chat_template=KNOWN_CHAT_TEMPLATES.get(model_id),
    )


def available_mb() -> int:
    return int(psutil.virtual_memory().available // 2**20)


def capacity_shares(
    machines: int, capacities_gib: list[float] | None, model_mb: int, free_mb: int
) -> list[int]:
    """Per-node capacity (MB), never more in total than the usable share of free memory."""
    usable = int(free_mb * USABLE_FRACTION)
    if capacities_gib is not None:
        if len(capacities_gib) != machines:
            raise GridError(
                "invalid_capacities",
                f"--capacities-gib lists {len(capacities_gib)} values for {machines} machines",
                fix="give exactly one capacity per logical machine",
            )
        if any(not math.isfinite(c) or c <= 0 for c in capacities_gib):
            raise GridError(
                "invalid_capacities",
                "every capacity must be a positive number of GiB",
                fix="pass values such as 2,2.5",
            )
        shares = [int(c * 1024) for c in capacities_gib]
    else:
        share = min(DEFAULT_SHARE_CAP_MB, usable // (2 * machines))
        shares = [share] * machines
    if sum(shares) > usable:
        raise GridError(
            "capacity_exceeds_machine",
            f"the logical machines would report {sum(shares)} MB together, but this machine "
            f"has only {usable} MB usable ({free_mb} MB free)",
            fix="use fewer machines or smaller --capacities-gib",
        )
    if max(shares) < model_mb:
        raise GridError(
            "capacity_too_small",
            f"no logical machine can hold the model ({model_mb} MB)",
            fix="give the machines more capacity, or use fewer of them",
        )
    return shares
