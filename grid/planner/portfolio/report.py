"""Admission rows and candidate rows of the plan's `portfolio` (pure: they explain, not decide).

One admission row per active workload, from the final plan and observed residencies:
    awaiting-plan         a staged preemption of stale speculative capacity makes room; the
                          model is placed once a later snapshot shows the memory free
    deferred              below the evidence gate, the spare-capacity proof failed, or a
                          feasible workload the portfolio left out under current capacity
    infeasible            no profile scores it, or no live host can ever host a candidate
    blocked-by-residency  every candidate is refused only by live residencies on the hosts
    capacity-contended    candidates are compatible but none fits current headroom
    undersupplied         mapped, but fewer replicas than desired are placed
    ready / starting / planned   mapped: a READY replica serves it / a planned replica is
                          loading or warming / only new placements are planned
Every reason starts with a stable code (`below_evidence_gate: 2 of 3 observations`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grid.fleet import AdmissionRow, AdmissionState, CandidateRow, Plan, ResidencyState
from grid.planner.portfolio.context import PairInfo, PortfolioContext
from grid.planner.portfolio.paths import PathOption
from grid.planner.portfolio.preempt import StagedWorkload


def candidate_rows(
    ctx: PortfolioContext, paths: Mapping[tuple[str, str], Sequence[PathOption]] | None = None
) -> list[CandidateRow]:
    rows = sorted(ctx.pairs.values(), key=lambda p: (p.workload, -p.utility, p.model_id))
    paths = paths or {}
    return [
        CandidateRow(
            workload=p.workload,
            model_id=p.model_id,
            feasible=p.feasible,
            rejection=p.rejection,
            eligible_hosts=len(p.keys),
            best_host=p.best_host,
            startup_s=p.startup_s,
            transition_penalty=round(p.transition_penalty, 2),
            utility=round(p.utility, 2),
            confidence=round(p.evidence.confidence, 3),
            exploration_bonus=round(p.bonus, 2),
            preemption_paths=[
                f"{o.host_id}: {', '.join(o.victims)}"
                for o in paths.get((p.workload, p.model_id), [])
            ],
        )
        for p in rows
    ]


def _residency_states(ctx: PortfolioContext) -> dict[tuple[str, str], ResidencyState]:
    return {(r.model_id, h.host_id): r.state for h in ctx.snapshot.hosts for r in h.residencies}


def _unmapped(ctx: PortfolioContext, workload: str) -> tuple[AdmissionState, str, PairInfo | None]:
    pairs = sorted(
        (p for (w, _m), p in ctx.pairs.items() if w == workload),
        key=lambda p: (-p.utility, p.model_id),
    )
    feasible = [p for p in pairs if p.feasible]
    if feasible:
        best = feasible[0]
        return (
            AdmissionState.DEFERRED,
            f"deferred_under_capacity: {best.model_id} fits alone, but the portfolio gives the "
            "room to workloads with more coverage or pressure",
            best,
        )
    if not pairs:
        return (
            AdmissionState.INFEASIBLE,
            f"no_candidate_model: no model profile scores {workload}",
            None,
        )
    best = pairs[0]
    if all(p.blocked_by_residency for p in pairs):
        return AdmissionState.BLOCKED_BY_RESIDENCY, best.rejection or "blocked_by_residency", best
    if any((p.rejection or "").startswith("no_headroom") for p in pairs):
        contended = next(p for p in pairs if (p.rejection or "").startswith("no_headroom"))
        return AdmissionState.CAPACITY_CONTENDED, contended.rejection or "", contended
    return AdmissionState.INFEASIBLE, best.rejection or "no_eligible_host", best


def _unplaced_row(
    ctx: PortfolioContext,
    workload: str,
    offered: float,
    waiting: Mapping[str, StagedWorkload],
) -> AdmissionRow:
    """The row of a workload the portfolio maps to no model: awaiting its staged preemption,
    admitted but unmapped, or deferred by its gate (its best feasible candidate named)."""
    gate = ctx.gates[workload]
    pair: PairInfo | None
    if workload in waiting:
        item = waiting[workload]
        state = AdmissionState.AWAITING_PLAN
        reason = (
            f"preemption_staged: {item.model_id} loads on {item.host_id} once "
            f"{', '.join(item.victims)} drain"
        )
        pair = ctx.pairs[(workload, item.model_id)]
    elif gate.admitted:
        state, reason, pair = _unmapped(ctx, workload)
    else:
        state, reason = AdmissionState.DEFERRED, gate.reason
        feasible = sorted(
            (p for (w, _m), p in ctx.pairs.items() if w == workload and p.feasible),
            key=lambda p: (-p.utility, p.model_id),
        )
        pair = feasible[0] if feasible else None
    return AdmissionRow(
        workload=workload,
        state=state,
        reason=reason,
        model_id=pair.model_id if pair else None,
        offered_concurrency=offered,
        desired=0,
        planned=0,
        ready=0,
        missing=0,
        eligible_hosts=len(pair.keys) if pair else 0,
        startup_s=pair.startup_s if pair else None,
    )


def _mapped_row(
    ctx: PortfolioContext,
    plan: Plan,
    states: Mapping[tuple[str, str], ResidencyState],
    workload: str,
    model_id: str,
    offered: float,
) -> AdmissionRow:
    """The row of a mapped workload: undersupplied, ready, starting or planned."""
    pair = ctx.pairs[(workload, model_id)]
    placed = sorted(a.host_id for a in plan.assignments if a.model_id == model_id)
    desired = plan.desired_replicas.get(model_id, 0)
    ready = [h for h in placed if states.get((model_id, h)) is ResidencyState.READY]
    starting = [
        h
        for h in placed
        if states.get((model_id, h)) in (ResidencyState.LOADING, ResidencyState.WARMING)
    ]
    missing = max(0, desired - len(placed))
    if missing and placed:
        state = AdmissionState.UNDERSUPPLIED
        reason = f"undersupplied: {len(placed)} of {desired} replicas of {model_id} placed"
    elif ready:
        state, reason = AdmissionState.READY, f"ready: {model_id} serves it on {ready[0]}"
    elif starting:
        state = AdmissionState.STARTING
        reason = f"starting: {model_id} is loading or warming on {starting[0]}"
    else:
        state = AdmissionState.PLANNED
        where = ", ".join(placed) if placed else "no host"
        canary = " (canary)" if pair.weak else ""
        reason = f"placed: {model_id} on {where}{canary}"
    return AdmissionRow(
        workload=workload,
        state=state,
        reason=reason,
        model_id=model_id,
        offered_concurrency=offered,
        desired=desired,
        planned=len(placed),
        ready=len(ready),
        missing=missing,
        eligible_hosts=len(pair.keys),
        startup_s=pair.startup_s,
    )


def admission_rows(
    ctx: PortfolioContext,
    plan: Plan,
    mapping: dict[str, str],
    staged: Sequence[StagedWorkload] = (),
) -> list[AdmissionRow]:
    states = _residency_states(ctx)
    waiting = {s.workload: s for s in staged}
    rows: list[AdmissionRow] = []
    for workload, forecast in sorted(ctx.snapshot.workloads.items()):
        offered = round(forecast.offered_concurrency, 3)
        model_id = mapping.get(workload)
        if model_id is None:
            rows.append(_unplaced_row(ctx, workload, offered, waiting))
        else:
            rows.append(_mapped_row(ctx, plan, states, workload, model_id, offered))
    return rows
