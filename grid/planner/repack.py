"""Proactive repack: move an incumbent elsewhere so a demanded model can take its host (pure).

When a model with eviction authority cannot fit a host only because an incumbent occupies it,
and that incumbent fits another host right now, the plan relocates the incumbent instead of
evicting it: the incumbent's new replica is placed on the other host (a normal LOAD/WARM), the
old copy leaves the plan, and the reconciler drains it only once the replacement is READY
(last-replica protection). The demanded model stays unsatisfied until a later snapshot proves
its host's memory free, exactly as after an eviction, but nobody loses service.

Who may be moved: live, managed, reusable incumbents that the plan keeps on the host, not pinned
there, on a host whose actuator can drain and unload. An incumbent of equal or higher priority
is moved only when the host is the demanded model's sole compatible host (the spec's hard
override); minimum residency is not checked here, because the reconciler delays the drain
until it has elapsed. The destination must take the incumbent now, without evicting anything,
under the same hard rules as placement: the placement fit rule (`cpsat.ledger.host_blockers`:
both memory ledgers, model slots, colocation ceilings and exclusions, disk) against the plan's
placements there, whether the mover's replica there is new or an incumbent the plan had
dropped; and, for a new replica or a host with staged beneficiaries, `fits_after(...,
victims=∅)` on the destination's view, which also counts every live process and earlier
staged work.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import ModelProfile, ResidencyState
from grid.planner.cpsat import host_blockers, host_load
from grid.planner.eligibility import pair_refusals
from grid.planner.levels import quality_scores
from grid.planner.preemption_host import (
    HostView,
    Staged,
    beneficiary_demand,
    fits_after,
)
from grid.planner.preemption_rules import EVICTION_ACTUATORS
from grid.planner.problem import Candidate, PlacementProblem


@dataclass(frozen=True)
class Repack:
    mover: str  # the incumbent model that relocates
    source: str  # the host it leaves (the beneficiary's future host)
    destination: Candidate  # its new placement
    incoming: Staged  # the beneficiary's demand on the source host
    planned: bool  # the plan already places the mover there (a move already under way)


def compatible_hosts(problem: PlacementProblem, model: ModelProfile) -> list[str]:
    """Hosts that could ever take the model now, ignoring memory and slots."""
    return [
        h.host_id
        for h in problem.snapshot.hosts
        if problem.host_by_id[h.host_id].admitting and not pair_refusals(model, h, cached=True)
    ]


def find_repack(
    problem: PlacementProblem,
    views: dict[str, HostView],
    model: ModelProfile,
    source: HostView,
    sole_host: bool,
) -> Repack | None:
    """The best single-incumbent relocation that frees `source` for `model`, if any."""
    host = source.host
    if source.occupied_by(model.model_id) or not source.budget.admitting:
        return None
    if not set(host.actuator_capabilities) >= EVICTION_ACTUATORS:
        return None
    incoming = beneficiary_demand(host, model)
    if incoming is None or pair_refusals(model, host, cached=incoming.cached):
        return None
    if fits_after(problem, source, incoming, frozenset()):
        return None  # it fits already: nothing to move
    scores = quality_scores(problem)
    best: tuple[tuple[int, int, int, str, str], Repack] | None = None
    for mover_id, res in sorted(source.live.items()):
        profile = problem.model_by_id.get(mover_id)
        if profile is None or not res.is_managed or res.state is not ResidencyState.READY:
            continue  # only a serving managed incumbent is worth relocating make-before-break
        if host.host_id in profile.pinned_hosts:
            continue
        if profile.priority >= model.priority and not sole_host:
            continue
        if not fits_after(problem, source, incoming, frozenset({mover_id})):
            continue
        for dest, planned in _destinations(problem, views, mover_id, source):
            # Sticky first: a move already planned or under way beats starting another one.
            rank = 0 if planned else (1 if not dest.is_new else 2)
            key = (
                profile.priority,
                rank,
                -scores[(mover_id, dest.host_id)],
                mover_id,
                dest.host_id,
            )
            if best is None or key < best[0]:
                best = (key, Repack(mover_id, host.host_id, dest, incoming, planned))
    return None if best is None else best[1]


def _destinations(
    problem: PlacementProblem, views: dict[str, HostView], mover_id: str, source: HostView
) -> list[tuple[Candidate, bool]]:
    """Where the mover can serve instead of `source`: (candidate, already planned there)."""
    out: list[tuple[Candidate, bool]] = []
    if mover_id not in source.plan:
        # The plan already moved it (an earlier tick's repack under way): keep that target.
        for host_id, planned_view in views.items():
            cand = planned_view.plan.get(mover_id)
            if host_id != source.host.host_id and cand is not None:
                out.append((cand, True))
        return out
    for dest in problem.candidates_of_model(mover_id):
        view = views.get(dest.host_id)
        if dest.host_id == source.host.host_id or view is None or mover_id in view.plan:
            continue
        if dest.is_new and view.occupied_by(mover_id):
            continue
        if takes_move(problem, view, dest):
            # new: a normal LOAD/WARM there; incumbent: a replacement already loading,
            # warming or serving there that the plan had not kept
            out.append((dest, False))
    return out


def takes_move(problem: PlacementProblem, view: HostView, dest: Candidate) -> bool:
    """Can the plan add `dest` on its host now, beside the plan's placements there?"""
    load = host_load(problem, dest.host_id, view.plan.values())
    if host_blockers(problem, load, dest):
        return False
    if not dest.is_new and not view.staged:
        return True  # an incumbent: no live process or fetch is added
    # A new process, or beneficiaries staged here, must also fit the host's future (every
    # live process counted; conservative for an incumbent, whose memory is then counted twice).
    moving = Staged(dest.model_id, dest.memory_mb, dest.disk_mb, dest.cached)
    return fits_after(problem, view, moving, frozenset())
