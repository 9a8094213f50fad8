"""Per-type ledgers of a host-type model: one rule for every model over host types.

A type T has |T| identical hosts. With n[m,T] the replicas of m on T and, per host, the room
L (footprint memory), L' (make-before-break memory), s (model slots) and D (known free disk)
left for them:
    Σ_m mem(m)·n[m,T] ≤ |T|·L,   Σ_m new_mb(m)·n[m,T] ≤ |T|·L',   Σ_m n[m,T] ≤ |T|·s,
    Σ_m disk(m)·n[m,T] ≤ |T|·D,   n[a,T] + n[b,T] ≤ |T| for every excluded pair,
    Σ_{m: size(m)·k > L} n[m,T] ≤ (k−1)·|T| for k = 2..min(s, q) and both ledgers
    (a host holds at most k−1 items each larger than L/k: valid cuts of the packing), and
    Σ_m n[m,T] ≤ q·|T|, q the most models one host holds by that ledger (its smallest ones;
    the placement's model only, which then stops the k-item cuts at q),
    threshold cuts on types of at most THRESHOLD_CUT_MAX_SLOTS slots (`_threshold_cuts`).
Colocation ceilings are not aggregated (the disaggregation enforces them). The sums are exact
with one model slot per host and a relaxation of bin packing otherwise.

Used by the placement's host-type model (aggregate.py: the room is the empty host's budget)
and the portfolio's (grid/planner/portfolio/typed.py: the room left by the base plan's
placements, which every host of a portfolio type holds alike).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from grid.planner.problem import Candidate, HostBudget

Expr = cp_model.LinearExpr
# Threshold cuts (`_threshold_cuts`) on types whose hosts hold at most this many models: on
# the 1,000-host production fleet they close the relaxation's gap on the 2- and 3-slot types
# (the disaggregation then reaches every replica level); on the 8-slot types they only slowed
# the stages (4.3 s with them on every type; limited to at most 4 items per host, they did not
# close the 256-host fleet's gap either).
THRESHOLD_CUT_MAX_SLOTS = 3


@dataclass(frozen=True)
class TypeRoom:
    """What one host of a type has left for the type's variables."""

    footprint_mb: int
    new_mb: int
    slots: int | None  # None: no slot cap
    disk_mb: int | None  # None: free disk unknown

    @classmethod
    def of(cls, budget: HostBudget) -> TypeRoom:
        """An empty host's room: its whole budget."""
        return cls(
            budget.footprint_budget_mb,
            budget.new_budget_mb,
            budget.desired_cap,
            budget.disk_free_mb,
        )


def fits_alone(cand: Candidate, room: TypeRoom) -> bool:
    """One replica fits a host of the type alone (memory is not a static filter)."""
    return (
        cand.memory_mb <= room.footprint_mb
        and cand.new_mb <= room.new_mb
        and (room.disk_mb is None or cand.disk_mb <= room.disk_mb)
    )


def add_type_ledgers(
    model: cp_model.CpModel,
    ns: Sequence[cp_model.IntVar],
    cands: Sequence[Candidate],
    room: TypeRoom,
    count: int,
    excluded_pairs: Iterable[frozenset[str]],
    *,
    most_cut: bool = False,
) -> None:
    """The per-type sums and packing cuts above; cands[i] is the candidate of ns[i] on the
    type's first host. `most_cut`: the q·|T| cut, with the k-item cuts only up to q (aggregate.py;
    the portfolio's typed model keeps every k-item cut and no q cut, as measured there)."""
    model.add(Expr.weighted_sum(ns, [c.memory_mb for c in cands]) <= count * room.footprint_mb)
    model.add(Expr.weighted_sum(ns, [c.new_mb for c in cands]) <= count * room.new_mb)
    if room.slots is not None:
        model.add(Expr.sum(ns) <= count * room.slots)
    if room.disk_mb is not None:
        model.add(Expr.weighted_sum(ns, [c.disk_mb for c in cands]) <= count * room.disk_mb)
    sizes = ([c.memory_mb for c in cands], [c.new_mb for c in cands])
    for limit, sized in zip((room.footprint_mb, room.new_mb), sizes, strict=True):
        cap = room.slots if room.slots is not None else len(cands)
        top = min(cap, len(cands))
        if most_cut:
            most = _most_items(sized, limit)  # one replica of each model: its smallest ones
            if most < top:
                model.add(Expr.sum(ns) <= most * count)
            top = min(top, most)
        previous: int | None = None
        for k in range(2, top + 1):
            # A host holds at most k−1 items each larger than limit/k.
            big = [v for mb, v in zip(sized, ns, strict=True) if mb * k > limit]
            if len(big) > 1 and len(big) != previous:
                model.add(Expr.sum(big) <= (k - 1) * count)
            previous = len(big)
        if cap <= THRESHOLD_CUT_MAX_SLOTS:
            _threshold_cuts(model, ns, sized, limit, cap, count)
    present = {c.model_id: var for c, var in zip(cands, ns, strict=True)}
    for pair in sorted(tuple(sorted(p)) for p in excluded_pairs if len(p) == 2):
        if pair[0] in present and pair[1] in present:
            model.add(present[pair[0]] + present[pair[1]] <= count)


def _most_items(sized: Sequence[int], limit: int) -> int:
    """The most models one host holds by this ledger alone: its smallest ones that fit."""
    used, most = 0, 0
    for size in sorted(sized):
        if used + size > limit:
            break
        used += size
        most += 1
    return most


def add_conflict_cuts(
    model: cp_model.CpModel,
    ns: Sequence[cp_model.IntVar],
    cands: Sequence[Candidate],
    room: TypeRoom,
    count: int,
) -> None:
    """Clique cuts of the one-replica-per-host packing: for a model m of size s ≤ L/2, every
    model larger than L − s (so larger than L/2) conflicts with m and with each other, and a
    host holds at most one replica of each model, so n[m] + Σ_{j ≠ m: size(j) > L − s} n[j]
    ≤ |T|, for both ledgers. Valid for every packing; they close what the sums leave open
    where a model needs a replica on most hosts of a type (the portfolio's 1,000-host
    production fleet: 24 replicas of a small model on 24 three-slot hosts, 7 of which a
    large model fills). Not used by aggregate.py (its model stays as measured there)."""
    sizes = ([c.memory_mb for c in cands], [c.new_mb for c in cands])
    seen: set[tuple[int, ...]] = set()
    for limit, sized in zip((room.footprint_mb, room.new_mb), sizes, strict=True):
        for i, size in enumerate(sized):
            if size <= 0 or 2 * size > limit:
                continue
            clique = [i, *(j for j, other in enumerate(sized) if j != i and other > limit - size)]
            if len(clique) > 1 and tuple(clique) not in seen:
                seen.add(tuple(clique))
                model.add(Expr.sum([ns[j] for j in clique]) <= count)


def _threshold_cuts(
    model: cp_model.CpModel,
    ns: Sequence[cp_model.IntVar],
    sized: list[int],
    limit: int,
    cap: int,
    count: int,
) -> None:
    """For each item size t ≤ limit/2: a host holding an item larger than limit − t (at most
    one: two exceed the limit) holds no other item of size ≥ t, and any host holds at most
    q = min(cap, limit // t) items of size ≥ t, so q·#(items > limit − t) + #(items in
    [t, limit − t]) ≤ q·|T|. Valid for every packing (each host adds at most q); they tighten
    the relaxation where a few slots and large items make the memory sum loose."""
    for t in sorted({mb for mb in sized if mb > 0 and 2 * mb <= limit}):
        big = [v for mb, v in zip(sized, ns, strict=True) if mb > limit - t]
        if not big:
            continue
        mid = [v for mb, v in zip(sized, ns, strict=True) if t <= mb <= limit - t]
        q = min(cap, limit // t)
        if q > 1 and mid:
            model.add(q * Expr.sum(big) + Expr.sum(mid) <= q * count)
