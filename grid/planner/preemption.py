"""Staged preemption: name the victims that must drain so a more important model can load (pure).

After an engine's placement, a model still missing a replica that it has *authority* for (a
required baseline replica, a pin, or directly demanded replicas; never inferred-only demand,
which may use spare capacity but never evicts) may claim a host occupied by lower-priority
managed work. Per missing replica, most important first (the objective's level order), every
admitting, compatible host where the model is not already present is examined (only the
missing pinned hosts while a pin is unmet); on each, the best sufficient victim set is, in order:
the lowest highest-victim priority, the fewest busy victims (failed, draining and idle ones are
preferred), the lowest warm-back cost, the fewest victims. Across hosts a new failure domain
comes first while the model's domain goal is unmet, then the same order, then host_id.

Before evicting, `stage_changes` tries a repack (repack.py): when a serving incumbent on the host
fits another host right now, it moves there instead of losing service. The beneficiary stays
unplaced: the reconciler drains the victims (a relocated one only once its new replica is READY),
and a later snapshot proves the memory free. Victims that the plan kept leave the plan. At most
`policy.max_evictions_per_plan` evictions are staged, and no victim is named twice. Who may be a
victim is `preemption_rules.victim_fence`, the rule the reconciler's gates use too. A new load
of a lower class that the plan put on the host (nothing of it runs yet) also yields its room
when the beneficiary needs it beside the evictions (it leaves the plan; nothing drains), so the
freed host is not refilled by a lower class first; when such drops alone would make room, no
eviction is staged (the engine's business).

Bounded work: `stage_within` takes an `out_of_time` test, asked before each missing replica
and each host examined for it; once it answers yes, staging stops with what it has committed
(fewer evictions are always valid) and counts the models still short of replicas they have
authority for, which no one examined (the plan reports them).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

from grid.fleet import ModelProfile, Preemption
from grid.planner.eligibility import pair_refusals
from grid.planner.heuristic_order import (
    STAGE_BASELINE,
    LevelKey,
    replica_level,
    replica_stage,
)
from grid.planner.preemption_host import (
    HostView,
    Staged,
    Victim,
    beneficiary_demand,
    build_view,
    fits_after,
    victims_on,
)
from grid.planner.preemption_rules import eviction_authority
from grid.planner.problem import PlacementProblem
from grid.planner.repack import compatible_hosts, find_repack

Key = tuple[str, str]
MAX_VICTIMS_ENUMERATED = 10  # per host; beyond this only the least valuable are combined
SetKey = tuple[int, int, float, int, tuple[str, ...]]


def stage_preemptions(
    problem: PlacementProblem, placed: set[Key]
) -> tuple[list[Preemption], set[Key]]:
    """Evictions for unmet baseline/pinned/direct replicas, and the plan keys they remove."""
    preemptions, removed, _added = _Stager(problem, placed, repack=False).run()
    return preemptions, removed


def stage_changes(problem: PlacementProblem, placed: set[Key]) -> tuple[list[Preemption], set[Key]]:
    """Repacks first (the incumbent moves, nobody loses service), then evictions.

    Returns the preemptions and the final placement: victims out, relocated incumbents in.
    """
    preemptions, final, _unexamined = stage_within(problem, placed, None)
    return preemptions, final


def stage_within(
    problem: PlacementProblem, placed: set[Key], out_of_time: Callable[[], bool] | None
) -> tuple[list[Preemption], set[Key], int]:
    """`stage_changes` that stops once `out_of_time()` (asked per missing replica and per host
    examined): the preemptions and final placement so far, and how many models short of
    replicas they have authority for were left unexamined (0 when it ran to the end)."""
    stager = _Stager(problem, placed, repack=True, out_of_time=out_of_time)
    preemptions, removed, added = stager.run()
    return preemptions, (placed - removed) | added, stager.unexamined


class _OutOfTime(Exception):
    """Raised inside one replica's host scan: nothing of that replica was committed yet."""


class _Stager:
    def __init__(
        self,
        problem: PlacementProblem,
        placed: set[Key],
        *,
        repack: bool,
        out_of_time: Callable[[], bool] | None = None,
    ) -> None:
        self.problem = problem
        self.repack = repack
        self.out_of_time = out_of_time
        self.unexamined = 0
        self.added: set[Key] = set()
        self.snap = problem.snapshot
        self.budget = self.snap.policy.max_evictions_per_plan
        on_host: dict[str, list[str]] = {}
        for model_id, host_id in placed:
            on_host.setdefault(host_id, []).append(model_id)
        self.views = {
            h.host_id: build_view(problem, h, placed, on_host.get(h.host_id, ()))
            for h in sorted(self.snap.hosts, key=lambda h: h.host_id)
        }
        # Hosts that hold, or will hold, a replica of each model: fixed, kept, or staged.
        self.present: dict[str, set[str]] = {m.model_id: set() for m in problem.models}
        for f in problem.fixed:
            self.present[f.model_id].add(f.host_id)
        for model_id, host_id in placed:
            self.present[model_id].add(host_id)
        self.preemptions: list[Preemption] = []
        self.removed: set[Key] = set()
        self.failed_pins: set[Key] = set()
        self.done: set[str] = set()
        self._sole_host: dict[str, bool] = {}

    def _authorized(self, model: ModelProfile) -> int:
        return eviction_authority(self.problem.targets[model.model_id])

    # -- main loop -------------------------------------------------------------------------
    def run(self) -> tuple[list[Preemption], set[Key], set[Key]]:
        while self.budget > 0:
            nxt = self._next_missing()
            if nxt is None:
                break
            model, hosts, pin_target = nxt
            try:
                self._check_time()
                staged = self._stage_one(model, hosts, pin_target)
            except _OutOfTime:
                self.unexamined = self._still_missing()
                break
            if staged:
                continue
            if pin_target:
                self.failed_pins.update((model.model_id, h) for h in hosts)
            else:
                self.done.add(model.model_id)
        return self.preemptions, self.removed, self.added

    def _check_time(self) -> None:
        if self.out_of_time is not None and self.out_of_time():
            raise _OutOfTime

    def _still_missing(self) -> int:
        """Models short of replicas they have authority for, not yet given up on."""
        return sum(
            1
            for m in self.problem.models
            if m.model_id not in self.done and len(self.present[m.model_id]) < self._authorized(m)
        )

    def _next_missing(self) -> tuple[ModelProfile, list[str], bool] | None:
        """The most important missing replica that has eviction authority, and its hosts."""
        best: tuple[LevelKey, str, ModelProfile, list[str], bool] | None = None
        for model in self.problem.models:
            model_id = model.model_id
            if model_id in self.done:
                continue
            present = self.present[model_id]
            if len(present) >= self._authorized(model):
                continue
            found = self._target_hosts(model, present)
            if found is None:
                self.done.add(model_id)
                continue
            hosts, pin_target = found
            level = replica_level(self.problem, model_id, len(present) + 1, pinned=pin_target)
            if best is None or (level, model_id) < (best[0], best[1]):
                best = (level, model_id, model, hosts, pin_target)
        return None if best is None else (best[2], best[3], best[4])

    def _target_hosts(
        self, model: ModelProfile, present: set[str]
    ) -> tuple[list[str], bool] | None:
        """A missing hard pin targets its exact host; else any host, within pin reservation."""
        pins = sorted(set(model.pinned_hosts))
        open_pins = [
            h
            for h in pins
            if h in self.views and h not in present and (model.model_id, h) not in self.failed_pins
        ]
        if open_pins:
            return open_pins, True
        unpinned_present = sum(1 for h in present if h not in pins)
        if unpinned_present >= self.problem.targets[model.model_id].desired - len(pins):
            return None
        return [h for h in self.views if h not in pins and h not in present], False

    def _stage_one(self, model: ModelProfile, host_ids: list[str], pin_target: bool) -> bool:
        if self.repack and self._repack_one(model, host_ids):
            return True
        present = self.present[model.model_id]
        domains = {self.problem.host_by_id[h].domain for h in present}
        need_domain = len(domains) < model.min_failure_domains
        best: tuple[tuple[int, SetKey, str], HostView, Staged, list[Victim], frozenset[str]] | None
        best = None
        for host_id in host_ids:
            self._check_time()
            found = self._best_on_host(model, self.views[host_id])
            if found is None:
                continue
            incoming, victims, set_key, dropped = found
            # Required diversity is reserved before the disruption comparison.
            same_domain = need_domain and self.problem.host_by_id[host_id].domain in domains
            key = (int(same_domain), set_key, host_id)
            if best is None or key < best[0]:
                best = (key, self.views[host_id], incoming, victims, dropped)
        if best is None:
            return False
        _key, view, incoming, victims, dropped = best
        kind = "pinned replica" if pin_target else _authority(self.problem, model, len(present))
        for model_id in sorted(dropped):  # a planned load yields its room: nothing to drain
            view.plan.pop(model_id, None)
            self.removed.add((model_id, view.host.host_id))
            self.present[model_id].discard(view.host.host_id)
        self._commit(model, view, incoming, victims, kind)
        return True

    def _repack_one(self, model: ModelProfile, host_ids: list[str]) -> bool:
        sole = self._sole_compatible_host(model)
        for host_id in host_ids:
            self._check_time()
            found = find_repack(self.problem, self.views, model, self.views[host_id], sole)
            if found is None:
                continue
            source, dest = self.views[found.source], self.views[found.destination.host_id]
            self.preemptions.append(
                Preemption(
                    victim_model_id=found.mover,
                    host_id=found.source,
                    beneficiary_model_id=model.model_id,
                    reason=(
                        f"repack: {found.mover} moves to {dest.host.host_id} and drains from "
                        f"{found.source} once ready there, so that priority-{model.priority} "
                        f"{model.model_id} ({found.incoming.memory_mb} MB) can load on "
                        f"{found.source}"
                    ),
                    relocated_to=dest.host.host_id,
                )
            )
            source.live.pop(found.mover, None)
            source.staged.append(found.incoming)
            self.present[model.model_id].add(found.source)
            if not found.planned:
                source.plan.pop(found.mover, None)
                self.removed.add((found.mover, found.source))
                self.present[found.mover].discard(found.source)
                dest.plan[found.mover] = found.destination
                self.added.add((found.mover, dest.host.host_id))
                self.present[found.mover].add(dest.host.host_id)
            self.budget -= 1
            return True
        return False

    def _sole_compatible_host(self, model: ModelProfile) -> bool:
        """The spec's hard override applies (memoized: asked once per missing replica)."""
        sole = self._sole_host.get(model.model_id)
        if sole is None:
            sole = self._sole_host[model.model_id] = len(compatible_hosts(self.problem, model)) == 1
        return sole

    def _best_on_host(
        self, model: ModelProfile, view: HostView
    ) -> tuple[Staged, list[Victim], SetKey, frozenset[str]] | None:
        host = view.host
        if view.occupied_by(model.model_id) or not view.budget.admitting:
            return None
        pool = victims_on(self.problem, view, model)[:MAX_VICTIMS_ENUMERATED]
        if not pool:
            return None
        incoming = beneficiary_demand(host, model)
        if incoming is None or pair_refusals(model, host, cached=incoming.cached):
            return None
        planned = displaceable_loads(self.problem, view, model)
        everyone = frozenset(v.model_id for v in pool) | planned
        if not fits_after(self.problem, view, incoming, everyone):
            return None  # even evicting every eligible victim is not enough
        if fits_after(self.problem, view, incoming, planned):
            return None  # it fits without evicting anyone: an engine's business
        options = [
            (_set_key(combo), combo)
            for size in range(1, min(len(pool), self.budget) + 1)
            for combo in combinations(pool, size)
        ]
        options.sort(key=lambda o: o[0])
        for set_key, combo in options:
            evicted = frozenset(v.model_id for v in combo)
            if fits_after(self.problem, view, incoming, evicted | planned):
                dropped = _fewest_drops(self.problem, view, incoming, evicted, planned)
                return incoming, list(combo), set_key, dropped
        return None

    def _commit(
        self,
        model: ModelProfile,
        view: HostView,
        incoming: Staged,
        victims: list[Victim],
        kind: str,
    ) -> None:
        host_id = view.host.host_id
        for victim in victims:
            reason = (
                f"priority-{victim.priority} {'idle' if victim.preferred else 'busy'} "
                f"{victim.model_id} drains so that priority-{model.priority} {model.model_id} "
                f"({incoming.memory_mb} MB, {kind}) can load on {host_id}"
            )
            self.preemptions.append(
                Preemption(
                    victim_model_id=victim.model_id,
                    host_id=host_id,
                    beneficiary_model_id=model.model_id,
                    reason=reason,
                )
            )
            view.live.pop(victim.model_id, None)
            if view.plan.pop(victim.model_id, None) is not None:
                self.removed.add((victim.model_id, host_id))
                self.present[victim.model_id].discard(host_id)
        view.staged.append(incoming)
        self.present[model.model_id].add(host_id)
        self.budget -= len(victims)


def displaceable_loads(
    problem: PlacementProblem, view: HostView, beneficiary: ModelProfile
) -> frozenset[str]:
    """The plan's new replicas on the host (nothing live yet) of strictly lower classes that are
    not pinned there: higher classes fill first, so a staged beneficiary takes their room too
    (only dropped from the plan: nothing runs, nothing drains)."""
    host_id = view.host.host_id
    out = set()
    for model_id, cand in view.plan.items():
        profile = problem.model_by_id.get(model_id)
        if not cand.is_new or model_id in view.live or profile is None:
            continue
        if profile.priority < beneficiary.priority and host_id not in profile.pinned_hosts:
            out.add(model_id)
    return frozenset(out)


def _fewest_drops(
    problem: PlacementProblem,
    view: HostView,
    incoming: Staged,
    evicted: frozenset[str],
    planned: frozenset[str],
) -> frozenset[str]:
    """Keep as many planned loads as still fit beside the beneficiary, most important first."""
    dropped = set(planned)
    order = sorted(planned, key=lambda m: (-problem.model_by_id[m].priority, m))
    for model_id in order:
        trial = frozenset(dropped - {model_id})
        if fits_after(problem, view, incoming, evicted | trial):
            dropped.discard(model_id)
    return frozenset(dropped)


def _authority(problem: PlacementProblem, model: ModelProfile, present: int) -> str:
    stage = replica_stage(problem, model.model_id, present + 1)
    return "required baseline replica" if stage == STAGE_BASELINE else "directly demanded replica"


def _set_key(victims: tuple[Victim, ...]) -> SetKey:
    return (
        max(v.priority for v in victims),
        sum(1 for v in victims if not v.preferred),
        round(sum(v.warm_back_s for v in victims), 6),
        len(victims),
        tuple(sorted(v.model_id for v in victims)),
    )
