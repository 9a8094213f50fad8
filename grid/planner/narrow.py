"""One build for a plan with workloads: the base problem narrowed from the portfolio's (pure).

A plan with workloads solves two placement problems over the same snapshot: the base plan's,
with the base targets, and the portfolio's (portfolio/context.py), whose targets ask for at
least as many replicas of every model (`portfolio_targets`). Targets enter `build_problem`
only through one test, "is the model desired at all" (a model desired 0 times is refused on
every host with `not_desired`); every other decision reads the snapshot. So the pipeline
builds the portfolio's problem once and derives the base problem from it here: the candidates
of the models the base targets do not desire are dropped and their pairs refused with
`not_desired`, in the order `build_problem` would list them. The result equals
`build_problem(snap, targets)` (tests/planner/test_build_once.py checks it against that).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from grid.fleet import FleetSnapshot
from grid.planner.problem import NOT_DESIRED, Candidate, PlacementProblem
from grid.planner.refusals import RefusalTable
from grid.planner.targets import Target

# What build_problem leaves in `memo` that holds for every target (the rest is derived later).
BUILD_MEMO = ("build_shapes", "shaped_per_host", "host_major")


def portfolio_targets(
    snap: FleetSnapshot, base: dict[str, Target], models: set[str] | None = None
) -> dict[str, Target]:
    """The portfolio problem's targets: every model that scores an active workload (or those
    of `models`) desired up to its ceiling (max_replicas, or its pins when there are more)."""
    if models is None:
        models = {
            m.model_id for m in snap.models if any(w in snap.workloads for w in m.workload_scores)
        }
    out = dict(base)
    for m in snap.models:
        if m.model_id in models:
            ceiling = max(m.max_replicas, len(set(m.pinned_hosts)))
            out[m.model_id] = replace(
                base[m.model_id], desired=max(base[m.model_id].desired, ceiling)
            )
    return out


def narrowed(wide: PlacementProblem, targets: dict[str, Target]) -> PlacementProblem:
    """`build_problem(wide.snapshot, targets)`, given `wide` built with targets that desire
    every model `targets` desires (ValueError otherwise)."""
    missing = [
        m.model_id
        for m in wide.models
        if targets[m.model_id].desired > 0 and wide.targets[m.model_id].desired == 0
    ]
    if missing:
        raise ValueError(f"the wider problem does not desire {', '.join(missing)}")
    dropped = {
        m.model_id
        for m in wide.models
        if targets[m.model_id].desired == 0 and wide.targets[m.model_id].desired > 0
    }
    memo = {k: wide.memo[k] for k in BUILD_MEMO if k in wide.memo}
    if not dropped:
        return replace(wide, targets=targets, memo=memo)
    memo.update(_shapes(wide, dropped))
    candidates = {k: c for k, c in wide.candidates.items() if k[0] not in dropped}
    by_host: dict[str, list[Candidate]] = {}
    for host_id, own in wide._by_host.items():
        kept = [c for c in own if c.model_id not in dropped]
        if kept:
            by_host[host_id] = kept if len(kept) < len(own) else own
    by_model = {m: cands for m, cands in wide._by_model.items() if m not in dropped}
    return replace(
        wide,
        targets=targets,
        candidates=candidates,
        refusals=_refused(wide, dropped),
        memo=memo,
        _by_model=by_model,
        _by_host=by_host,
    )


def _shapes(wide: PlacementProblem, dropped: set[str]) -> dict[str, object]:
    """A shape host whose per-host models (allow, deny or pin lists) are all dropped is a
    plain member of its build shape now, as in a build with the narrower targets."""
    shapes = dict(cast(dict[str, int], wide.memo.get("build_shapes", {})))
    shaped = cast(dict[str, tuple[int, list[str]]], wide.memo.get("shaped_per_host", {}))
    per_host: dict[str, tuple[int, list[str]]] = {}
    for host_id, (index, models) in shaped.items():
        left = [m for m in models if m not in dropped]
        if left:
            per_host[host_id] = (index, left)
        else:
            shapes[host_id] = index
    order = {b.host_id: i for i, b in enumerate(wide.hosts)}
    return {
        "build_shapes": dict(sorted(shapes.items(), key=lambda kv: order[kv[0]])),
        "shaped_per_host": per_host,
    }


def _refused(wide: PlacementProblem, dropped: set[str]) -> RefusalTable:
    """Every host refuses the dropped models with `not_desired`, in model order; hosts that
    shared one refusal dict share its narrowed copy."""
    order = [m.model_id for m in wide.models]
    table = RefusalTable()
    shared: dict[int, tuple[object, dict[str, list[str]]]] = {}  # id -> (old, narrowed)
    for budget in wide.hosts:
        old = wide.refusals.of_host(budget.host_id)
        found = shared.get(id(old))
        new = found[1] if found is not None else None
        if new is None:
            new = {
                m: NOT_DESIRED if m in dropped else old[m]
                for m in order
                if m in dropped or m in old
            }
            shared[id(old)] = (old, new)  # the old dict stays alive: its id is not reused
        table.set_host(budget.host_id, new)
    return table
