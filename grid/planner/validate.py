"""Solver-agnostic plan checker: every hard constraint, re-derived from the snapshot (pure).

It deliberately does not reuse the engines' precomputed caps (`PlacementProblem`): it recomputes
each ledger from residency sets, so a mistake in a shared derivation shows up as a violation.
Use `violations()` for a list and `check()` to raise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from grid.fleet.models import (
    LIVE_STATES,
    REUSABLE_STATES,
    FleetSnapshot,
    Host,
    ModelProfile,
    Plan,
    ResidencyState,
)
from grid.planner.eligibility import compatible_runtimes, host_refusals, pair_refusals
from grid.planner.gpus import violations_on as gpu_violations
from grid.planner.problem import allocatable_mb, footprint_mb
from grid.planner.targets import Target, compute_targets

SHORTFALL_CODES_EXCLUDED = {"failure_domain_shortfall"}


@dataclass(frozen=True)
class Violation:
    code: str
    message: str


class InvalidPlan(AssertionError):
    def __init__(self, found: list[Violation]) -> None:
        super().__init__("; ".join(f"{v.code}: {v.message}" for v in found))
        self.violations = found


def violations(
    snap: FleetSnapshot, plan: Plan, targets: dict[str, Target] | None = None
) -> list[Violation]:
    targets = targets if targets is not None else compute_targets(snap)
    if plan.portfolio is not None:
        targets = _with_portfolio(snap, plan, targets)
    out: list[Violation] = []
    hosts = {h.host_id: h for h in snap.hosts}
    profiles = {m.model_id: m for m in snap.models}
    seen: set[tuple[str, str]] = set()
    variable: dict[str, list[tuple[str, int, bool]]] = {}  # host -> (model, memory, is_new)
    totals: dict[str, int] = {}
    fixed_expected: set[tuple[str, str]] = set()
    for h in snap.hosts:
        if host_refusals(h, snap):
            continue
        for r in h.residencies:
            if r.model_id in profiles and not r.is_managed and r.state is ResidencyState.READY:
                fixed_expected.add((r.model_id, h.host_id))
    fixed_found: set[tuple[str, str]] = set()

    for a in plan.assignments:
        key = (a.model_id, a.host_id)
        host = hosts.get(a.host_id)
        prof = profiles.get(a.model_id)
        if host is None or prof is None:
            out.append(Violation("unknown_reference", f"{key} names an unknown host or model"))
            continue
        if key in seen:
            out.append(Violation("duplicate_replica", f"{a.model_id} placed twice on {a.host_id}"))
            continue
        seen.add(key)
        totals[a.model_id] = totals.get(a.model_id, 0) + 1
        if key in fixed_expected:
            fixed_found.add(key)
            continue
        why = host_refusals(host, snap)
        res = next((r for r in host.residencies if r.model_id == a.model_id), None)
        incumbent = (
            res is not None
            and res.is_managed
            and res.state in REUSABLE_STATES
            and (prof.artifact_sha256 is None or res.artifact_sha256 == prof.artifact_sha256)
            and (res.runtime is None or res.runtime in compatible_runtimes(prof, host))
        )
        if res is not None and res.state in LIVE_STATES and not incumbent:
            why.append("residency_not_reusable")
        cached = a.model_id in host.cached_models or (
            res is not None and res.state is ResidencyState.CACHED
        )
        why += pair_refusals(prof, host, cached=cached or incumbent)
        if why:
            out.append(Violation("ineligible_host", f"{key}: {', '.join(sorted(set(why)))}"))
        if a.runtime not in compatible_runtimes(prof, host) and not (
            incumbent and res is not None and res.runtime == a.runtime
        ):
            out.append(Violation("runtime_mismatch", f"{key} uses runtime {a.runtime!r}"))
        elif a.memory_mb < footprint_mb(prof, a.runtime):
            out.append(Violation("memory_understated", f"{key} declares {a.memory_mb} MB"))
        if a.existing != incumbent:
            out.append(Violation("existing_flag", f"{key} existing={a.existing} is wrong"))
        is_new = not incumbent
        variable.setdefault(a.host_id, []).append((a.model_id, a.memory_mb, is_new))

    for key in sorted(fixed_expected - fixed_found):
        out.append(Violation("fixed_replica_missing", f"unmanaged replica {key} not in plan"))

    fixed_by_model = Counter(m for m, _h in fixed_found)
    for model_id, count in totals.items():
        desired = targets[model_id].desired if model_id in targets else 0
        fixed_n = fixed_by_model[model_id]
        if count - fixed_n > max(0, desired - fixed_n):
            out.append(
                Violation("replica_bounds", f"{model_id}: {count} replicas, {desired} desired")
            )
        # Pins are reserved, never substituted: one replica is kept back for each pinned host.
        # Unmanaged copies off the pins are inventory Grid cannot move: they use the allowance.
        pins = set(profiles[model_id].pinned_hosts)
        if not pins:  # (the scans below are per model: only where pins exist)
            continue
        off_pins = sum(1 for m, h in seen - fixed_found if m == model_id and h not in pins)
        fixed_off = sum(1 for m, h in fixed_found if m == model_id and h not in pins)
        if off_pins > max(0, desired - len(pins) - fixed_off):
            out.append(
                Violation(
                    "pin_substituted", f"{model_id}: {off_pins} replicas off its pinned hosts"
                )
            )

    for host_id, placed in variable.items():
        out += _host_violations(snap, hosts[host_id], placed, profiles)

    out += _unsatisfied_violations(snap, plan, targets, totals)
    return out


def _with_portfolio(
    snap: FleetSnapshot, plan: Plan, targets: dict[str, Target]
) -> dict[str, Target]:
    """Selected portfolio models may hold the plan's desired count, within their replica bounds."""
    out = dict(targets)
    selected = set(plan.portfolio.selected_models) if plan.portfolio is not None else set()
    for prof in snap.models:
        if prof.model_id not in selected or prof.model_id not in out:
            continue
        ceiling = max(prof.max_replicas, len(set(prof.pinned_hosts)))
        wanted = min(ceiling, plan.desired_replicas.get(prof.model_id, 0))
        if wanted > out[prof.model_id].desired:
            out[prof.model_id] = replace(out[prof.model_id], desired=wanted)
    return out


def _host_violations(
    snap: FleetSnapshot,
    host: Host,
    placed: list[tuple[str, int, bool]],
    profiles: dict[str, ModelProfile],
) -> list[Violation]:
    out: list[Violation] = []
    alloc = allocatable_mb(host)
    live = [r for r in host.residencies if r.state in LIVE_STATES]
    fixed = [r for r in live if not r.is_managed]
    fixed_models = {r.model_id for r in fixed}
    live_models = {r.model_id for r in live}
    placed_models = {m for m, _mem, _new in placed}
    new_models = {m for m, _mem, new in placed if new}
    hid = host.host_id

    total = sum(mem for _m, mem, _n in placed)
    if total > max(0, alloc - sum(r.memory_mb for r in fixed)):
        out.append(Violation("memory", f"{hid}: desired footprint {total} MB exceeds allocatable"))
    new_total = sum(mem for _m, mem, new in placed if new)
    headroom = snap.policy.memory_headroom_fraction * alloc
    if new_total and new_total > alloc - sum(r.memory_mb for r in live) - headroom:
        out.append(Violation("live_memory", f"{hid}: new allocations of {new_total} MB do not fit"))
    if host.max_models:
        if len(placed_models | fixed_models) > host.max_models:
            out.append(Violation("slots", f"{hid}: more models than max_models"))
        if new_models and len(new_models | live_models) > host.max_models:
            out.append(Violation("live_slots", f"{hid}: new models exceed live free slots"))
    occupants = placed_models | fixed_models
    ceilings = {m: profiles[m].max_colocated_models for m in occupants if m in profiles}
    for model_id, ceiling in ceilings.items():
        if ceiling and len(occupants) > ceiling:
            out.append(Violation("colocation", f"{hid}: {model_id} allows {ceiling} models"))
    if new_models:
        live_occ = live_models | placed_models
        for model_id in sorted(live_occ):
            prof = profiles.get(model_id)
            if prof and prof.max_colocated_models and len(live_occ) > prof.max_colocated_models:
                out.append(Violation("colocation_live", f"{hid}: {model_id} ceiling exceeded"))
    for a in sorted(placed_models):
        others = (occupants | (live_models if a in new_models else set())) - {a}
        for b in sorted(others):
            pa, pb = profiles.get(a), profiles.get(b)
            if (pa and b in pa.colocation_excludes) or (pb and a in pb.colocation_excludes):
                out.append(Violation("colocation_exclusion", f"{hid}: {a} beside {b}"))
    if host.disk_free_mb is not None:
        needed = sum(
            profiles[m].artifact_size_mb
            for m in new_models
            if m not in host.cached_models
            and not any(
                r.model_id == m and r.state is ResidencyState.CACHED for r in host.residencies
            )
        )
        if needed > host.disk_free_mb:
            out.append(
                Violation("disk", f"{hid}: {needed} MB of artifacts, {host.disk_free_mb} free")
            )
    assigned = [(m, not new) for m, _mem, new in placed]
    out += [Violation("gpu", text) for text in gpu_violations(host, profiles, assigned)]
    return out


def _unsatisfied_violations(
    snap: FleetSnapshot, plan: Plan, targets: dict[str, Target], totals: dict[str, int]
) -> list[Violation]:
    out: list[Violation] = []
    for prof in snap.models:
        desired = targets[prof.model_id].desired
        missing = desired - totals.get(prof.model_id, 0)
        reported = sum(
            u.missing_replicas
            for u in plan.unsatisfied
            if u.model_id == prof.model_id and u.code not in SHORTFALL_CODES_EXCLUDED
        )
        if missing > 0 and reported < missing:
            out.append(
                Violation(
                    "unexplained_shortfall",
                    f"{prof.model_id}: {missing} missing, {reported} explained",
                )
            )
        if not prof.pinned_hosts:
            continue
        placed_hosts = {a.host_id for a in plan.assignments if a.model_id == prof.model_id}
        for pin in prof.pinned_hosts:
            if pin in placed_hosts:
                continue
            if not any(
                u.model_id == prof.model_id and u.code.startswith("pinned") and u.host_id == pin
                for u in plan.unsatisfied
            ):
                out.append(
                    Violation("unexplained_pin", f"{prof.model_id} pin to {pin} not reported")
                )
    return out


def check(snap: FleetSnapshot, plan: Plan, targets: dict[str, Target] | None = None) -> None:
    found = violations(snap, plan, targets)
    if found:
        raise InvalidPlan(found)
