"""Bounded coordinate search over complete workload → model maps (the fallback and the hint).

Before the passes of the exploitation-only search, up to six "admitted model subsets" are
planned: every workload on its best model within one of the broadest candidate models' small
subsets (≤ 3 of the 8 broadest), ranked by cheap set coverage; the best of them may replace the
start. Options per admitted workload: its best feasible candidates by utility, at most
`max_candidates_per_workload`, the last seat kept for the broadest cross-workload candidate
(the model scoring the most admitted workloads), plus "deferred" (no model). Each portfolio is
planned by the greedy ledger (`place`): the base plan stays, then the selected models' first
replicas (heaviest workload pressure first), then their further replicas round by round, each on
the best-quality key that still fits (incumbents first). Start: every workload on its best
option; then passes over the workloads, each trying every option and keeping a strict
lexicographic improvement, until a pass changes nothing or `max_portfolios` distinct maps were
planned. Two searches share one cache: exploitation-only utility first (its result E), then with
the optimism bonus, restricted to maps where at most `max_exploration_models` models take a
workload that E gives another model. Deterministic: sorted iteration only.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from grid.planner.cpsat import Ledger
from grid.planner.levels import quality_scores
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.score import evaluate, pressure_of, signed, slot_hosts

Mapping_ = tuple[tuple[str, str], ...]  # sorted (workload, model) pairs


@dataclass
class SearchResult:
    mapping: dict[str, str]
    placement: set[Key]
    values: dict[str, int]
    exploit_mapping: dict[str, str]
    evaluated: int
    exhausted: bool  # stopped on the portfolio budget


def explorers(exploit: dict[str, str], mapping: dict[str, str]) -> set[str]:
    """Models that take a workload the exploitation-only map gives another model (or none)."""
    return {m for w, m in mapping.items() if exploit.get(w) != m}


def options(ctx: PortfolioContext, workload: str, *, with_bonus: bool) -> list[str]:
    pairs = ctx.feasible_pairs(workload)
    ranked = sorted(pairs, key=lambda p: (-p.utility_tenths(with_bonus=with_bonus), p.model_id))
    limit = ctx.policy.max_candidates_per_workload
    chosen = [p.model_id for p in ranked[:limit]]
    admitted = set(ctx.admitted)
    breadth = {
        p.model_id: sum(
            1 for (w, m), q in ctx.pairs.items() if m == p.model_id and q.feasible and w in admitted
        )
        for p in pairs
    }
    if pairs:
        broadest = max(
            pairs,
            key=lambda p: (
                breadth[p.model_id],
                p.utility_tenths(with_bonus=with_bonus),
                p.model_id,
            ),
        ).model_id
        if broadest not in chosen:
            chosen = (
                [*chosen[: limit - 1], broadest] if len(chosen) >= limit else [*chosen, broadest]
            )
    return chosen


def _place_order(ctx: PortfolioContext, model_id: str) -> list[Key]:
    """The model's keys off the base plan and the outside hosts, in the greedy ledger's order:
    incumbents first, then the hosts where a replica is worth most (speed.py), then placement
    quality, then host ID. Once per context and model (every portfolio reads it)."""
    cached = ctx.memo.get(f"place_order:{model_id}")
    if cached is None:
        problem = ctx.problem
        quality = quality_scores(problem)
        keys = [
            (c.model_id, c.host_id)
            for c in problem.candidates_of_model(model_id)
            if (c.model_id, c.host_id) not in ctx.base_keys and c.host_id not in ctx.outside_hosts
        ]
        keys.sort(
            key=lambda k: (
                problem.candidates[k].incumbent is None,
                -ctx.weight(k),
                -quality[k],
                k[1],
            )
        )
        cached = ctx.memo[f"place_order:{model_id}"] = keys
    return cached


def _demand(
    ctx: PortfolioContext, mapping: dict[str, str]
) -> tuple[list[str], dict[str, int], dict[str, int]]:
    """The mapped models by falling pressure, their workload replicas D_m (goal) and what
    the placement must add (want: the base plan's idle incumbents, surplus, already count)."""
    weight: dict[str, int] = {}
    asked: dict[str, int] = {}
    for w, m in mapping.items():
        weight[m] = weight.get(m, 0) + pressure_of(ctx, w)
        asked[m] = asked.get(m, 0) + ctx.pairs[(w, m)].need
    order = sorted(weight, key=lambda m: (-weight[m], m))
    goal = {m: min(asked[m], ctx.room.get(m, 0)) for m in order}
    want = {m: max(0, goal[m] - ctx.surplus.get(m, 0)) for m in order}
    return order, goal, want


class _Placer:
    """The greedy ledger of one placement: the base plan fixed, the pinned models' room off
    their pins counted down as replicas are taken."""

    def __init__(self, ctx: PortfolioContext, order: list[str], goal: dict[str, int]) -> None:
        self.ctx, self.problem = ctx, ctx.problem
        fixed = [k for k in ctx.base_keys if k[1] not in ctx.outside_hosts]
        self.ledger = Ledger(self.problem, fixed)
        self.added = {m: 0 for m in order}
        self.off_room: dict[str, int] = {}  # placements still allowed off the pins
        for m in order:
            allowance = ctx.off_pin_allowance(m, goal[m])
            if allowance is not None:
                pins = set(self.problem.model_by_id[m].pinned_hosts)
                used = sum(1 for mm, h in ctx.base_keys if mm == m and h not in pins)
                self.off_room[m] = allowance - used

    def fits(self, k: Key) -> bool:
        # Two of the ledger's own blockers first, read off the running load (a full host is
        # the common refusal at 1,000 hosts: 0.5 M fit checks per search); same answers.
        ledger, problem = self.ledger, self.problem
        load, cand = ledger.hosts[k[1]], problem.candidates[k]
        if cand.memory_mb > load.budget.footprint_budget_mb - load.footprint_mb:
            return False
        cap = load.budget.desired_cap
        if cap is not None and len(load.models) >= cap:
            return False
        if ledger.blockers(k):
            return False
        if k[0] in self.off_room and k[1] not in problem.model_by_id[k[0]].pinned_hosts:
            return self.off_room[k[0]] > 0
        return True

    def take(self, k: Key) -> None:
        self.ledger.add(k)
        self.added[k[0]] += 1
        if k[0] in self.off_room and k[1] not in self.problem.model_by_id[k[0]].pinned_hosts:
            self.off_room[k[0]] -= 1

    def spares(self, k: Key, guarded: set[str]) -> bool:
        """Taking k leaves the spare-slot reserve whole on the `guarded` hosts."""
        if k[1] not in guarded:
            return True
        free = sum(
            max(0, (self.problem.host_by_id[h].desired_cap or 0) - len(self.ledger.hosts[h].models))
            for h in guarded
        )
        return free - 1 >= self.ctx.spare_reserve


def place(
    ctx: PortfolioContext, mapping: dict[str, str], *, keep_reserve: bool = False
) -> set[Key]:
    """The greedy ledger's placement of one portfolio (base plan kept). `keep_reserve`: a
    further replica (beyond a model's first) never takes one of the spare-slot reserve's slots,
    as the decided portfolio would not (spare slots rank above missing replicas): the
    hysteresis compares a held mapping placed so with the decision on equal terms."""
    order, goal, want = _demand(ctx, mapping)
    keys_of = {m: _place_order(ctx, m) for m in order}
    placer = _Placer(ctx, order, goal)
    # First replica of each selected model without one, then further replicas round by round.
    for m in order:
        if ctx.base_counts.get(m, 0) > 0 or want[m] == 0:
            continue
        for k in keys_of[m]:
            if placer.fits(k):
                placer.take(k)
                break
    limited, unlimited = slot_hosts(ctx)
    guarded = set(limited) if keep_reserve and not unlimited else set()
    progress = True
    while progress:
        progress = False
        for m in order:
            if placer.added[m] >= want[m]:
                continue
            for k in keys_of[m]:
                if k not in placer.ledger.placed and placer.fits(k) and placer.spares(k, guarded):
                    placer.take(k)
                    progress = True
                    break
    return set(placer.ledger.placed) | set(ctx.outside_keys())


SUBSET_MODELS = 8  # the broadest candidate models that subsets are drawn from
SUBSET_SIZE = 3  # models per subset
SUBSET_SEEDS = 6  # subsets planned, best cheap coverage first


def subset_seeds(ctx: PortfolioContext) -> list[dict[str, str]]:
    """Maps that put every admitted workload on its best model within a small model subset,
    ranked by cheap set coverage (workloads, then pressure, then fewer models, then utility)."""
    admitted = ctx.admitted
    if len(admitted) < 2:
        return []
    feasible = {w: ctx.feasible_pairs(w) for w in admitted}
    breadth: dict[str, int] = {}
    for pairs in feasible.values():
        for p in pairs:
            breadth[p.model_id] = breadth.get(p.model_id, 0) + 1
    top = sorted(breadth, key=lambda m: (-breadth[m], m))[:SUBSET_MODELS]
    ranked: list[tuple[tuple[int, int, int, int], dict[str, str]]] = []
    for size in range(1, min(SUBSET_SIZE, len(top)) + 1):
        for combo in itertools.combinations(top, size):
            chosen = set(combo)
            mapping: dict[str, str] = {}
            for w in admitted:
                inside = [p for p in feasible[w] if p.model_id in chosen]
                if inside:
                    best = max(
                        inside, key=lambda p: (p.utility_tenths(with_bonus=False), p.model_id)
                    )
                    mapping[w] = best.model_id
            if len(set(mapping.values())) < size:
                continue  # a model of the subset serves nothing: a smaller subset covers it
            key = (
                len(mapping),
                sum(pressure_of(ctx, w) for w in mapping),
                -size,
                sum(ctx.pairs[(w, m)].utility_tenths(with_bonus=False) for w, m in mapping.items()),
            )
            ranked.append((key, mapping))
    ranked.sort(key=lambda item: (item[0], sorted(item[1].items())), reverse=True)
    return [mapping for _key, mapping in ranked[:SUBSET_SEEDS]]


class _Search:
    def __init__(self, ctx: PortfolioContext) -> None:
        self.ctx = ctx
        self.cache: dict[Mapping_, set[Key]] = {}
        self.budget = ctx.policy.max_portfolios

    def planned(self, mapping: dict[str, str]) -> set[Key] | None:
        key = tuple(sorted(mapping.items()))
        if key not in self.cache:
            if len(self.cache) >= self.budget:
                return None
            self.cache[key] = place(self.ctx, mapping)
        return self.cache[key]

    def run(
        self, start: dict[str, str], *, with_bonus: bool, exploit: dict[str, str] | None
    ) -> tuple[dict[str, str], dict[str, int], bool]:
        ctx = self.ctx
        opts = {w: options(ctx, w, with_bonus=with_bonus) for w in ctx.admitted}

        def allowed(mapping: dict[str, str]) -> bool:
            if exploit is None:
                return True
            return len(explorers(exploit, mapping)) <= ctx.policy.max_exploration_models

        best = {w: m for w, m in start.items() if allowed({w: m}) or exploit is None}
        if not allowed(best):
            best = dict(exploit or {})
        placement = self.planned(best)
        if placement is None:
            placement = set(ctx.base_keys)
        best_values = evaluate(ctx, best, placement, with_bonus=with_bonus)
        exhausted = False
        if exploit is None:  # bounded admitted model subsets cross multi-change local optima
            for seed in subset_seeds(ctx):
                planned = self.planned(seed)
                if planned is None:
                    exhausted = True
                    break
                values = evaluate(ctx, seed, planned, with_bonus=with_bonus)
                if signed(values) > signed(best_values):
                    best, best_values = seed, values
        changed = True
        while changed and not exhausted:
            changed = False
            for w in ctx.admitted:
                for option in [*opts[w], None]:
                    trial = {k: v for k, v in best.items() if k != w}
                    if option is not None:
                        trial[w] = option
                    if trial == best or not allowed(trial):
                        continue
                    planned = self.planned(trial)
                    if planned is None:
                        exhausted = True
                        break
                    values = evaluate(ctx, trial, planned, with_bonus=with_bonus)
                    if signed(values) > signed(best_values):
                        best, best_values, changed = trial, values, True
                if exhausted:
                    break
        return best, best_values, exhausted


def coordinate_search(ctx: PortfolioContext) -> SearchResult:
    search = _Search(ctx)
    first = {w: opts[0] for w in ctx.admitted if (opts := options(ctx, w, with_bonus=False))}
    exploit, _values, exhausted_a = search.run(first, with_bonus=False, exploit=None)
    bonus_start = {w: opts[0] for w in ctx.admitted if (opts := options(ctx, w, with_bonus=True))}
    mapping, values, exhausted_b = search.run(bonus_start, with_bonus=True, exploit=exploit)
    placement = search.planned(mapping)
    if placement is None:  # budget spent: fall back to the exploitation-only portfolio
        mapping = exploit
        placement = search.cache[tuple(sorted(exploit.items()))]
        values = evaluate(ctx, mapping, placement)
    covered = {w: m for w, m in mapping.items() if has_replica(ctx, m, placement)}
    return SearchResult(
        mapping=covered,
        placement=placement,
        values=values,
        exploit_mapping=exploit,
        evaluated=len(search.cache),
        exhausted=exhausted_a or exhausted_b,
    )


def has_replica(ctx: PortfolioContext, model_id: str, placement: set[Key]) -> bool:
    if any(f.model_id == model_id for f in ctx.problem.fixed):
        return True
    return any(m == model_id for m, _h in placement | set(ctx.base_keys))
