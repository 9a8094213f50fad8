"""State-dependent mapping hysteresis (pure): the mapping in effect keeps its workloads unless
the decided portfolio is better by a margin at the level that decides.

State      the mapping in effect, μ₀(w) = snapshot.workloads[w].mapped_model (the last plan's
           portfolio, where `auto` requests of w route now), kept only for admitted workloads
           whose pair (w, μ₀(w)) is currently feasible. No lease, no timer: the snapshot says
           what serves now, and the next plan's mapping is the next tick's state.
Held       μ_h = μ* with every such w set back to μ₀(w) (μ* the engine's decision), placed by
           the greedy ledger (search.place: incumbents first, so the replicas serving now are
           reused; no further replica takes a slot of the spare-slot reserve, which the decided
           portfolio keeps too, so the two are compared on equal terms) and scored with
           score.evaluate.
Switch     μ* replaces μ_h only when, at the first level (score.LEVELS order) whose gain
           g = value(μ*) − value(μ_h) (sign by sense) leaves the margin band [−τ, τ], g > τ:
               covered, failures, pressure, spare_slots   τ = 0 (service is never traded)
               missing   τ = policy.portfolio.hysteresis_missing_replicas (2)
               utility   τ = 10 · hysteresis_utility_points (tenths; 5 points)
           transition and quality never justify a switch (inside every band: μ_h stays).
           After a justified switch μ* is the next tick's μ₀ and the same margins protect it:
           the penalty reverses.
Budget     a held workload is an incumbent, not an exploration: the exploitation map E is set
           to μ₀ on held workloads, so the exploration budget counts only the new choices.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.score import LEVELS, evaluate
from grid.planner.portfolio.search import explorers, has_replica, place

DECIDING = ("covered", "failures", "pressure", "spare_slots", "missing", "utility")


@dataclass(frozen=True)
class Held:
    mapping: dict[str, str]
    placement: set[Key]
    exploit: dict[str, str]
    held: tuple[str, ...]  # workloads kept on their mapping in effect against the decision


def in_effect(ctx: PortfolioContext) -> dict[str, str]:
    out: dict[str, str] = {}
    for w in ctx.admitted:
        m = ctx.forecast(w).mapped_model
        pair = ctx.pairs.get((w, m)) if m is not None else None
        if m is not None and pair is not None and pair.feasible:
            out[w] = m
    return out


def margins(ctx: PortfolioContext) -> dict[str, int]:
    policy = ctx.policy
    out = dict.fromkeys(DECIDING, 0)
    out["missing"] = policy.hysteresis_missing_replicas
    out["utility"] = round(10 * policy.hysteresis_utility_points)
    return out


def justified(new: dict[str, int], held: dict[str, int], tolerance: dict[str, int]) -> bool:
    """Whether `new` beats `held` by more than the margin at the first level outside its band."""
    for name, sense in LEVELS:
        if name not in tolerance:
            return False
        gain = new[name] - held[name] if sense == "max" else held[name] - new[name]
        if gain > tolerance[name]:
            return True
        if gain < -tolerance[name]:
            return False
    return False


def hold(
    ctx: PortfolioContext, mapping: dict[str, str], placement: set[Key], exploit: dict[str, str]
) -> Held:
    current = in_effect(ctx)
    changed = sorted(w for w, m in current.items() if mapping.get(w) != m)
    if not changed:
        return Held(mapping, placement, exploit, ())
    kept = {**mapping, **current}
    kept_place = place(ctx, kept, keep_reserve=True)
    new = evaluate(ctx, mapping, placement)
    old = evaluate(ctx, kept, kept_place)
    if justified(new, old, margins(ctx)):
        return Held(mapping, placement, exploit, ())
    covered = {w: m for w, m in kept.items() if has_replica(ctx, m, kept_place)}
    held = tuple(w for w in changed if w in covered)
    budget = {**exploit, **{w: current[w] for w in held}}
    if len(explorers(budget, covered)) > ctx.policy.max_exploration_models:
        return Held(mapping, placement, exploit, ())
    return Held(covered, kept_place, budget, held)
