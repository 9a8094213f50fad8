"""The fleet spare-capacity proof that lets image/video work at 1.0–1.5 units earn a canary (pure).

Against the base plan (direct, baseline and ordinary-evidence work planned first), the fleet
proves it can safely explore one candidate model when all of these hold:
    second host   the candidate fits (now, alongside the base plan) on at least two hosts;
    slots         free model slots on admitting hosts with a known slot limit (an unknown limit
                  counts as no hypothetical headroom), after losing the host with the most free
                  slots (one node failure), still hold the canary and one unseen workload;
    memory        free make-before-break memory, after losing the host with the most of it,
                  exceeds one copy of every configured model not yet placed plus the canary.

The spare-slot reserve of the objective (`effective_spare_reserve`): the spec keeps spare slots
"when two portfolios serve the same demand". A slot is spare only while the fleet has room for
what the admitted workloads ask: when their replica needs exceed the model slots the base plan
leaves free on slot-limited admitting hosts, every free slot can serve demand now and the
reserve for this tick is 0; otherwise it is `policy.spare_slot_reserve`. A workload's need
counts only up to the free slots it can use:
    asked_w    replicas at its least-demanding feasible candidate, less that model's idle base
               replicas (the caller's `asked`);
    usable_w   the free slots of the hosts where some feasible candidate of w has a new key
               (a (model, host) pair that fits alongside the base plan and is not in it);
    saturated  Σ_w min(asked_w, usable_w) > free.
A workload short of replicas whose models cannot go where the slots are free (a video model
already on the only host that can hold it) does not make those slots demanded: they stay the
reserve instead of going to a gratuitous upgrade of a served workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from grid.fleet import PortfolioPolicy
from grid.planner.cpsat import Ledger
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


def effective_spare_reserve(
    problem: PlacementProblem,
    base_keys: Iterable[Key],
    asked: Mapping[str, int],
    usable: Mapping[str, Iterable[str]],
    policy: PortfolioPolicy,
) -> int:
    """`policy.spare_slot_reserve`, or 0 when the admitted workloads' replica needs (`asked`:
    workload -> replicas at its least-demanding feasible candidate), each capped by the free
    slots of its `usable` hosts (workload -> hosts with a new key of a feasible candidate),
    exceed the free slots."""
    reserve = policy.spare_slot_reserve
    per_host: dict[str, int] = {}
    for _m, h in base_keys:
        per_host[h] = per_host.get(h, 0) + 1
    free: dict[str, int] = {}
    for budget in problem.hosts:
        if not budget.admitting:
            continue
        if budget.slot_limit <= 0 or budget.desired_cap is None:
            return reserve  # an unlimited host: the term is the reserve whatever is placed
        free[budget.host_id] = max(0, budget.desired_cap - per_host.get(budget.host_id, 0))
    demanded = sum(
        min(n, sum(free.get(h, 0) for h in set(usable.get(w, ())))) for w, n in asked.items()
    )
    return 0 if demanded > sum(free.values()) else reserve
