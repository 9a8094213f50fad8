"""Solver-agnostic plan checker: every hard constraint, from the snapshot and the plan (pure).

The plan document is checked against the snapshot itself: references, duplicates, the fixed
replicas, eligibility of each pair (eligibility.py), runtimes and declared memory, incumbent
flags, replica bounds, pins and the explained shortfalls. The per-host families run through
the one per-host ledger that every engine uses (grid/planner/ledger.py), on budgets derived
from the snapshot's hosts (problem.host_budget); the tests' reference (tests/planner/
reference.py) restates those rules on its own. Use `violations()` for a list and `check()` to
raise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from grid.fleet import (
    LIVE_STATES,
    REUSABLE_STATES,
    Assignment,
    FleetSnapshot,
    Host,
    ModelProfile,
    Plan,
    ResidencyState,
)
from grid.planner.eligibility import compatible_runtimes, host_refusals, pair_refusals
from grid.planner.ledger import Blocker, HostLoad, Rules, blockers
from grid.planner.problem import Candidate, HostBudget, footprint_mb, host_budget
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
        found, incumbent = _assignment_violations(snap, a, host, prof)
        out += found
        is_new = not incumbent
        variable.setdefault(a.host_id, []).append((a.model_id, a.memory_mb, is_new))

    for key in sorted(fixed_expected - fixed_found):
        out.append(Violation("fixed_replica_missing", f"unmanaged replica {key} not in plan"))

    out += _count_violations(targets, totals, profiles, seen, fixed_found)

    rules = Rules.of_snapshot(snap.models, snap.hosts)
    for host_id, placed in variable.items():
        out += _host_violations(snap, hosts[host_id], placed, profiles, rules)

    out += _unsatisfied_violations(snap, plan, targets, totals)
    return out


def _assignment_violations(
    snap: FleetSnapshot, a: Assignment, host: Host, prof: ModelProfile
) -> tuple[list[Violation], bool]:
    """What is wrong with one managed assignment, and whether it reuses an incumbent."""
    out: list[Violation] = []
    key = (a.model_id, a.host_id)
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
    return out, incumbent


def _count_violations(
    targets: dict[str, Target],
    totals: dict[str, int],
    profiles: dict[str, ModelProfile],
    seen: set[tuple[str, str]],
    fixed_found: set[tuple[str, str]],
) -> list[Violation]:
    """Replica counts over the desired level, and replicas that substitute for a pin."""
    out: list[Violation] = []
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
    rules: Rules,
) -> list[Violation]:
    """The per-host rules (grid/planner/ledger.py) on the plan's placements of one host, added
    one by one in model order to a ledger of the host's budget derived from the snapshot; each
    family that refuses one is reported once."""
    budget = host_budget(host, snap, profiles)
    load = HostLoad(budget)
    cached_here = set(host.cached_models) | {
        r.model_id for r in host.residencies if r.state is ResidencyState.CACHED
    }
    found: dict[str, str] = {}
    for model_id, memory, is_new in sorted(placed):
        disk = profiles[model_id].artifact_size_mb if is_new and model_id not in cached_here else 0
        cand = Candidate(
            model_id,
            host.host_id,
            "",
            memory,
            memory if is_new else 0,
            disk,
            None if is_new else ResidencyState.READY,
            model_id in cached_here,
            False,
        )
        for blocker in blockers(load, cand, rules):
            code = _code(blocker, budget)
            found.setdefault(code, f"{host.host_id}: {_detail(blocker, model_id)}")
        load.add(cand, rules.ceilings.get(model_id, 0))
    return [Violation(code, message) for code, message in found.items()]


def _code(blocker: Blocker, budget: HostBudget) -> str:
    """A blocker's family, the new-model slot cap apart (`live_slots`)."""
    if blocker.family == "slots" and not (
        budget.desired_cap is not None and blocker.need > budget.desired_cap
    ):
        return "live_slots"
    return blocker.family


def _detail(blocker: Blocker, model_id: str) -> str:
    what = {
        "memory": "desired footprint exceeds allocatable",
        "live_memory": "new allocations do not fit the free memory",
        "slots": "more models than max_models",
        "colocation": f"{blocker.other} allows {blocker.free} models",
        "colocation_exclusion": f"{model_id} beside {blocker.other}",
        "disk": "artifacts exceed the free disk",
        "gpu": "too few free GPUs with the memory it needs",
    }.get(blocker.family, blocker.family)
    return f"{what} ({model_id}: needs {blocker.need}, {blocker.free} free)"


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
