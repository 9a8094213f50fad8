"""Solver-agnostic schedule replayer: a schedule in, what it serves and how many mutations out.

It applies the contract's rules minute by minute and reports every broken rule: the greedy
schedule, the CP-SAT schedule and any hand-written one are all judged by the same code.

Reading of the contract (docs/oracle.md): at minute t, a down host first loses everything it
holds; then the minute's unloads apply, then its loads (so an unload frees memory and a slot for
a load at the same minute); then memory and slots are checked; then readiness and served are
counted. An initial replica behaves exactly like a replica loaded at minute −(load + hold): ready
at 0 and unloadable at any minute. A lost replica is gone for good: after the host comes back,
serving again takes a new load (counted) and a new load delay.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from grid.lab.oracle.flow import Flow, minute_flow
from grid.lab.oracle.trace import Problem


@dataclass(frozen=True, order=True)
class Action:
    """One schedule entry. Order: minute, then unloads before loads, then ids."""

    minute: int
    action: Literal["load", "unload"]
    model_id: str
    host_id: str

    def sort_key(self) -> tuple[int, int, str, str]:
        return (self.minute, 0 if self.action == "unload" else 1, self.model_id, self.host_id)

    def to_dict(self) -> dict[str, object]:
        return {
            "minute": self.minute,
            "action": self.action,
            "model_id": self.model_id,
            "host_id": self.host_id,
        }


@dataclass
class Replay:
    """What a schedule does. `served[c][t]` (per demand class; class m < len(model_ids) is model
    m's own demand) and `by_model[m][t]` (what model m's replicas served) are scaled by
    `problem.scale`; `flows[t]` (kept with `keep_residency`) routes minute t's service."""

    served: list[list[int]]
    mutations: int
    violations: list[str] = field(default_factory=list)
    # present[h] at the end of each minute: model index -> load minute (initial: -(load+hold))
    residency: list[list[dict[int, int]]] = field(default_factory=list)
    by_model: list[list[int]] = field(default_factory=list)
    flows: list[Flow] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(map(sum, self.served))

    @property
    def valid(self) -> bool:
        return not self.violations


def sort_schedule(schedule: list[Action]) -> list[Action]:
    return sorted(schedule, key=Action.sort_key)


def replay(problem: Problem, schedule: list[Action], *, keep_residency: bool = False) -> Replay:
    """Replay `schedule` on `problem`; broken rules go to `violations` (the action is skipped)."""
    hosts = {h: i for i, h in enumerate(problem.host_ids)}
    models = {m: i for i, m in enumerate(problem.model_ids)}
    by_minute: dict[int, list[Action]] = defaultdict(list)
    out = Replay(
        [[0] * problem.minutes for _ in problem.demand],
        0,
        by_model=[[0] * problem.minutes for _ in problem.model_ids],
    )
    for act in sort_schedule(schedule):
        if act.model_id not in models or act.host_id not in hosts:
            out.violations.append(f"{act}: unknown model or host")
        elif not 0 <= act.minute < problem.minutes:
            out.violations.append(f"{act}: minute outside [0, {problem.minutes})")
        else:
            by_minute[act.minute].append(act)
    first = -(problem.load + problem.hold)
    present: list[dict[int, int]] = [{} for _ in problem.host_ids]
    for m, h in problem.initial:
        present[h][m] = first
    for t in range(problem.minutes):
        for h, row in enumerate(problem.up):
            if not row[t]:
                present[h].clear()
        for act in by_minute.get(t, []):
            _apply(problem, present, act, models[act.model_id], hosts[act.host_id], out)
        _check_ledgers(problem, present, t, out)
        capacity = [0] * len(problem.model_ids)
        for h, resident in enumerate(present):
            for m, start in resident.items():
                if t - start >= problem.load:
                    capacity[m] += problem.cap(m, h, t)
        flow = minute_flow(problem, t, capacity)
        for (c, m), x in flow.items():
            out.served[c][t] += x
            out.by_model[m][t] += x
        if keep_residency:
            out.residency.append([dict(r) for r in present])
            out.flows.append(flow)
    return out


def _apply(
    problem: Problem, present: list[dict[int, int]], act: Action, m: int, h: int, out: Replay
) -> None:
    t = act.minute
    resident = present[h]
    if act.action == "unload":
        if m not in resident:
            out.violations.append(f"{act}: nothing to unload")
            return
        if t - resident[m] < problem.load + problem.hold:
            out.violations.append(
                f"{act}: loaded at {resident[m]}, unload needs minute >= "
                f"{resident[m] + problem.load + problem.hold}"
            )
            return
        del resident[m]
        out.mutations += 1
        return
    if not problem.up[h][t]:
        out.violations.append(f"{act}: host is down")
    elif not problem.eligible[m][h]:
        out.violations.append(f"{act}: no shared runtime, or the model exceeds the host")
    elif m in resident:
        out.violations.append(f"{act}: already present")
    else:
        resident[m] = t
        out.mutations += 1


def _check_ledgers(problem: Problem, present: list[dict[int, int]], t: int, out: Replay) -> None:
    for h, resident in enumerate(present):
        used = sum(problem.memory[m] for m in resident)
        if used > problem.capacity[h]:
            out.violations.append(
                f"minute {t}: {problem.host_ids[h]} holds {used} MB > {problem.capacity[h]} MB"
            )
        if problem.slots[h] and len(resident) > problem.slots[h]:
            out.violations.append(
                f"minute {t}: {problem.host_ids[h]} holds {len(resident)} models "
                f"> max_models {problem.slots[h]}"
            )


def schedule_from_residency(problem: Problem, rows: list[list[set[int]]]) -> list[Action]:
    """The schedule whose residency (rows[t][h] = models present at t) is `rows`.

    A model present at t−1 and t stays; leaving while the host is up is an unload; leaving
    because the host is down is a loss (no action)."""
    actions: list[Action] = []
    prev: list[set[int]] = [set() for _ in problem.host_ids]
    for m, h in problem.initial:
        prev[h].add(m)
    for t, row in enumerate(rows):
        for h, now in enumerate(row):
            before = prev[h] if problem.up[h][t] else set()
            host = problem.host_ids[h]
            for m in sorted(before - now):
                actions.append(Action(t, "unload", problem.model_ids[m], host))
            for m in sorted(now - before):
                actions.append(Action(t, "load", problem.model_ids[m], host))
            prev[h] = now
    return sort_schedule(actions)
