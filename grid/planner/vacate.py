"""Vacate moves: free a whole host for a missing replica that needs one (pure, bounded).

The heuristic's repair moves one replica at a time; a model with a colocation ceiling of 1
(an exclusive host) or a footprint close to a host's whole memory needs every occupant of one
host moved elsewhere, which neither the repair nor CP-SAT (within a budget, on ~80,000
candidates) finds. For each missing replica (first below the baseline, then below the
desired count), most important class first, a vacate move takes a candidate host without
live residencies (live inventory stays during the plan, so it cannot be
vacated), removes every placement there, places the missing replica, and re-places each removed
replica on its first other candidate host that fits (shared fit rule, cpsat/ledger.py). The move
is kept only when the replica levels improve lexicographically (levels.compare), so the result
is never worse than the input; at most MAX_TRIALS moves per pass are tried, hosts with the fewest
placements first (host ID breaks ties), so it ends quickly with the same result every run.

Chain moves (two steps), after both passes, for the models still short: the same move, but an
evicted replica that fits no other host by first fit may itself vacate one of its candidate
hosts (fewest placements first, at most MAX_CHAIN_HOSTS of them, none of them the host first
freed): that host's occupants are re-placed by first fit elsewhere (neither of the two freed
hosts), and the chain is taken only when all of them fit. This frees a host held by a model
that needs a host to itself (colocation ceiling 1) for another such model: on the generated
1,000 x 200 mixed fleet a solo `video-*` model moves to a host freed of small models, and the
short solo model takes its host. The chain pass of the desired goal asks round by round (every
model's k-th replica, k = 2, 3, ..., before any (k+1)-th), as the fair levels count them, so
its trials reach p10:direct:2 before p10:direct:6. The pass has its own MAX_CHAIN_TRIALS per
goal and a move is kept only where it improves the replica levels, so a fleet where no chain
pays keeps the one-step result.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

from grid.planner.cpsat import HostLoad, Ledger, Scorer, host_blockers
from grid.planner.levels import compare
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]
MAX_TRIALS = 96
MAX_HOSTS_PER_MODEL = 16
MAX_CHAIN_TRIALS = 96  # chain trials per goal, after both one-step passes
MAX_CHAIN_HOSTS = 8  # hosts one evicted replica may vacate in a chain move


def vacate_improve(
    problem: PlacementProblem, placed: set[Key], *, out_of_time: Callable[[], bool] | None = None
) -> set[Key]:
    """`placed` improved by kept vacate moves (a feasible placement stays feasible): first
    for models short of their baseline, then for models short of their desired count, each
    pass with its own MAX_TRIALS. `out_of_time` (checked before each model and trial; None: never)
    stops early with the best placement so far, so a large fleet's pass fits its budget."""
    scorer = Scorer(problem)
    best = _Best(problem, Ledger(problem, placed), scorer.replica_score(placed))
    passes = [(goal, False, MAX_TRIALS) for goal in ("baseline", "desired")]
    passes += [(goal, True, MAX_CHAIN_TRIALS) for goal in ("baseline", "desired")]
    for goal, chain, trials_max in passes:
        trials = 0
        for model_id, wanted in _wanted(problem, goal, chain):
            if trials >= trials_max or (out_of_time is not None and out_of_time()):
                break
            if best.have(model_id) >= wanted:
                continue  # the hosts are listed only for a model that is short
            for host_id in _vacatable_hosts(problem, best, model_id):
                if trials >= trials_max or best.have(model_id) >= wanted:
                    break
                if out_of_time is not None and out_of_time():  # a model's trials: up to 1 s
                    break
                trials += 1
                moved = _vacate(problem, best, model_id, host_id, chain)
                if moved is not None:
                    values = scorer.replica_score(moved.placed)
                    if compare(problem, values, best.values, replica_levels_only=True) > 0:
                        best = _Best(problem, moved, values)
    return best.placed


def _wanted(problem: PlacementProblem, goal: str, chain: bool) -> Iterator[tuple[str, int]]:
    """(model, replicas wanted) in the order a pass tries them, models by priority then ID:
    the baseline goal asks max(1, baseline) of each; the desired goal its desired count; the
    chain pass of the desired goal goes round by round as the levels do (every model's k-th
    replica before any (k+1)-th), so its trials reach the fair rounds in their order."""
    if goal == "baseline":
        for model in problem.models:
            yield model.model_id, max(1, problem.targets[model.model_id].baseline)
    elif not chain:
        for model in problem.models:
            yield model.model_id, problem.targets[model.model_id].desired
    else:
        top = max((t.desired for t in problem.targets.values()), default=0)
        for k in range(2, top + 1):
            for model in problem.models:
                if problem.targets[model.model_id].desired >= k:
                    yield model.model_id, k


class _Best:
    """The best placement so far with what every trial reads from it, computed once per kept
    move instead of once per trial: replica counts, placements per host, and its ledger
    (a kept trial's own ledger: the one it was checked on)."""

    def __init__(self, problem: PlacementProblem, ledger: Ledger, values: dict[str, int]):
        self.problem = problem
        self.ledger = ledger
        self.placed = set(ledger.placed)
        self.values = values
        self.counts: dict[str, int] = {}
        self.on_host: dict[str, list[Key]] = {}
        self._open: dict[str, set[str]] = {}
        for key in self.placed:
            self.counts[key[0]] = self.counts.get(key[0], 0) + 1
            self.on_host.setdefault(key[1], []).append(key)

    def have(self, model_id: str) -> int:
        return self.counts.get(model_id, 0) + self.problem.fixed_count(model_id)

    def load(self, host_id: str) -> int:
        return len(self.on_host.get(host_id, ()))

    def open_hosts(self, model_id: str) -> set[str]:
        """The model's candidate hosts whose load in this ledger takes one more replica of
        it (the per-host rule only; computed once per model and kept move). A trial's host
        load that is still this ledger's own object has the same answer."""
        hosts = self._open.get(model_id)
        if hosts is None:
            loads = self.ledger.hosts
            hosts = self._open[model_id] = {
                c.host_id
                for c in self.problem.candidates_of_model(model_id)
                if not host_blockers(self.problem, loads[c.host_id], c)
            }
        return hosts


def _vacatable_hosts(problem: PlacementProblem, best: _Best, model_id: str) -> list[str]:
    hosts = _can_vacate(problem, best.placed, model_id)
    hosts.sort(key=lambda h: (best.load(h), h))
    return hosts[:MAX_HOSTS_PER_MODEL]


def _can_vacate(problem: PlacementProblem, placed: set[Key], model_id: str) -> list[str]:
    """The model's candidate hosts a move may empty for it: no live residency there, the
    model not already placed there, and its footprint within the host's new-memory budget."""
    return [
        c.host_id
        for c in problem.candidates_of_model(model_id)
        if c.is_new
        and (model_id, c.host_id) not in placed
        and not problem.host_by_id[c.host_id].live_models
        and c.memory_mb <= problem.host_by_id[c.host_id].new_budget_mb
    ]


def _vacate(
    problem: PlacementProblem, best: _Best, model_id: str, host_id: str, chain: bool = False
) -> Ledger | None:
    evicted = sorted(best.on_host.get(host_id, ()))
    ledger = _without(best.ledger, host_id, evicted)
    if ledger.blockers((model_id, host_id)):
        return None
    ledger.add((model_id, host_id))
    for m, _h in evicted:
        if not _first_fit(ledger, best.ledger, best, m, {host_id}) and chain:
            ledger = _chain(problem, ledger, best, m, host_id) or ledger
    return ledger


def _first_fit(ledger: Ledger, base: Ledger, best: _Best, model_id: str, skip: set[str]) -> bool:
    """Place one replica of the model on its first candidate host (not in `skip`) that fits.

    `ledger` is a fork of best.ledger (copy-on-write from `base`): a host load it still shares
    with best.ledger is the same object, so its per-host answer is `best.open_hosts`; only the
    hosts outside that set whose load changed need the full check (the replica and pin rules
    are checked on every host tried)."""
    fits = best.open_hosts(model_id)
    loads, kept = ledger.hosts, best.ledger.hosts
    for cand in ledger.problem.candidates_of_model(model_id):
        host_id = cand.host_id
        if host_id not in fits and loads[host_id] is kept[host_id]:
            continue
        key = (model_id, host_id)
        if host_id not in skip and key not in ledger.placed and not ledger.blockers(key):
            _own_host(ledger, base, host_id)
            ledger.add(key)
            return True
    return False


def _chain(
    problem: PlacementProblem, ledger: Ledger, best: _Best, model_id: str, freed: str
) -> Ledger | None:
    """The second step: `ledger` with one replica of model_id on a host it vacates, every
    occupant of that host re-placed by first fit (not on it nor on `freed`); None when no
    host of the first MAX_CHAIN_HOSTS takes the model so. The model's own incumbent hosts
    come first (a kept incumbent needs no new memory and live residencies do not bind it),
    then the hosts `_can_vacate` allows, fewest placements first. `trial` forks `ledger`
    copy-on-write: a load it shares with `ledger` is copied before a write, so one `ledger`
    shares with its own base is too."""
    hosts = [h for h in _chain_hosts(problem, ledger.placed, model_id) if h[1] != freed]
    hosts.sort(key=lambda h: (h[0], len(ledger.hosts[h[1]].models), h[1]))
    for _new, host_id in hosts[:MAX_CHAIN_HOSTS]:
        evicted = sorted((m, host_id) for m in ledger.hosts[host_id].models)
        trial = _without(ledger, host_id, evicted)
        if trial.blockers((model_id, host_id)):
            continue
        trial.add((model_id, host_id))
        skip = {host_id, freed}
        if all(_first_fit(trial, ledger, best, m, skip) for m, _h in evicted):
            return trial
    return None


def _chain_hosts(
    problem: PlacementProblem, placed: set[Key], model_id: str
) -> list[tuple[bool, str]]:
    """(is new, host) for the hosts a chain may empty for the model: those `_can_vacate`
    allows and those of its own incumbents it does not hold in `placed`."""
    out = [(True, h) for h in _can_vacate(problem, placed, model_id)]
    out += [
        (False, c.host_id)
        for c in problem.candidates_of_model(model_id)
        if not c.is_new and (model_id, c.host_id) not in placed
    ]
    return out


def _without(base: Ledger, host_id: str, evicted: list[Key]) -> Ledger:
    """A copy of `base` with host_id emptied; host loads stay shared until `_own_host`.

    Every ledger total is a sum or a set union over the placements, so this equals
    `Ledger(problem, base.placed - evicted)` built from scratch (test_scale_vacate.py compares
    the whole pass with a from-scratch one)."""
    ledger = copy.copy(base)
    ledger.hosts = dict(base.hosts)
    ledger.hosts[host_id] = HostLoad(base.hosts[host_id].budget)
    ledger.counts = dict(base.counts)
    ledger.unpinned = dict(base.unpinned)
    ledger.placed = base.placed - set(evicted)
    for key in evicted:
        cand = base.problem.candidates[key]
        ledger.counts[key[0]] -= 1
        if not cand.pinned:
            ledger.unpinned[key[0]] -= 1
    return ledger


def _own_host(ledger: Ledger, base: Ledger, host_id: str) -> None:
    """Copy a host load still shared with `base` before the trial adds to it."""
    load = ledger.hosts[host_id]
    if load is base.hosts[host_id]:
        ledger.hosts[host_id] = load.copy()
