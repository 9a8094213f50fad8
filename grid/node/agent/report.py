"""What the node tells the controller: resources, the allocator envelope, residency rows.

The wire shapes are the spec's ("Local wire contract"). Residencies carry model-local ages
(`loaded_age_s`) instead of timestamps so a skewed node clock cannot bypass minimum residency;
`last_used_at` echoes the server's own watermark (its clock domain). `models` lists only what is
ready and routable now. The engine key appears in one place only: the allocator envelope of the
authenticated PUT /nodes body (`engine_key`), beside the loopback `routes` of the READY children,
so the controller's proxy can reach them; it is never logged or written by the node.

`engine_observations` is the pure crash and adoption check: it compares durable residency
records with the supervisor's view of the children and says which records change.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from grid.fleet import (
    NODE_COMMAND_KINDS,
    NodeUpdate,
    ResidencyState,
    WireAck,
    WireAllocator,
    WireLoad,
    WirePredictiveEntry,
    WireResidency,
    WireResources,
    WireRoute,
)
from grid.node.agent.config import NodeConfig
from grid.node.agent.state import ResidencyRecord
from grid.node.engines import EngineState, EngineStatus

MIB = 1024 * 1024
ENGINE_STATES = (ResidencyState.WARMING, ResidencyState.READY, ResidencyState.DRAINING)
CLAIMING = frozenset(
    {
        ResidencyState.LOADING,
        ResidencyState.WARMING,
        ResidencyState.READY,
        ResidencyState.DRAINING,
        ResidencyState.FAILED,
    }
)


@dataclass(frozen=True)
class MemoryReading:
    total_mb: int | None  # None: unknown
    available_mb: int | None
    children_rss_mb: int = 0


def read_memory(child_pids: Iterable[int]) -> MemoryReading:
    """Physical memory now, and what this node's own children hold resident."""
    total = available = None
    with contextlib.suppress(Exception):
        vm = psutil.virtual_memory()
        total, available = int(vm.total // MIB), int(vm.available // MIB)
    rss = 0
    for pid in child_pids:
        with contextlib.suppress(Exception):
            rss += int(psutil.Process(pid).memory_info().rss // MIB)
    return MemoryReading(total, available, rss)


def disk_free_mb(folder: Path, share: float) -> int | None:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    return int(free * share // MIB)


def capacity_mb(config: NodeConfig, reading: MemoryReading) -> int:
    if config.capacity_mb is not None:
        return config.capacity_mb
    return reading.total_mb or 0


def external_mb(config: NodeConfig, reading: MemoryReading) -> int:
    """Physical use that this node's children do not explain (never above the capacity)."""
    if config.external_memory == "none":
        return 0
    if reading.total_mb is None or reading.available_mb is None:
        return 0
    used = reading.total_mb - reading.available_mb
    share = capacity_mb(config, reading)
    return max(0, min(share, used - reading.children_rss_mb))


def resources_block(
    config: NodeConfig, reading: MemoryReading, disk_free: int | None
) -> WireResources:
    block = WireResources(
        capacity_mb=capacity_mb(config, reading),
        reserved_mb=config.reserved_mb,
        external_mb=external_mb(config, reading),
        runtimes=list(config.runtimes),
        backends=list(config.backends),
        memory_bandwidth_gbps=config.memory_bandwidth_gbps,
        compute_gflops=config.compute_gflops,
        failure_domain=config.failure_domain,
        tags=list(config.tags),
        data_tiers=list(config.data_tiers),
        max_models=config.max_models,
    )
    if disk_free is not None:
        block.disk_free_mb = disk_free
    if config.gpu_memory_mb:  # only then: the wire stays as it was on a host without GPUs
        block.gpu_count = len(config.gpu_memory_mb)
        block.gpu_memory_mb = list(config.gpu_memory_mb)
    return block


def residency_rows(
    records: Mapping[str, ResidencyRecord],
    active: Mapping[str, int | None],
    last_used_at: Mapping[str, float],
    now: float,
) -> list[WireResidency]:
    """One row per residency; `active` holds slot activity (None: unknown, fails safe)."""
    rows: list[WireResidency] = []
    for model_id in sorted(records):
        record = records[model_id]
        row = WireResidency(
            model_id=model_id,
            memory_mb=record.memory_mb if record.state in CLAIMING else 0,
            state=record.state,
            managed=True,
            runtime="llama.cpp",
            active_requests=active.get(model_id, 0),
        )
        if record.artifact_sha256:
            row.artifact_sha256 = record.artifact_sha256
        if record.loaded_at is not None and record.state in ENGINE_STATES:
            row.loaded_age_s = round(max(0.0, now - record.loaded_at), 3)
        if model_id in last_used_at:
            row.last_used_at = last_used_at[model_id]
        rows.append(row)
    return rows


def envelope(
    *,
    lifecycle: str,
    throttle_fraction: float,
    cached_models: Iterable[str],
    rows: list[WireResidency],
    disk_free: int | None,
    routes: list[WireRoute] | None = None,
    engine_key: str | None = None,
    predictive: list[WirePredictiveEntry] | None = None,
) -> WireAllocator:
    block = WireAllocator(
        schema_version=1,
        state=lifecycle,
        throttle_fraction=throttle_fraction,
        cached_models=sorted(set(cached_models)),
        residencies=list(rows),
        actuator_capabilities=list(NODE_COMMAND_KINDS),
    )
    if disk_free is not None:
        block.disk_free_mb = disk_free
    if predictive:
        block.predictive_cache = list(predictive)
    if routes:
        block.routes = list(routes)
        if engine_key:
            block.engine_key = engine_key
    return block


def child_routes(
    records: Mapping[str, ResidencyRecord],
    statuses: Mapping[str, EngineStatus | None],
    grants: Mapping[str, str] | None = None,
) -> list[WireRoute]:
    """The loopback route of each READY residency whose proven child is ready on a port, with
    the controller's grant for it when the node holds one (the controller uses a route only for
    a residency it commanded: grid.runtime.controller.trust)."""
    routes: list[WireRoute] = []
    for model_id in sorted(records):
        status = statuses.get(model_id)
        if (
            records[model_id].state is ResidencyState.READY
            and status is not None
            and status.proven
            and status.state is EngineState.READY
            and status.port is not None
        ):
            route = WireRoute(model_id=model_id, port=status.port)
            grant = (grants or {}).get(model_id)
            if grant:
                route.grant = grant
            routes.append(route)
    return routes


def node_body(
    config: NodeConfig,
    resources: WireResources,
    allocator: WireAllocator,
    rows: list[WireResidency],
    *,
    request_commands: bool,
    acknowledgements: list[WireAck],
    active_tasks: int,
) -> NodeUpdate:
    """Registration and heartbeat share one body: the controller may have restarted and
    forgotten this host (membership is not durable), so every update re-states everything."""
    return NodeUpdate(
        node_id=config.record_id,
        role="allocator",
        host_id=config.host_id,
        models=[r.model_id for r in rows if r.state is ResidencyState.READY],
        resources=resources,
        allocator=allocator,
        load=WireLoad(active_tasks=active_tasks, queue_depth=0),
        request_commands=request_commands,
        acknowledgements=acknowledgements,
    )


@dataclass(frozen=True)
class EngineChange:
    model_id: str
    state: ResidencyState
    reason: str


def engine_observations(
    records: Mapping[str, ResidencyRecord],
    statuses: Mapping[str, EngineStatus],
    busy_model: str | None,
) -> list[EngineChange]:
    """Records the supervisor's view contradicts (pure).

    A residency that should have a process (warming, ready, draining) and has none, or whose
    process cannot be proved, becomes FAILED: a crash is detected, and an unprovable process is
    fenced. A FAILED record whose proven child is alive and ready again (adopted after a restart)
    returns to READY. The model the worker is acting on right now is left to the worker.
    """
    changes: list[EngineChange] = []
    for model_id, record in sorted(records.items()):
        if model_id == busy_model:
            continue
        status = statuses.get(model_id)
        if record.state in ENGINE_STATES:
            if status is None:
                changes.append(
                    EngineChange(model_id, ResidencyState.FAILED, "the engine process is gone")
                )
            elif status.state is EngineState.FAILED:
                why = status.reason or "the engine failed"
                changes.append(EngineChange(model_id, ResidencyState.FAILED, why))
            elif record.state is ResidencyState.WARMING and status.state is EngineState.READY:
                changes.append(EngineChange(model_id, ResidencyState.READY, "adopted ready"))
        elif (
            record.state is ResidencyState.FAILED
            and status is not None
            and status.proven
            and status.state is EngineState.READY
            and record.loaded_at is not None
        ):
            changes.append(EngineChange(model_id, ResidencyState.READY, "adopted after proof"))
    return changes


def activity_of(status: EngineStatus | None, record: ResidencyRecord) -> bool:
    """Whether the node should probe /slots for this residency (a proven live engine)."""
    return (
        status is not None
        and status.proven
        and status.state is not EngineState.FAILED
        and record.state in (ResidencyState.READY, ResidencyState.DRAINING)
    )
