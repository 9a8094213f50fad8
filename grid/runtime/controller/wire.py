"""The local wire contract of allocator nodes (spec "Local wire contract"), as pydantic models.

Registration and heartbeat share one body (`NodeUpdate`, sent with PUT /nodes/{node_id}). The
top-level fields of older Grid nodes are tolerated (unknown keys are ignored there), while the
allocator envelope is read defensively: a residency row that does not validate is excluded and
makes the host unhealthy, and an unknown lifecycle state fails closed (unhealthy) rather than
becoming eligible. Residencies may carry ages (`loaded_age_s`, `last_used_age_s`) instead of
timestamps; the controller rebuilds timestamps from its own receipt time so a skewed node clock
cannot bypass minimum residency or scale-down cooldown.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet.models import Host, HostState, Ownership, Residency

MAX_ROWS = 256  # residencies or cached models per host
MAX_TEXT = 512
ACK_STATUSES = ("succeeded", "failed", "cancelled")


class _Tolerant(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class WireResources(_Tolerant):
    capacity_mb: int = Field(ge=0, le=1 << 40)
    reserved_mb: int = Field(default=0, ge=0, le=1 << 40)
    external_mb: int = Field(default=0, ge=0, le=1 << 40)
    runtimes: list[str] = Field(default_factory=lambda: ["llama.cpp"], max_length=32)
    backends: list[str] = Field(default_factory=list, max_length=32)
    memory_bandwidth_gbps: float = Field(default=0.0, ge=0)
    compute_gflops: float = Field(default=0.0, ge=0)
    failure_domain: str | None = Field(default=None, max_length=MAX_TEXT)
    tags: list[str] = Field(default_factory=list, max_length=64)
    data_tiers: list[str] = Field(default_factory=lambda: ["public", "internal"], max_length=16)
    max_models: int = Field(default=0, ge=0, le=4096)
    disk_free_mb: int | None = Field(default=None, ge=0, le=1 << 40)


class WireRoute(_Tolerant):
    """A READY Grid-owned child the proxy may reach on the host's loopback port."""

    model_id: str = Field(min_length=1, max_length=256)
    port: int = Field(ge=1, le=65535)
    concurrency: int | None = Field(default=None, ge=0, le=1 << 16)
    queued: int = Field(default=0, ge=0, le=1 << 20)


class WireAllocator(_Tolerant):
    schema_version: int = 1
    state: str = "accepting"
    throttle_fraction: float = Field(default=1.0, ge=0.0, le=1.0)
    cached_models: list[str] = Field(default_factory=list, max_length=MAX_ROWS)
    residencies: list[Any] = Field(default_factory=list, max_length=MAX_ROWS)
    actuator_capabilities: list[str] = Field(
        default_factory=lambda: ["load", "warm", "drain", "unload"], max_length=16
    )
    disk_free_mb: int | None = Field(default=None, ge=0, le=1 << 40)
    # Router inventory: the live child engines and the host's private engine key. The key is
    # taken out by the registry on receipt (memory only) and never appears in any output.
    routes: list[WireRoute] = Field(default_factory=list, max_length=MAX_ROWS)
    engine_key: str | None = Field(default=None, min_length=1, max_length=512, repr=False)


class WireAck(_Tolerant):
    action_id: str = Field(min_length=1, max_length=128)
    status: str = Field(max_length=32)
    message: str = Field(default="", max_length=MAX_TEXT)
    duration_seconds: float | None = None
    artifact_fetched: bool = False


class WireLoad(_Tolerant):
    active_tasks: int = Field(default=0, ge=0)
    queue_depth: int = Field(default=0, ge=0)


class NodeUpdate(_Tolerant):
    """PUT /nodes/{node_id}: registration (with host_id and resources) or heartbeat."""

    node_id: str | None = Field(default=None, max_length=MAX_TEXT)
    role: str | None = Field(default=None, max_length=64)
    models: list[str] = Field(default_factory=list, max_length=MAX_ROWS)
    host_id: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)
    resources: WireResources | None = None
    allocator: WireAllocator | None = None
    load: WireLoad | None = None
    request_commands: bool = True
    acknowledgements: list[WireAck] = Field(default_factory=list, max_length=MAX_ROWS)


def _finite_age(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    age = float(value)
    return age if math.isfinite(age) and age >= 0 else None


def parse_residency(row: object, now: float) -> Residency | None:
    """One residency row, or None when it is malformed (ages become controller timestamps)."""
    if not isinstance(row, dict):
        return None
    body = dict(row)
    for age_field, stamp_field in (
        ("loaded_age_s", "loaded_at"),
        ("last_used_age_s", "last_used_at"),
    ):
        if age_field in body:
            age = _finite_age(body.pop(age_field))
            if age is None:
                return None
            body[stamp_field] = max(0.0, now - age)
    try:
        return Residency.model_validate(body)
    except ValidationError:
        return None


def build_host(
    host_id: str,
    resources: WireResources,
    allocator: WireAllocator | None,
    *,
    now: float,
    manual: bool = False,
) -> tuple[Host, list[str]]:
    """The planner's view of one host at receipt time `now`, and the problems found."""
    problems: list[str] = []
    envelope = allocator or WireAllocator()
    residencies: list[Residency] = []
    seen: set[str] = set()
    for index, row in enumerate(envelope.residencies):
        res = parse_residency(row, now)
        if res is None:
            problems.append(f"residency row {index} is malformed and was excluded")
            continue
        if res.model_id in seen:
            problems.append(f"model {res.model_id!r} is reported twice; the second was excluded")
            continue
        seen.add(res.model_id)
        residencies.append(res)
    try:
        state = HostState(envelope.state)
    except ValueError:
        problems.append(f"lifecycle state {envelope.state[:64]!r} is unknown")
        state = HostState.UNHEALTHY
    if envelope.schema_version != 1:
        problems.append(f"allocator schema_version {envelope.schema_version} is not supported")
    if problems:
        state = HostState.UNHEALTHY  # fail closed: a host we cannot read takes no new work
    disk = envelope.disk_free_mb if envelope.disk_free_mb is not None else resources.disk_free_mb
    host = Host(
        host_id=host_id,
        state=state,
        throttle_fraction=envelope.throttle_fraction,
        capacity_mb=resources.capacity_mb,
        reserved_mb=resources.reserved_mb,
        external_mb=resources.external_mb,
        runtimes=list(resources.runtimes),
        backends=list(resources.backends),
        failure_domain=resources.failure_domain,
        tags=list(resources.tags),
        data_tiers=list(resources.data_tiers),
        max_models=resources.max_models,
        disk_free_mb=disk,
        cached_models=sorted(set(envelope.cached_models)),
        memory_bandwidth_gbps=resources.memory_bandwidth_gbps,
        compute_gflops=resources.compute_gflops,
        last_heartbeat=now,
        ownership=Ownership.MANUAL if manual else Ownership.MANAGED,
        actuator_capabilities=list(envelope.actuator_capabilities),
        routes=sorted({r.model_id for r in envelope.routes}),
        residencies=residencies,
    )
    return host, problems


def safety_signature(host: Host) -> tuple[object, ...]:
    """What destructive safety depends on: lifecycle and residency states, not timestamps."""
    return (
        host.state.value,
        host.failure_domain,
        tuple(sorted(host.routes or ())),  # a route corroborates a READY row (invariant 4)
        tuple(
            sorted(
                (r.model_id, r.state.value, r.owner.value, r.artifact_sha256 or "")
                for r in host.residencies
            )
        ),
    )
