"""Hosts whose draining capacity is held for a starved workload (pure).

A starvation reclaim (preempt.py) drains an excess replica so that a starved workload's model
fits; the beneficiary is placed only once a later snapshot shows the memory released. Between
those ticks the freed room must not go to another model: a portfolio that put a different
model there would leave the starved workload where it was, with one replica fewer for the
reclaimed model's workloads (measured in the scenario lab: 4 machines, seed 42, coder-32b took
wan-video's room on gpu-01 one tick after general-14b began to drain).

The rule, stateless (it reads only the snapshot): a host is *reserved* when it has a managed
DRAINING residency and some starved workload (no feasible candidate at all, ordinary evidence)
has a candidate model that would fit the host once every draining residency there is gone
(preemption_host.fits_after with the base plan's placements). Reserved hosts join the
portfolio's `outside_hosts`: their base placements stay, the portfolio adds nothing there.
"""

from __future__ import annotations

from collections.abc import Iterable

from grid.fleet import FleetSnapshot, ResidencyState
from grid.planner.eligibility import pair_refusals
from grid.planner.preemption_host import beneficiary_demand, build_view, fits_after
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]


def reserved_hosts(
    snap: FleetSnapshot,
    problem: PlacementProblem,
    base_keys: Iterable[Key],
    starved_models: Iterable[str],
) -> frozenset[str]:
    models = sorted(set(starved_models))
    if not models:
        return frozenset()
    placed = {k for k in base_keys if k in problem.candidates}
    out: set[str] = set()
    for budget in problem.hosts:
        host = snap.host(budget.host_id)
        if host is None or not budget.admitting:
            continue
        draining = frozenset(
            r.model_id
            for r in host.residencies
            if r.is_managed and r.state is ResidencyState.DRAINING
        )
        if not draining:
            continue
        view = build_view(problem, host, placed)
        for model_id in models:
            profile = problem.model_by_id.get(model_id)
            if profile is None or any(r.model_id == model_id for r in host.residencies):
                continue
            if pair_refusals(profile, host, cached=model_id in host.cached_models):
                continue
            incoming = beneficiary_demand(host, profile)
            if incoming is not None and fits_after(problem, view, incoming, draining):
                out.add(budget.host_id)
                break
    return frozenset(out)
