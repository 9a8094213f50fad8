"""Planning in a tick: the plan's identity inputs, reuse of an unchanged plan, the solve with its
heuristic fallback, and the error and grace descriptions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from grid.fleet import Action, Deferral, FleetSnapshot, GridError, Plan
from grid.planner import Target, compute_targets, host_refusals
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.live_state import LastTick
from grid.runtime.controller.reports import TickReport

Planner = Callable[..., Plan]
REUSABLE_STATUSES = frozenset({"OPTIMAL", "HEURISTIC"})
ENGINE_FAILED = "the planning engine failed"


def reusable_plan(
    last: LastTick, digest: str, now: float, resolve_interval_s: float
) -> Plan | None:
    """The last plan, when its complete inputs (clock-derived facts included) are unchanged.

    A proven-optimal or deterministic heuristic plan is kept for as long as its inputs stay
    the same: re-solving could not improve it. A merely feasible plan (budget exhausted, or the
    planner's own heuristic fallback when the budget left CP-SAT no time) is kept for
    `resolve_interval_s`, then solved again in case more time finds a better one. A heuristic
    fallback after a failed engine (`solve` below) is never kept.
    """
    plan = last.plan
    if plan is None or digest != last.plan_digest:
        return None
    if plan.solver.status in REUSABLE_STATUSES:
        return plan
    fresh = abs(now - last.solved_at) < resolve_interval_s
    return plan if fresh and not engine_failed(plan) else None


def engine_failed(plan: Plan) -> bool:
    """Is this the heuristic plan `solve` fell back to after the configured engine raised?"""
    return plan.solver.status == "HEURISTIC_FALLBACK" and plan.solver.message.startswith(
        ENGINE_FAILED
    )


def solve(
    planner: Planner, snap: FleetSnapshot, config: ControllerConfig, report: TickReport
) -> Plan | None:
    """Solve with the configured engine; the heuristic if it fails; None (and why) if both do."""
    try:
        return planner(
            snap,
            engine=config.engine,
            time_limit_s=config.plan_budget_s,
            deterministic=config.deterministic,
            soft_stage_limit_s=config.soft_stage_budget_s or None,
        )
    except Exception as first:  # the solver must never stop the loop: fall back
        try:
            plan = planner(snap, engine="heuristic", time_limit_s=config.plan_budget_s)
        except Exception as second:
            report.error = f"planning failed: {describe(first)}; heuristic: {describe(second)}"
            return None
        plan.solver.status = "HEURISTIC_FALLBACK"
        plan.solver.message = f"{ENGINE_FAILED} ({config.engine}): {describe(first)}"
        return plan


def describe(exc: BaseException) -> str:
    if isinstance(exc, GridError):
        return f"[{exc.code}] {exc.message}"
    return type(exc).__name__


def plan_inputs(snap: FleetSnapshot, targets: dict[str, Target] | None = None) -> dict[str, Any]:
    """Everything the plan depends on, with clocks replaced by the facts derived from them.

    Raw timestamps are dropped so an idle fleet keeps one generation; what the planner reads
    from the clock is kept instead: each host's eligibility (heartbeat freshness), each model's
    targets (scale-down cooldown) and which residencies are still inside their minimum
    residency (preemption protection). `targets`: compute_targets(snap) when the caller has it.
    """
    doc = snap.model_dump(mode="json", exclude={"now", "history"})
    for host in doc["hosts"]:
        host.pop("last_heartbeat", None)
        for res in host["residencies"]:
            res.pop("loaded_at", None)
            res.pop("last_used_at", None)
        for entry in host.get("predictive_cache", []):
            entry.pop("cached_at", None)  # rebuilt from an age at every heartbeat
    profiles = {m.model_id: m for m in snap.models}
    protected = sorted(
        (h.host_id, r.model_id)
        for h in snap.hosts
        for r in h.residencies
        if r.loaded_at is None
        or snap.now - r.loaded_at
        < (profiles[r.model_id].min_residency_s if r.model_id in profiles else 0.0)
    )
    prefetch = snap.policy.prefetch
    doc["clock_facts"] = {
        "refusals": {h.host_id: host_refusals(h, snap) for h in snap.hosts},
        # what the predictive cache reads from an entry's age: replaceable, expired
        "predictive_age": sorted(
            (
                h.host_id,
                e.model_id,
                snap.now - e.cached_at >= prefetch.replacement_min_age_s,
                snap.now - e.cached_at >= prefetch.cache_ttl_s,
            )
            for h in snap.hosts
            for e in h.predictive_cache
        ),
        "targets": {m: asdict(t) for m, t in sorted((targets or compute_targets(snap)).items())},
        "protected": protected,
    }
    return doc


def grace_deferral(action: Action, anchor: float | None, config: ControllerConfig) -> Deferral:
    until = (anchor or action.not_before) + config.membership_grace_s
    return Deferral(
        kind=action.kind,
        host_id=action.host_id,
        model_id=action.model_id,
        code="membership_grace",
        message="the controller restarted recently; destructive work and replicas beyond the "
        "ready set wait until the fleet has re-registered",
        retry_at=until,
    )
