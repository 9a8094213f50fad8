"""Reading the local wire contract of allocator nodes into the planner's view of a host.

The messages are pydantic models in `grid.fleet.wire` (one vocabulary for the node, the
controller and the CLI). Registration and heartbeat share one body (`NodeUpdate`, sent with
PUT /nodes/{node_id}). The top-level fields of older Grid nodes are tolerated (unknown keys are
ignored there), while the allocator envelope is read defensively: a residency row that does not
validate is excluded and makes the host unhealthy, and an unknown lifecycle state fails closed
(unhealthy) rather than becoming eligible. Residencies may carry ages (`loaded_age_s`,
`last_used_age_s`) instead of timestamps; the controller rebuilds timestamps from its own receipt
time so a skewed node clock cannot bypass minimum residency or scale-down cooldown.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from grid.fleet import (
    ACK_STATUSES,
    MAX_ROWS,
    MAX_TEXT,
    Host,
    HostState,
    NodeUpdate,
    Ownership,
    PredictiveEntry,
    Residency,
    WireAck,
    WireAllocator,
    WireLoad,
    WirePredictiveEntry,
    WireResidency,
    WireResources,
    WireRoute,
    wire_json,
)

# The message models are the fleet's wire vocabulary; re-exported for the controller's modules.
__all__ = [
    "ACK_STATUSES",
    "MAX_ROWS",
    "MAX_TEXT",
    "NodeUpdate",
    "WireAck",
    "WireAllocator",
    "WireLoad",
    "WireResidency",
    "WireResources",
    "WireRoute",
    "build_host",
    "parse_residency",
    "safety_signature",
]


def _finite_age(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    age = float(value)
    return age if math.isfinite(age) and age >= 0 else None


def parse_residency(row: object, now: float) -> Residency | None:
    """One residency row, or None when it is malformed (ages become controller timestamps).

    A row is raw JSON off the wire, or a `WireResidency` when the update was built in process."""
    if isinstance(row, WireResidency):
        row = wire_json(row)
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


def parse_predictive(rows: list[Any], now: float) -> list[PredictiveEntry]:
    """The envelope's predictive provenance rows (ages become controller timestamps); a row
    that does not validate is left out, so nothing it names is ever evicted, and a model
    reported twice keeps its first row."""
    out: dict[str, PredictiveEntry] = {}
    for row in rows:
        body = wire_json(row) if isinstance(row, WirePredictiveEntry) else row
        try:
            entry = WirePredictiveEntry.model_validate(body)
        except ValidationError:
            continue
        if entry.model_id in out:
            continue
        out[entry.model_id] = PredictiveEntry(
            model_id=entry.model_id,
            sha256=entry.sha256,
            size_mb=entry.size_mb,
            cached_at=max(0.0, now - entry.cached_age_s),
            warmed=entry.warmed,
        )
    return [out[m] for m in sorted(out)]


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
        predictive_cache=parse_predictive(envelope.predictive_cache, now),
        gpu_count=len(resources.gpu_memory_mb) or resources.gpu_count,
        gpu_memory_mb=list(resources.gpu_memory_mb),
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
        # an evict is destructive: a change of provenance waits for a tick that saw it
        tuple(sorted((e.model_id, e.sha256, e.warmed) for e in host.predictive_cache)),
    )
