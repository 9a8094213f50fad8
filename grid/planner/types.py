"""Host types: hosts interchangeable for the plan, grouped with an integer count (pure).

Two hosts are of one type when everything the planner reads about them, but their IDs, is
equal: the ledger budgets of `problem.HostBudget` (allocatable memory, headroom, slot caps,
known free disk, admission), the failure domain when some model asks for domain spread, and,
model by model, the whole candidate (runtime, both memory figures, artifact disk, cached,
pinned) and its quality score. The signature is built from the problem, not from the raw host,
so it is exact by construction: swapping two hosts of one type maps every placement to one with
the same value at every level and the same feasibility. Hosts with any live residency (so any
incumbent or fixed replica) stay individual types of count 1, and so do hosts whose signature is
unique. A host that admits nothing has no candidates and is never a decision.

`disaggregate` turns "n replicas of m on type T" into concrete hosts, deterministically:
per type, models by footprint (largest first, then ID), each replica to the first host of the
type (by host ID) that still fits it under the shared placement fit rule (cpsat/ledger.py) and
does not hold the model yet: first-fit decreasing; or (`spread`) models with the most replicas
first, each replica on the type's host with the most free memory (ties by host ID). A replica
that does not pack on its type then goes to the first other candidate host (by ID) that fits
it (`solve_aggregated` tries both packings and keeps the better). Individual hosts' placements
are copied unchanged, so an incumbent is never moved. The result is a feasible placement; when the
per-type counts were a relaxation of the per-host packing (cpsat/aggregate.py), some replicas
may not fit, and the caller compares the levels it reaches with the aggregate's.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from grid.planner.cpsat import Ledger
from grid.planner.gpu_ledger import gpu_table
from grid.planner.levels import quality_classes, quality_scores
from grid.planner.problem import Candidate, PlacementProblem

Key = tuple[str, str]


@dataclass(frozen=True)
class HostType:
    type_id: str  # the first host ID of the type
    host_ids: tuple[str, ...]  # sorted
    models: tuple[str, ...]  # the models with a candidate on every host of the type

    @property
    def count(self) -> int:
        return len(self.host_ids)


def host_types(problem: PlacementProblem) -> list[HostType]:
    """Every admitting host with candidates in exactly one type, by first host ID."""
    cached = problem.memo.get("host_types")
    if cached is not None:
        return cached  # type: ignore[return-value]
    quality = quality_scores(problem)
    classes = quality_classes(problem)
    shapes: dict[str, int] = problem.memo.get("build_shapes", {})  # type: ignore[assignment]
    spread = any(m.min_failure_domains > 1 for m in problem.models)
    gpus = gpu_table(problem)
    interned: dict[object, int] = {}  # candidate signature -> a small ID (hashed once)
    by_shape: dict[tuple[int, object], int] = {}
    groups: dict[object, list[str]] = {}
    for budget in problem.hosts:
        host_id = budget.host_id
        cands = problem.candidates_of_host(host_id)
        if not cands:
            continue
        if budget.live_models or budget.fixed_models or (gpus and gpus.holds_gpu_work(cands)):
            groups[("individual", host_id)] = [host_id]  # GPU rows: cpsat/gpus.py, per host
            continue
        # Hosts of one build shape and quality class have equal candidate signatures
        # (problem.py, levels.py): computed once per such pair.
        shape, klass = shapes.get(host_id), classes[host_id]
        found = by_shape.get((shape, klass)) if shape is not None and klass is not None else None
        if found is None:
            found = interned.setdefault(_candidates_signature(cands, quality), len(interned))
            if shape is not None and klass is not None:
                by_shape[(shape, klass)] = found
        signature = (
            budget.allocatable_mb,
            budget.headroom_mb,
            budget.slot_limit,
            budget.desired_cap,
            budget.new_cap,
            budget.disk_free_mb,
            budget.domain if spread else "",
            found,
        )
        groups.setdefault(signature, []).append(host_id)
    out = []
    for members in groups.values():
        ids = tuple(sorted(members))
        models = tuple(sorted(c.model_id for c in problem.candidates_of_host(ids[0])))
        out.append(HostType(ids[0], ids, models))
    out.sort(key=lambda t: t.type_id)
    problem.memo["host_types"] = out
    return out


def _candidates_signature(
    cands: list[Candidate], quality: Mapping[tuple[str, str], int]
) -> tuple[tuple[object, ...], ...]:
    """Everything of a host's candidates but the host ID, by model, with the quality score."""
    return tuple(
        (
            c.model_id,
            c.runtime,
            c.memory_mb,
            c.new_mb,
            c.disk_mb,
            c.cached,
            c.pinned,
            quality[(c.model_id, c.host_id)],
        )
        for c in sorted(cands)
    )


def disaggregate(
    problem: PlacementProblem,
    types: Iterable[HostType],
    counts: Mapping[tuple[str, str], int],
    individual: Iterable[Key],
    *,
    spread: bool = False,
    packing: str | None = None,
) -> set[Key]:
    """Concrete placements: `individual` keys as they are, then counts[(model, type_id)]
    replicas per type (see the module docstring). `spread`: models with the most replicas
    first, each replica on the type's host with the most free memory (worst fit), instead of
    first-fit decreasing by footprint."""
    ledger = Ledger(problem)
    for key in sorted(set(individual)):
        ledger.add(key)
    short: dict[str, int] = {}  # replicas that did not pack on their type
    for htype in types:
        wanted = [(m, counts.get((m, htype.type_id), 0)) for m in htype.models]
        wanted = [(m, n) for m, n in wanted if n > 0]
        if wanted:
            pack = PACKINGS[packing or ("spread" if spread else "first_fit")]
            for model_id, missing in pack(problem, ledger, htype, wanted).items():
                short[model_id] = short.get(model_id, 0) + missing
    for model_id, missing in sorted(short.items()):  # repair: any other host that fits
        for cand in problem.candidates_of_model(model_id):
            if missing <= 0:
                break
            key = (model_id, cand.host_id)
            if key not in ledger.placed and not ledger.blockers(key):
                ledger.add(key)
                missing -= 1
    return set(ledger.placed)


def _free_mb(ledger: Ledger, host_id: str) -> int:
    load = ledger.hosts[host_id]
    return load.budget.footprint_budget_mb - load.footprint_mb


def _slots_full(ledger: Ledger, host_id: str) -> bool:
    load = ledger.hosts[host_id]
    return load.budget.desired_cap is not None and len(load.models) >= load.budget.desired_cap


def _first_fit(
    problem: PlacementProblem, ledger: Ledger, htype: HostType, wanted: list[tuple[str, int]]
) -> dict[str, int]:
    first = htype.host_ids[0]
    wanted = sorted(wanted, key=lambda mn: (-problem.candidates[(mn[0], first)].memory_mb, mn[0]))
    smallest = problem.candidates[(wanted[-1][0], first)].memory_mb
    hosts = htype.host_ids
    start = 0  # hosts before it cannot take even the smallest item: skipped
    short: dict[str, int] = {}
    for model_id, n in wanted:
        placed = 0
        size = problem.candidates[(model_id, first)].memory_mb
        index = start
        while placed < n and index < len(hosts):
            host_id = hosts[index]
            index += 1
            if _free_mb(ledger, host_id) < size or model_id in ledger.hosts[host_id].models:
                continue
            if not ledger.blockers((model_id, host_id)):
                ledger.add((model_id, host_id))
                placed += 1
        short[model_id] = n - placed
        while start < len(hosts) and (
            _free_mb(ledger, hosts[start]) < smallest or _slots_full(ledger, hosts[start])
        ):
            start += 1
    return short


def _spread(
    problem: PlacementProblem, ledger: Ledger, htype: HostType, wanted: list[tuple[str, int]]
) -> dict[str, int]:
    first = htype.host_ids[0]
    wanted = sorted(
        wanted, key=lambda mn: (-mn[1], -problem.candidates[(mn[0], first)].memory_mb, mn[0])
    )
    heap = [(-_free_mb(ledger, h), h) for h in htype.host_ids if not _slots_full(ledger, h)]
    heapq.heapify(heap)
    short: dict[str, int] = {}
    for model_id, n in wanted:
        taken: list[str] = []
        skipped: list[tuple[int, str]] = []
        while len(taken) < n and heap:
            item = heapq.heappop(heap)
            host_id = item[1]
            if ledger.blockers((model_id, host_id)):
                skipped.append(item)
                continue
            ledger.add((model_id, host_id))
            taken.append(host_id)
        for host_id in taken:
            if not _slots_full(ledger, host_id):
                skipped.append((-_free_mb(ledger, host_id), host_id))
        for item in skipped:
            heapq.heappush(heap, item)
        short[model_id] = n - len(taken)
    return short


def _slots(
    problem: PlacementProblem, ledger: Ledger, htype: HostType, wanted: list[tuple[str, int]]
) -> dict[str, int]:
    """Largest model first; each replica on the type's hosts with the most free model slots,
    then the least free memory that still fits (best fit), then host ID: when slots, not
    memory, bind, the models with many replicas still find that many distinct hosts."""
    first = htype.host_ids[0]
    wanted = sorted(wanted, key=lambda mn: (-problem.candidates[(mn[0], first)].memory_mb, mn[0]))
    short: dict[str, int] = {}
    for model_id, n in wanted:
        size = problem.candidates[(model_id, first)].memory_mb
        room = []
        for host_id in htype.host_ids:
            load = ledger.hosts[host_id]
            free = _free_mb(ledger, host_id)
            if free < size or model_id in load.models:
                continue
            cap = load.budget.desired_cap
            slots = (cap - len(load.models)) if cap is not None else 1 << 30
            if slots > 0:
                room.append((-slots, free, host_id))
        room.sort()
        placed = 0
        for _slots_left, _free, host_id in room:
            if placed >= n:
                break
            if not ledger.blockers((model_id, host_id)):
                ledger.add((model_id, host_id))
                placed += 1
        short[model_id] = n - placed
    return short


PACKINGS = {"first_fit": _first_fit, "spread": _spread, "slots": _slots}


def type_counts(types: Iterable[HostType], placed: Iterable[Key]) -> dict[tuple[str, str], int]:
    """Replicas per (model, type_id) of a concrete placement (on aggregated types)."""
    type_of = {h: t.type_id for t in types for h in t.host_ids}
    out: dict[tuple[str, str], int] = {}
    for model_id, host_id in placed:
        tid = type_of.get(host_id)
        if tid is not None:
            out[(model_id, tid)] = out.get((model_id, tid), 0) + 1
    return out
