"""Bounds of the soft levels once the replica levels force every replica count (pure).

When every replica level is at its static bound (bounds.py), every model m has exactly
reach(m) replicas (bounds.reachable_replicas): a round's value counts its members with at
least k replicas, its static bound the members that could reach k, and no count exceeds
reach. Then the placed multiset is known, and two soft levels have bounds that the
capacity-blind ones miss:

    quality      Σ_m (the reach(m) − fixed(m) best quality scores among m's candidates),
                 negative scores included (those replicas are placed anyway); the quality
                 level is a sum of per-candidate scores, as in bounds.static_bounds.
    spare_hosts  the admitting hosts without fixed replicas, less a lower bound on how many
                 of them the forced replicas need:
                   - one replica of a model per host: max_m (placed(m) − its candidate hosts
                     that hold fixed replicas);
                   - memory (L1): the fewest such hosts whose footprint budgets, with the free
                     budget of the hosts that hold fixed replicas, cover Σ_m placed(m)·mem(m),
                     mem(m) the smallest footprint among m's candidates;
                   - slots: likewise with the model-slot caps, when every candidate host has one;
                   - Martello-Toth L2 (S. Martello, P. Toth, "Lower bounds and reduction
                     procedures for the bin packing problem", Discrete Applied Mathematics 28
                     (1990) 59-70) when every host with candidates has one footprint budget W
                     and none holds fixed replicas: for each α ≤ W/2, the items larger than
                     W − α need a host each, those in (W/2, W − α] too, and the items in
                     [α, W/2] fill what those leave before opening more hosts.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from grid.planner.cpsat.bounds import reachable_replicas
from grid.planner.problem import PlacementProblem


def forced_counts(problem: PlacementProblem) -> dict[str, int]:
    """Per model, the variable replicas forced when every replica level meets its bound."""
    reach = reachable_replicas(problem)
    return {m: max(0, n - problem.fixed_count(m)) for m, n in reach.items()}


def forced_soft_bounds(
    problem: PlacementProblem, quality: Mapping[tuple[str, str], int]
) -> dict[str, int]:
    """The quality and spare_hosts bounds above (valid only under the forced counts)."""
    placed = forced_counts(problem)
    best_quality = 0
    for model_id, n in placed.items():
        if n:
            cands = problem.candidates_of_model(model_id)
            scores = [quality[(c.model_id, c.host_id)] for c in cands]
            best_quality += sum(heapq.nlargest(n, scores))
    fixed_hosts = {f.host_id for f in problem.fixed}
    free = [h for h in problem.hosts if h.admitting and h.host_id not in fixed_hosts]
    return {"quality": best_quality, "spare_hosts": len(free) - hosts_needed(problem, placed)}


def hosts_needed(problem: PlacementProblem, placed: Mapping[str, int]) -> int:
    """A lower bound on the admitting hosts without fixed replicas that hold `placed[m]`
    replicas of each model (module docstring)."""
    fixed_hosts = {f.host_id for f in problem.fixed}
    with_cands = [h for h in problem.hosts if problem.candidates_of_host(h.host_id)]
    free = [h for h in with_cands if h.host_id not in fixed_hosts]
    taken = [h for h in with_cands if h.host_id in fixed_hosts]
    sizes: list[int] = []
    distinct = 0
    for model_id, n in placed.items():
        if n <= 0:
            continue
        cands = problem.candidates_of_model(model_id)
        on_fixed = sum(1 for c in cands if c.host_id in fixed_hosts)
        distinct = max(distinct, n - on_fixed)
        sizes.extend([min(c.memory_mb for c in cands)] * n)
    if not sizes:
        return 0
    room_taken = sum(max(0, h.footprint_budget_mb) for h in taken)
    need = _cover([h.footprint_budget_mb for h in free], sum(sizes) - room_taken)
    if all(h.desired_cap is not None for h in with_cands):
        slots_taken = sum(h.desired_cap or 0 for h in taken)
        need = max(need, _cover([h.desired_cap or 0 for h in free], len(sizes) - slots_taken))
    budgets = {h.footprint_budget_mb for h in with_cands}
    if not taken and len(budgets) == 1:
        need = max(need, martello_toth_l2(sizes, budgets.pop()))
    return max(need, distinct)


def _cover(capacities: Sequence[int], amount: int) -> int:
    """The fewest capacities (largest first) that sum to at least `amount` (all of them, at
    most, when even they fall short: the levels' values are then not reachable anyway)."""
    if amount <= 0:
        return 0
    total = 0
    for count, cap in enumerate(sorted(capacities, reverse=True), start=1):
        total += cap
        if total >= amount:
            return count
    return len(capacities)


def martello_toth_l2(sizes: Sequence[int], capacity: int) -> int:
    """Martello-Toth's L2 lower bound on the bins of `capacity` that hold `sizes`."""
    if capacity <= 0 or not sizes:
        return 0
    items = sorted(sizes, reverse=True)
    best = math.ceil(sum(items) / capacity)
    half = capacity / 2
    for alpha in sorted({0, *(s for s in items if s <= half)}):
        big = sum(1 for s in items if s > capacity - alpha)
        mid = [s for s in items if capacity - alpha >= s > half]
        small = sum(s for s in items if half >= s >= alpha)
        room = len(mid) * capacity - sum(mid)
        best = max(best, big + len(mid) + max(0, math.ceil((small - room) / capacity)))
    return best
