"""What-if capacity analysis: edit a fleet snapshot, plan each variant, tabulate the differences.

Every edit is pure: it takes a `FleetSnapshot` and returns a new one (the input is never
mutated; unchanged hosts, profiles and demand entries are shared, never modified), so a
notebook can build variants freely. Plans come from the real planner
(`grid.planner.plan.make_plan`), in deterministic mode by default so that a notebook's figures
are repeatable. Counting rules (docs/whatif.md):

    placed(m)  = min(desired(m), replicas of m in the plan)   (unmanaged ready copies count)
    unmet(m)   = desired(m) − placed(m)
    memory     = Σ planned replicas' memory per host, against allocatable memory
                 (capacity − reserved − external, derated when throttled)
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from grid.fleet import FleetSnapshot, GridError, Host, ModelProfile, Plan, load_snapshot
from grid.planner import allocatable_mb, make_plan

DEFAULT_TIME_LIMIT_S = 5.0


def load(path: str | Path, *, now: float | None = None) -> FleetSnapshot:
    """Read a snapshot; a file without `now` is planned as of `now` (default: the clock)."""
    return load_snapshot(path, now=time.time() if now is None else now)


# ----------------------------------------------------------------------------- edits


def remove_hosts(snap: FleetSnapshot, host_ids: Iterable[str]) -> FleetSnapshot:
    """The fleet without these hosts (as if they failed): their residencies go with them."""
    gone = set(host_ids)
    unknown = sorted(gone - {h.host_id for h in snap.hosts})
    if unknown:
        raise GridError(
            "unknown_host",
            f"no host {unknown[0]!r} in the snapshot",
            fix="name a host_id that the snapshot lists under `hosts`",
        )
    # Shallow: the remaining hosts are shared, never mutated (every edit builds new objects).
    return snap.model_copy(update={"hosts": [h for h in snap.hosts if h.host_id not in gone]})


def referenced_host_ids(snap: FleetSnapshot) -> set[str]:
    """Host IDs in use or named by a profile (pins, allow and deny lists)."""
    names = {h.host_id for h in snap.hosts}
    for model in snap.models:
        names.update(model.pinned_hosts, model.allowed_hosts, model.denied_hosts)
    return names


def derived_host_ids(snap: FleetSnapshot, template_id: str, count: int) -> list[str]:
    """`count` fresh IDs `<template_id>-1`, `-2`, … skipping any the snapshot already uses.

    The first k IDs for count ≥ k are always the same, so a fleet with k copies is a prefix of
    one with more.
    """
    taken = referenced_host_ids(snap)
    out: list[str] = []
    index = 0
    while len(out) < count:
        index += 1
        candidate = f"{template_id}-{index}"
        if candidate not in taken:
            out.append(candidate)
    return out


def template_copies(snap: FleetSnapshot, template: Host, count: int) -> list[Host]:
    """`count` empty hosts built from the template, with derived IDs, seen at `snap.now`."""
    hosts = []
    for host_id in derived_host_ids(snap, template.host_id, count):
        host = template.model_copy(deep=True)
        host.host_id = host_id
        host.residencies = []
        host.last_heartbeat = snap.now
        hosts.append(host)
    return hosts


def add_hosts(snap: FleetSnapshot, template: Host, count: int) -> FleetSnapshot:
    """The fleet plus `count` new, empty hosts like the template."""
    if count < 0:
        raise GridError("invalid_count", f"cannot add {count} hosts", fix="give a count ≥ 0")
    return snap.model_copy(update={"hosts": [*snap.hosts, *template_copies(snap, template, count)]})


def augment(
    snap: FleetSnapshot, added: Mapping[str, int], templates: list[Host]
) -> tuple[FleetSnapshot, dict[str, list[str]]]:
    """The fleet plus `added[template.host_id]` copies of each template, and each copy's ID."""
    out = snap
    groups: dict[str, list[str]] = {}
    for template in templates:
        copies = template_copies(out, template, added.get(template.host_id, 0))
        groups[template.host_id] = [h.host_id for h in copies]
        out = out.model_copy(update={"hosts": [*out.hosts, *copies]})
    return out, groups


def scale_demand(snap: FleetSnapshot, factor: float, model_id: str | None = None) -> FleetSnapshot:
    """Multiply demand (offered concurrency, rpm, queue) by `factor`, for one model or all.

    A `desired_replicas` override scales too (rounded up); models without a demand entry are
    unchanged: there is nothing to scale.
    """
    if not (math.isfinite(factor) and factor >= 0):
        raise GridError(
            "invalid_factor",
            f"demand factor {factor!r} must be a finite number ≥ 0",
            fix="pass a factor such as 2.0",
        )
    if model_id is not None and snap.model(model_id) is None:
        raise GridError(
            "unknown_model",
            f"no model {model_id!r} in the snapshot",
            fix="name a model_id that the snapshot lists under `models`",
        )
    demand = dict(snap.demand)
    for name, entry in snap.demand.items():
        if model_id is not None and name != model_id:
            continue
        scaled = entry.model_copy()
        scaled.offered_concurrency *= factor
        scaled.rpm *= factor
        scaled.queue_depth *= factor
        if scaled.desired_replicas is not None:
            scaled.desired_replicas = math.ceil(scaled.desired_replicas * factor - 1e-9)
        demand[name] = scaled
    return snap.model_copy(update={"demand": demand})


def change_profile(snap: FleetSnapshot, model_id: str, **changes: object) -> FleetSnapshot:
    """The fleet with one profile's fields changed (validated like a snapshot's profile)."""
    index = next((i for i, m in enumerate(snap.models) if m.model_id == model_id), None)
    if index is None:
        raise GridError(
            "unknown_model",
            f"no model {model_id!r} in the snapshot",
            fix="name a model_id that the snapshot lists under `models`",
        )
    data = snap.models[index].model_dump(mode="json")
    data.update(changes)
    try:
        profile = ModelProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise GridError(
            "invalid_value",
            f"profile {model_id!r}: {first.get('msg', 'invalid value')}",
            fix=f"correct `{where}`",
            path=f"models[{index}].{where}",
        ) from None
    if profile.min_replicas > profile.max_replicas:
        raise GridError(
            "replica_bounds",
            f"min_replicas {profile.min_replicas} exceeds max_replicas {profile.max_replicas}",
            fix="lower min_replicas or raise max_replicas",
            path=f"models[{index}].min_replicas",
        )
    models = list(snap.models)
    models[index] = profile
    return snap.model_copy(update={"models": models})


# ----------------------------------------------------------------------------- planning


def plan(
    snap: FleetSnapshot,
    *,
    engine: str = "cpsat",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    deterministic: bool = True,
) -> Plan:
    """Plan a variant with the real planner."""
    return make_plan(snap, engine=engine, time_limit_s=time_limit_s, deterministic=deterministic)


def placed_by_model(plan_: Plan) -> dict[str, int]:
    """Replicas placed per model, capped at the desired count."""
    counts = Counter(a.model_id for a in plan_.assignments)
    return {m: min(d, counts[m]) for m, d in plan_.desired_replicas.items()}


def unmet_by_model(plan_: Plan) -> dict[str, int]:
    placed = placed_by_model(plan_)
    return {m: d - placed[m] for m, d in plan_.desired_replicas.items() if d > placed[m]}


def host_memory(snap: FleetSnapshot, plan_: Plan) -> dict[str, dict[str, int]]:
    """Per host (every host of the snapshot, in order), planned memory per model (MB)."""
    out: dict[str, dict[str, int]] = {h.host_id: {} for h in snap.hosts}
    for a in plan_.assignments:
        per = out.setdefault(a.host_id, {})
        per[a.model_id] = per.get(a.model_id, 0) + a.memory_mb
    return out


@dataclass(frozen=True)
class PlanSummary:
    """One variant's plan, reduced to what the difference table compares."""

    name: str
    desired: int
    placed: int
    unmet_by_code: dict[str, int]
    unmet_by_model: dict[str, int]
    binding: dict[str, int]  # constraint family -> how many unmet models it binds
    memory_used_mb: int
    memory_allocatable_mb: int
    hosts: int
    status: str
    host_memory: dict[str, dict[str, int]] = field(repr=False, default_factory=dict)

    @property
    def unmet(self) -> int:
        return self.desired - self.placed

    @property
    def memory_use(self) -> float:
        return self.memory_used_mb / self.memory_allocatable_mb if self.memory_allocatable_mb else 0


def summarize(name: str, snap: FleetSnapshot, plan_: Plan) -> PlanSummary:
    placed = placed_by_model(plan_)
    by_code: Counter[str] = Counter()
    binding: Counter[str] = Counter()
    for u in plan_.unsatisfied:
        if u.missing_replicas > 0:
            by_code[u.code] += u.missing_replicas
        for family in sorted({b.constraint for b in u.binding}):
            binding[family] += 1
    memory = host_memory(snap, plan_)
    return PlanSummary(
        name=name,
        desired=sum(plan_.desired_replicas.values()),
        placed=sum(placed.values()),
        unmet_by_code=dict(sorted(by_code.items())),
        unmet_by_model=unmet_by_model(plan_),
        binding=dict(sorted(binding.items())),
        memory_used_mb=sum(sum(per.values()) for per in memory.values()),
        memory_allocatable_mb=sum(allocatable_mb(h) for h in snap.hosts),
        hosts=len(snap.hosts),
        status=plan_.solver.status,
        host_memory=memory,
    )


def plan_variants(
    variants: Mapping[str, FleetSnapshot],
    *,
    engine: str = "cpsat",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> list[PlanSummary]:
    """Plan every variant (in the mapping's order) and summarize each."""
    return [
        summarize(name, snap, plan(snap, engine=engine, time_limit_s=time_limit_s))
        for name, snap in variants.items()
    ]


def difference_table(summaries: list[PlanSummary]) -> list[dict[str, object]]:
    """One row per variant; `Δ placed` and `Δ unmet` are against the first (the baseline)."""
    if not summaries:
        return []
    base = summaries[0]
    rows: list[dict[str, object]] = []
    for s in summaries:
        rows.append(
            {
                "variant": s.name,
                "hosts": s.hosts,
                "desired": s.desired,
                "placed": s.placed,
                "Δ placed": s.placed - base.placed,
                "unmet": s.unmet,
                "Δ unmet": s.unmet - base.unmet,
                "unmet by code": ", ".join(f"{c}={n}" for c, n in s.unmet_by_code.items()) or "-",
                "memory used MB": s.memory_used_mb,
                "memory use": f"{s.memory_use:.0%}",
                "binding": ", ".join(f"{c}×{n}" for c, n in s.binding.items()) or "-",
            }
        )
    return rows


def format_table(rows: list[dict[str, object]]) -> str:
    """Rows as a fixed-width text table (for notebooks and logs)."""
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    widths = {c: max(len(str(c)), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(str(c).ljust(widths[c]) for c in columns)]
    lines.append("  ".join("-" * widths[c] for c in columns))
    for row in rows:
        lines.append("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns))
    return "\n".join(lines)


def demand_growth(
    snap: FleetSnapshot,
    factors: Iterable[float],
    *,
    engine: str = "cpsat",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> list[PlanSummary]:
    """Plan the fleet with all demand scaled by each factor (e.g. 1×–4×)."""
    variants = {f"{f:g}x": scale_demand(snap, f) for f in factors}
    return plan_variants(variants, engine=engine, time_limit_s=time_limit_s)
