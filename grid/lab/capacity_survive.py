"""`grid capacity --survive N`: size the fleet so that every desired replica is still placed
after any N hosts fail (N−1 sizing for N = 1).

Start from the demand-only answer (capacity.py). Then repeat: on the proposed fleet (the
snapshot plus the counts so far), plan every failure set of N hosts (every host of the
proposed fleet can fail, added ones too); take the set that leaves the most replicas unmet
and ask `capacity` how many more hosts that failed fleet needs; add them. Stop when no failure
set leaves a replica unmet (SURVIVES), or when no template helps the worst one (INFEASIBLE:
its binding constraint is named). Every failure set is planned by the real planner, so a
SURVIVES answer is verified, not estimated. With more than MAX_SETS failure sets, the sets
of the largest hosts (by allocatable memory) are the ones tried, and the answer says so.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from grid.fleet import FleetSnapshot, Host
from grid.lab.capacity import capacity
from grid.lab.whatif import augment, plan, remove_hosts
from grid.planner import allocatable_mb

MAX_SETS = 64
MAX_ROUNDS = 8


@dataclass
class SurviveAnswer:
    added: dict[str, int]
    survive: int
    status: str  # SURVIVES, INFEASIBLE
    failure_sets: int  # planned in the last round
    exhaustive: bool  # every set of `survive` hosts was tried
    worst: list[str] = field(default_factory=list)  # the failure set that needed the last hosts
    binding: list[dict[str, object]] = field(default_factory=list)
    rounds: int = 0
    pinned: list[dict[str, object]] = field(default_factory=list)  # lost with their pinned host

    def to_dict(self) -> dict[str, object]:
        return {
            "added": dict(self.added),
            "survive": self.survive,
            "status": self.status,
            "failure_sets": self.failure_sets,
            "exhaustive": self.exhaustive,
            "worst_failure": list(self.worst),
            "binding": list(self.binding),
            "rounds": self.rounds,
            "pinned_not_survivable": list(self.pinned),
        }


def failure_sets(hosts: list[Host], size: int) -> tuple[list[tuple[str, ...]], bool]:
    """Every set of `size` hosts, or (past MAX_SETS) those of the largest hosts first."""
    if size <= 0 or not hosts:
        return [()], True
    ordered = sorted(hosts, key=lambda h: (-allocatable_mb(h), h.host_id))
    ids = [h.host_id for h in ordered]
    if math.comb(len(ids), min(size, len(ids))) <= MAX_SETS:
        return list(itertools.combinations(ids, min(size, len(ids)))), True
    return list(itertools.islice(itertools.combinations(ids, size), MAX_SETS)), False


def failed_fleet(fleet: FleetSnapshot, failed: tuple[str, ...]) -> FleetSnapshot:
    """The fleet after `failed` hosts fail, without the models pinned to one of them: a pin is
    never moved, so no added host brings those back (the answer lists them apart)."""
    gone = set(failed)
    away = {m.model_id for m in fleet.models if set(m.pinned_hosts) & gone}
    out = remove_hosts(fleet, failed)
    if not away:
        return out
    return out.model_copy(
        update={
            "models": [m for m in out.models if m.model_id not in away],
            "demand": {k: v for k, v in out.demand.items() if k not in away},
        }
    )


def _unmet(snap: FleetSnapshot, time_limit_s: float) -> int:
    return sum(u.missing_replicas for u in plan(snap, time_limit_s=time_limit_s).unsatisfied)


def pinned_losses(snap: FleetSnapshot) -> list[dict[str, object]]:
    """Models pinned to a host: they do not survive that host's failure, whatever is added."""
    return [
        {"model_id": m.model_id, "pinned_hosts": sorted(m.pinned_hosts)}
        for m in snap.models
        if m.pinned_hosts
    ]


def size_to_survive(
    snap: FleetSnapshot,
    templates: list[Host],
    *,
    survive: int,
    max_per_template: int,
    time_limit_s: float,
) -> SurviveAnswer:
    first = capacity(snap, templates, max_per_template=max_per_template, time_limit_s=time_limit_s)
    counts = dict(first.added)
    if first.status == "INFEASIBLE":
        return SurviveAnswer(counts, survive, "INFEASIBLE", 0, True, binding=first.binding)
    for round_ in range(1, MAX_ROUNDS + 1):
        fleet, _groups = augment(snap, counts, templates)
        sets, exhaustive = failure_sets(fleet.hosts, survive)
        worst: tuple[tuple[str, ...], int] | None = None
        for failed in sets:
            missing = _unmet(failed_fleet(fleet, failed), time_limit_s)
            if missing and (worst is None or missing > worst[1]):
                worst = (failed, missing)
        if worst is None:
            return SurviveAnswer(
                counts, survive, "SURVIVES", len(sets), exhaustive, rounds=round_,
                pinned=pinned_losses(snap),
            )  # fmt: skip
        more = capacity(
            failed_fleet(fleet, worst[0]),
            templates,
            max_per_template=max_per_template,
            time_limit_s=time_limit_s,
        )
        if more.status == "INFEASIBLE" or not any(more.added.values()):
            binding = more.binding or [
                {
                    "constraint": "templates",
                    "detail": "no added host of these templates places "
                    "the replicas this failure leaves unmet",
                }
            ]
            return SurviveAnswer(
                counts, survive, "INFEASIBLE", len(sets), exhaustive, list(worst[0]), binding,
                round_,
            )  # fmt: skip
        for name, n in more.added.items():
            counts[name] = counts.get(name, 0) + n
        if any(n > max_per_template for n in counts.values()):
            detail = f"surviving {survive} failure(s) needs more than --max {max_per_template}"
            return SurviveAnswer(
                counts, survive, "INFEASIBLE", len(sets), exhaustive, list(worst[0]),
                [{"constraint": "max", "detail": detail}], round_,
            )  # fmt: skip
    detail = f"not settled after {MAX_ROUNDS} rounds"
    return SurviveAnswer(counts, survive, "INFEASIBLE", 0, False,
                         binding=[{"constraint": "rounds", "detail": detail}],
                         rounds=MAX_ROUNDS)  # fmt: skip
