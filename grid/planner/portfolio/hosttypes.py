"""Host types of the portfolio model: hosts interchangeable for it, with a count (pure).

Two hosts are one portfolio type when
    - they are one host type of the placement (grid/planner/types.py: the same ledgers,
      failure domain where it matters, candidates and quality scores; no live residency),
    - the base plan holds the same models on both (normally none), and
    - every candidate model's replica is worth the same there: the same replica weight at
      measured speed (speed.py) and the same startup cost (learned per host).
Hosts the base plan touches with preemptions or repacks, or whose draining room is held
(ctx.outside_hosts), stay individual. Then swapping two hosts of a type maps every portfolio
solution to one with the same value at every level (score.py) and the same feasibility.

Columns of a type: the candidate models of the portfolio with a candidate on its hosts, but
not the base models it already holds (one replica per host) nor a model excluded with one.
The room of one host (cpsat/type_ledgers.TypeRoom) is its budget less the base placements.

`disaggregate` turns "n replicas of m on type T" into concrete hosts: the base plan and the
individual hosts' placements stay as they are (they are the ledger's start), then per type the
placement's packings (types.PACKINGS: first-fit decreasing, spread, slots; the first that packs
every count wins, else the one that leaves the fewest replicas out). No repair onto other
hosts: a replica that does not pack is reported short, and the caller treats the aggregate's
counts as unreached (solve.py falls back to the per-host model).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from grid.planner.cpsat import Ledger, TypeRoom, host_load
from grid.planner.portfolio.context import Key, PortfolioContext
from grid.planner.portfolio.score import startup_cost
from grid.planner.types import PACKINGS, HostType, host_types

# Below this many aggregated hosts the per-host model is small anyway, and the lab's fleets
# (4 to 8 machines) and the hand-written ones keep exactly the per-host model.
MIN_AGGREGATED_HOSTS = 16
PACKING_ORDER = ("first_fit", "spread", "slots")
# (base models, column models, (replica weight, startup cost) per column model) of one host
Signature = tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[int, int], ...]]


@dataclass(frozen=True)
class PortfolioType:
    htype: HostType  # type_id (first host ID), host IDs (sorted), column models (sorted)
    base: tuple[str, ...]  # the base plan's models on every host of the type
    room: TypeRoom  # what one host has left after them

    @property
    def type_id(self) -> str:
        return self.htype.type_id

    @property
    def host_ids(self) -> tuple[str, ...]:
        return self.htype.host_ids

    @property
    def models(self) -> tuple[str, ...]:
        return self.htype.models

    @property
    def count(self) -> int:
        return self.htype.count


def portfolio_types(ctx: PortfolioContext) -> list[PortfolioType]:
    """Every group of at least two interchangeable hosts (module docstring), by first host."""
    problem = ctx.problem
    candidates = set(ctx.candidate_models)
    base_on: dict[str, list[str]] = {}
    for model_id, host_id in ctx.base_keys:
        base_on.setdefault(host_id, []).append(model_id)
    snap = ctx.snapshot
    by_id = {h.host_id: h for h in snap.hosts}
    learned = {h for per_host in snap.learned_startup.values() for h in per_host}
    out: list[PortfolioType] = []
    for htype in host_types(problem):
        if htype.count < 2:
            continue
        groups: dict[Signature, list[str]] = {}
        # Weight and startup read a host only through its speed (speed.host_speed) and learned
        # startups: hosts with neither measured speeds nor learned startups and the same
        # hardware prior and throttle share them (computed once: 140,000 pairs at 1,000 hosts).
        shared: dict[tuple[object, ...], tuple[tuple[int, int], ...]] = {}
        for host_id in htype.host_ids:
            if host_id in ctx.outside_hosts:
                continue
            base = tuple(sorted(base_on.get(host_id, ())))
            cols = [
                m
                for m in htype.models
                if m in candidates
                and m not in base
                and not any(problem.excluded(m, other) for other in base)
            ]
            host = by_id[host_id]
            plain = not host.measured_tokens_per_s and host_id not in learned
            fast = (base, host.hardware_tokens_per_s, host.state, host.throttle_fraction)
            worth = shared.get(fast) if plain else None
            if worth is None:
                worth = tuple(
                    (ctx.weight((m, host_id)), startup_cost(ctx, (m, host_id))) for m in cols
                )
                if plain:
                    shared[fast] = worth
            groups.setdefault((base, tuple(cols), worth), []).append(host_id)
        for (held, columns, _worth), hosts in groups.items():
            if len(hosts) < 2 or not columns:
                continue
            ids = tuple(sorted(hosts))
            first = ids[0]
            load = host_load(problem, first, [problem.candidates[(m, first)] for m in held])
            budget = load.budget
            room = TypeRoom(
                budget.footprint_budget_mb - load.footprint_mb,
                budget.new_budget_mb - load.new_mb,
                None if budget.desired_cap is None else budget.desired_cap - len(load.models),
                None if budget.disk_free_mb is None else budget.disk_free_mb - load.disk_mb,
            )
            out.append(PortfolioType(HostType(first, ids, columns), held, room))
    out.sort(key=lambda t: t.type_id)
    return out


def aggregation_pays(ctx: PortfolioContext, types: Iterable[PortfolioType]) -> bool:
    """At least MIN_AGGREGATED_HOSTS hosts aggregate, and they hold at least half of the
    model's free candidate keys (like cpsat/aggregate.aggregation_pays)."""
    types = list(types)
    hosts = sum(t.count for t in types)
    grouped = sum(t.count * len(t.models) for t in types)
    free = sum(1 for k in ctx.variable_keys() if k not in ctx.base_keys)
    return hosts >= MIN_AGGREGATED_HOSTS and grouped * 2 >= max(1, free)


def disaggregate(
    ctx: PortfolioContext,
    types: Iterable[PortfolioType],
    counts: Mapping[Key, int],
    singles: Iterable[Key],
) -> tuple[set[Key], int]:
    """The concrete placement (base keys, `singles` and the packed counts) and the number of
    counted replicas that did not pack (0: the counts are reached exactly)."""
    problem = ctx.problem
    start = sorted(set(ctx.base_keys) | set(singles))
    types = list(types)
    best: tuple[set[Key], int] | None = None
    for packing in PACKING_ORDER:
        ledger = Ledger(problem, start)
        short = 0
        for ptype in types:
            wanted = [(m, counts.get((m, ptype.type_id), 0)) for m in ptype.models]
            wanted = [(m, n) for m, n in wanted if n > 0]
            if wanted:
                short += sum(PACKINGS[packing](problem, ledger, ptype.htype, wanted).values())
        if best is None or short < best[1]:
            best = (set(ledger.placed), short)
        if short == 0:
            break
    assert best is not None
    return best


def counts_of(types: Iterable[PortfolioType], placement: Iterable[Key]) -> dict[Key, int]:
    """Replicas per (model, type_id) of a concrete placement, on the types' columns."""
    column = {(m, h): t.type_id for t in types for h in t.host_ids for m in t.models}
    out: dict[Key, int] = {}
    for key in placement:
        tid = column.get(key)
        if tid is not None:
            out[(key[0], tid)] = out.get((key[0], tid), 0) + 1
    return out
