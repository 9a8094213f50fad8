"""The hook: a finished base plan gains the portfolio's replicas and its `portfolio` report.

Order (pure but for wall-time reporting): the base plan is solved as today (baseline, pinned,
direct, inferred replicas); `build_context` fixes it; the coordinate search runs (fallback and
hint); with the cpsat engine the joint CP-SAT model decides within policy.portfolio.time_limit_s
unless it is lexicographically worse than the search (then the search's portfolio is kept and
`portfolio.solver.message` says so). The plan then gains the portfolio's placements (reason
names the workloads), desired replicas (base + desired workload replicas) and one
`portfolio_undersupplied` entry per model with missing workload replicas. A starvation
reclaim (preempt.py) takes its excess replica out of the assignments and reports it as a
`portfolio_reclaimed` entry of the victim's model.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from grid.fleet import (
    Assignment,
    FleetSnapshot,
    Plan,
    PortfolioLevel,
    PortfolioReport,
    PortfolioSolver,
    Unsatisfied,
)
from grid.planner.deadline import CALIBRATION, PORTFOLIO_FINISH_S, Deadline, output_reserve_s
from grid.planner.portfolio.context import Carried, Key, PortfolioContext, build_context
from grid.planner.portfolio.hysteresis import hold
from grid.planner.portfolio.preempt import StagedWorkload, preemptions_of, stage_preemptions
from grid.planner.portfolio.replace import authorizations, fulfil
from grid.planner.portfolio.report import admission_rows, candidate_rows
from grid.planner.portfolio.score import LEVELS, compare, evaluate
from grid.planner.portfolio.search import coordinate_search, explorers
from grid.planner.portfolio.solve import CpsatResult, solve_after_search
from grid.planner.problem import PlacementProblem
from grid.planner.targets import Target

FINISH_RESERVE_S = PORTFOLIO_FINISH_S  # the caller's validation and output come on top
AssignmentsOf = Callable[[PlacementProblem, set[Key]], list[Assignment]]
MORE_ROOM = "more free memory or model slots on a compatible host"


def _assignments(
    ctx: PortfolioContext,
    extra: set[Key],
    mapping: dict[str, str],
    assignments_of: AssignmentsOf,
) -> list[Assignment]:
    out = []
    built = {(a.model_id, a.host_id): a for a in assignments_of(ctx.problem, extra)}
    for key in sorted(extra):
        a = built[key]
        words = sorted(w for w, m in mapping.items() if m == key[0])
        label = ", ".join(words) if words else "portfolio"
        a.reasons = [f"workload {label} (portfolio)", *a.reasons]
        out.append(a)
    return out


def _model_note(result: CpsatResult) -> str:
    """Which CP-SAT model decided, where it was not the plain per-host one."""
    if result.fallback:
        return "the per-host model decided: the host-type model's counts did not pack"
    if result.aggregated_hosts:
        return f"host-type model: {result.aggregated_hosts} hosts in {result.types} type(s)"
    return ""


def decide(
    ctx: PortfolioContext,
    *,
    engine: str,
    deterministic: bool = True,
    budget_s: float | None = None,
) -> tuple[dict[str, str], set[Key], dict[str, str], PortfolioSolver]:
    """`budget_s`: what the command's deadline leaves (None: policy.portfolio.time_limit_s)."""
    started = time.perf_counter()
    search = coordinate_search(ctx)
    mapping, placement, exploit = search.mapping, search.placement, search.exploit_mapping
    solver = PortfolioSolver(
        engine="coordinate-search",
        status="HEURISTIC" if engine == "heuristic" else "COORDINATE_SEARCH_FALLBACK",
        wall_ms=0.0,
        message=f"{search.evaluated} portfolio(s) planned by the greedy ledger"
        + (" (portfolio budget reached)" if search.exhausted else ""),
    )
    limit = ctx.policy.time_limit_s if budget_s is None else min(budget_s, ctx.policy.time_limit_s)
    too_late = limit - (time.perf_counter() - started) < CALIBRATION.portfolio_min_cpsat_s
    if engine != "heuristic" and too_late:
        solver.message = "no time left for CP-SAT under the time limit; " + solver.message
    elif engine != "heuristic":
        remaining = limit - (time.perf_counter() - started)
        result = solve_after_search(ctx, search, remaining, deterministic=deterministic)
        if result is None:
            solver.message = "CP-SAT found no portfolio within the time limit; " + solver.message
        elif compare(evaluate(ctx, result.mapping, result.placement), search.values) < 0:
            solver.message = "kept the coordinate search: CP-SAT stopped on the time limit worse"
        else:
            mapping, placement, exploit = result.mapping, result.placement, result.exploit_mapping
            solver = PortfolioSolver(
                engine="cp-sat", status=result.status, wall_ms=0.0, message=_model_note(result)
            )
    kept = hold(ctx, mapping, placement, exploit)
    if kept.held:
        mapping, placement, exploit = kept.mapping, kept.placement, kept.exploit
        note = f"held {', '.join(kept.held)} on the mapping in effect (hysteresis)"
        solver.message = f"{solver.message}; {note}" if solver.message else note
    values = evaluate(ctx, mapping, placement)
    solver.objective = [PortfolioLevel(level=n, sense=s, value=values[n]) for n, s in LEVELS]
    solver.wall_ms = round((time.perf_counter() - started) * 1000, 1)
    return mapping, placement, exploit, solver


def _budget_s(snap: FleetSnapshot, deadline: Deadline | None) -> float | None:
    """What the command's deadline leaves CP-SAT after a reserve for the rest (None: no
    deadline, the policy's time limit alone)."""
    if deadline is None:
        return None
    after = deadline.output_s
    after = after if after is not None else output_reserve_s(len(snap.hosts))
    return deadline.remaining() - FINISH_RESERVE_S - after


def _desired(
    ctx: PortfolioContext,
    plan: Plan,
    mapping: dict[str, str],
    placement: set[Key],
    carried: dict[str, Carried],
) -> tuple[dict[str, int], list[Unsatisfied]]:
    """The plan's desired replicas with the workload replicas, and its unsatisfied entries
    with one `portfolio_undersupplied` per model short of workload replicas."""
    extra = placement - set(ctx.base_keys)
    desired = dict(plan.desired_replicas)
    unsatisfied = list(plan.unsatisfied)
    counts: dict[str, int] = {}
    for m, _h in extra:
        counts[m] = counts.get(m, 0) + 1
    for m in sorted(set(mapping.values())):
        asked = sum(ctx.pairs[(w, mm)].need for w, mm in mapping.items() if mm == m)
        want = min(asked, ctx.room.get(m, 0))
        desired[m] = ctx.final_desired(m, want)
        short = want - counts.get(m, 0) - ctx.surplus.get(m, 0)
        if short > 0:
            unsatisfied.append(
                Unsatisfied(
                    model_id=m,
                    code="portfolio_undersupplied",
                    missing_replicas=short,
                    message=f"{short} workload replica(s) of {m} do not fit the fleet now",
                    would_fit_if=MORE_ROOM,
                )
            )
    for auth in carried.values():  # a fulfilled replacement's replica is desired
        if (auth.model_id, auth.host_id) in placement:
            placed = sum(1 for m, _h in placement | set(ctx.base_keys) if m == auth.model_id)
            desired[auth.model_id] = max(desired.get(auth.model_id, 0), placed)
    return desired, unsatisfied


def _victim_entry(item: StagedWorkload, victim: str) -> Unsatisfied:
    """A replaced (mature beneficiary) or reclaimed (starved workload) victim replica."""
    if item.authorized:
        code = "portfolio_replaced"
        message = (
            f"{victim} on {item.host_id} drains: {item.model_id} replaces it "
            f"for workload {item.workload} (a mature beneficiary)"
        )
    else:
        code = "portfolio_reclaimed"
        message = (
            f"an excess replica of {victim} on {item.host_id} drains so that "
            f"{item.model_id} can serve the starved workload {item.workload}; "
            f"another replica of {victim} keeps serving"
        )
    return Unsatisfied(
        model_id=victim,
        code=code,
        missing_replicas=1,
        message=message,
        would_fit_if=MORE_ROOM,
        host_id=item.host_id,
    )


def _staged_entries(staged: list[StagedWorkload]) -> list[Unsatisfied]:
    """One `preemption_staged` per staged workload, then one entry per victim replica."""
    out = [
        Unsatisfied(
            model_id=item.model_id,
            code="preemption_staged",
            missing_replicas=1,
            message=(
                f"{item.model_id} loads on {item.host_id} for workload {item.workload} "
                f"once {', '.join(item.victims)} drain"
            ),
            host_id=item.host_id,
        )
        for item in staged
    ]
    out.extend(_victim_entry(item, victim) for item in staged for victim in item.reclaimed)
    return out


def attach_portfolio(
    snap: FleetSnapshot,
    plan: Plan,
    *,
    engine: str,
    assignments_of: AssignmentsOf,
    deadline: Deadline | None = None,
    targets: dict[str, Target] | None = None,
    problem: PlacementProblem | None = None,
) -> Plan:
    """`assignments_of` is assemble.assignments_of (passed in: assemble imports this module);
    `deadline` the command's budget: CP-SAT gets what it leaves after a reserve for the rest;
    `targets` the base plan's own targets (default: computed from the snapshot); `problem`
    the portfolio's placement problem when the caller built it (context.build_context)."""
    if deadline is not None:
        deadline.release()  # the share plan.py held for the portfolio is ours now
    if not snap.workloads:
        return plan
    ctx = build_context(snap, plan, targets, problem)
    mapping, placement, exploit, solver = decide(
        ctx, engine=engine, budget_s=_budget_s(snap, deadline)
    )
    mapping, placement, carried = fulfil(ctx, mapping, placement)
    extra = placement - set(ctx.base_keys)
    desired, unsatisfied = _desired(ctx, plan, mapping, placement, carried)
    scanned = stage_preemptions(ctx, mapping, placement)
    staged = scanned.staged
    unsatisfied.extend(_staged_entries(staged))
    reclaimed = {(v, item.host_id) for item in staged for v in item.reclaimed}
    assignments = sorted(
        [
            a
            for a in [*plan.assignments, *_assignments(ctx, extra, mapping, assignments_of)]
            if (a.model_id, a.host_id) not in reclaimed
        ],
        key=lambda a: (a.host_id, a.model_id),
    )
    left = {a.model_id for a in assignments}
    replaced = {w for s in staged for w in s.replaced}
    mapping = {w: m for w, m in mapping.items() if w not in replaced or m in left}
    new_auth = [
        (s.workload, s.model_id, s.host_id, s.victims, s.replaced) for s in staged if s.authorized
    ]
    carried = {w: a for w, a in carried.items() if w not in {s.workload for s in staged}}
    explore = sorted(explorers(exploit, mapping))
    out = plan.model_copy(
        update={
            "assignments": assignments,
            "desired_replicas": desired,
            "unsatisfied": unsatisfied,
            "preemptions": [*plan.preemptions, *preemptions_of(staged)],
        }
    )
    out.portfolio = PortfolioReport(
        mapping=dict(sorted(mapping.items())),
        selected_models=sorted(set(mapping.values())),
        exploration_model=explore[0] if explore else None,
        admission=admission_rows(ctx, out, mapping, staged),
        candidates=candidate_rows(ctx, scanned.paths),
        solver=solver,
        replacements=authorizations(carried, new_auth),
    )
    return out
