"""The fleet spare-capacity proof that lets image/video work at 1.0–1.5 units earn a canary (pure).

Against the base plan (direct, baseline and ordinary-evidence work planned first), the fleet
proves it can safely explore one candidate model when all of these hold:
    second host   the candidate fits (now, alongside the base plan) on at least two hosts;
    slots         free model slots on admitting hosts with a known slot limit (an unknown limit
                  counts as no hypothetical headroom), after losing the host with the most free
                  slots (one node failure), still hold the canary and one unseen workload;
    memory        free make-before-break memory, after losing the host with the most of it,
                  exceeds one copy of every configured model not yet placed plus the canary.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid.fleet.workloads import PortfolioPolicy
from grid.planner.cpsat.ledger import Ledger
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]


def spare_capacity_proof(
    problem: PlacementProblem,
    ledger: Ledger,
    candidate_keys: Sequence[Key],
    policy: PortfolioPolicy,
) -> bool:
    hosts = {h for _m, h in candidate_keys}
    if len(hosts) < 2:
        return False
    slots: list[int] = []
    memory: list[int] = []
    for load in ledger.hosts.values():
        budget = load.budget
        if not budget.admitting:
            continue
        memory.append(max(0, budget.new_budget_mb - load.new_mb))
        if budget.slot_limit > 0 and budget.new_cap is not None:
            slots.append(max(0, budget.new_cap - len(load.new_models)))
        else:
            slots.append(0)  # unknown slot limit: no hypothetical headroom
    if not memory:
        return False
    slots_after_failure = sum(slots) - max(slots)
    memory_after_failure = sum(memory) - max(memory)
    placed = {m for m, _h in ledger.placed} | {f.model_id for f in problem.fixed}
    candidate_mb = min(problem.candidates[k].memory_mb for k in candidate_keys)
    catalog_mb = sum(m.memory_mb for m in problem.models if m.model_id not in placed)
    return slots_after_failure >= 1 + policy.spare_slot_reserve - 1 and (
        memory_after_failure > catalog_mb + candidate_mb
    )
