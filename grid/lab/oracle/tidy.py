"""Mutation clean-up of a residency schedule that never lowers served (used after every search).

Two moves, applied until none applies, in a fixed order (deterministic; bridges first, since
they can only add service and a dropped stay could no longer be bridged):
- drop a replica's stay that serves nothing the other replicas would not serve anyway (its
  model's demand stays covered at every minute it is ready) when that saves mutations; memory
  and slots only shrink, and no other replica's timing changes;
- bridge an unload at e and a reload of the same replica on the same host at s > e (host up in
  between) when memory and slots allow it to stay through [e, s): two mutations fewer, and the
  replica is only readier.
A solver cut short by its budget may leave such churn; the lexicographic objective (served,
then mutations) prefers the tidied schedule, which `solve.py` still replays before using.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from grid.lab.oracle.flow import flow_total, minute_flow
from grid.lab.oracle.trace import Problem

Rows = list[list[set[int]]]


@dataclass
class _Stay:
    m: int
    h: int
    start: int
    end: int  # exclusive
    initial: bool  # present since before minute 0 (no load)
    unloaded: bool  # ends with an unload (not a loss to a down host, not the trace's end)


def _stays(problem: Problem, rows: Rows) -> list[_Stay]:
    out: list[_Stay] = []
    for m, h in problem.pairs():
        t = 0
        while t < problem.minutes:
            if m not in rows[t][h]:
                t += 1
                continue
            start = t
            while t < problem.minutes and m in rows[t][h]:
                t += 1
            unloaded = t < problem.minutes and problem.up[h][t]
            out.append(_Stay(m, h, start, t, start == 0 and (m, h) in problem.initial, unloaded))
    return out


class _Ledger:
    def __init__(self, problem: Problem, stays: list[_Stay]) -> None:
        self.p = problem
        # capacity[t][m]: scaled units the ready replicas of m can serve at minute t
        self.capacity = [[0] * len(problem.model_ids) for _ in range(problem.minutes)]
        self.used = [[0] * problem.minutes for _ in problem.host_ids]
        self.count = [[0] * problem.minutes for _ in problem.host_ids]
        for stay in stays:
            self.apply(stay, +1)

    def ready_span(self, stay: _Stay) -> range:
        first = stay.start if stay.initial else stay.start + self.p.load
        return range(first, stay.end)

    def apply(self, stay: _Stay, sign: int) -> None:
        for t in self.ready_span(stay):
            self.capacity[t][stay.m] += sign * self.p.cap(stay.m, stay.h, t)
        for t in range(stay.start, stay.end):
            self.used[stay.h][t] += sign * self.p.memory[stay.m]
            self.count[stay.h][t] += sign

    def idle(self, stay: _Stay) -> bool:
        """Every minute the stay is ready serves as much without it."""
        p = self.p
        for t in self.ready_span(stay):
            with_it = self.capacity[t]
            without = list(with_it)
            without[stay.m] -= p.cap(stay.m, stay.h, t)
            if all(p.solo):
                d = sum(p.demand[c][t] for c in p.model_classes[stay.m])
                if min(d, without[stay.m]) < min(d, with_it[stay.m]):
                    return False
            elif flow_total(minute_flow(p, t, without)) < flow_total(minute_flow(p, t, with_it)):
                return False
        return True

    def room(self, m: int, h: int, start: int, end: int) -> bool:
        p = self.p
        for t in range(start, end):
            if not p.up[h][t] or self.used[h][t] + p.memory[m] > p.capacity[h]:
                return False
            if p.slots[h] and self.count[h][t] + 1 > p.slots[h]:
                return False
        return True


def _bridge_one(stays: list[_Stay], ledger: _Ledger) -> bool:
    by_pair: dict[tuple[int, int], list[_Stay]] = {}
    for stay in sorted(stays, key=lambda s: (s.m, s.h, s.start)):
        by_pair.setdefault((stay.m, stay.h), []).append(stay)
    for runs in by_pair.values():
        for first, second in itertools.pairwise(runs):
            if first.unloaded and ledger.room(first.m, first.h, first.end, second.start):
                ledger.apply(first, -1)
                ledger.apply(second, -1)
                merged = _Stay(
                    first.m, first.h, first.start, second.end, first.initial, second.unloaded
                )
                stays[stays.index(first)] = merged
                stays.remove(second)
                ledger.apply(merged, +1)
                return True
    return False


def _drop_one(stays: list[_Stay], ledger: _Ledger) -> bool:
    for stay in stays:
        saves = (0 if stay.initial else 1) + (1 if stay.unloaded else 0)
        cost = 1 if stay.initial else 0  # dropping an initial stay unloads it at 0
        if saves > cost and ledger.idle(stay):
            ledger.apply(stay, -1)
            stays.remove(stay)
            return True
    return False


def tidy(problem: Problem, rows: Rows) -> Rows:
    """The residency `rows` with every bridge, then every drop, applied (see above)."""
    stays = _stays(problem, rows)
    ledger = _Ledger(problem, stays)
    while _bridge_one(stays, ledger) or _drop_one(stays, ledger):
        pass
    out: Rows = [[set() for _ in problem.host_ids] for _ in range(problem.minutes)]
    for stay in stays:
        for t in range(stay.start, stay.end):
            out[t][stay.h].add(stay.m)
    return out
