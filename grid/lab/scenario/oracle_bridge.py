"""`--oracle`: the hindsight oracle (grid/lab/oracle) on the run's exact demand and topology.

The trace (DESIGN.md "Oracle contract", with the optional physics of docs/oracle.md "Extended
traces") is the run's own service model, so the oracle's `served` and `bound` are the report's
`served` measure:
- minutes = the run's minutes; demand per class and minute = the concurrency-minutes that
  arrived (named requests: the model's own demand; `auto` requests: their workload word, a class
  served by every model with a score for it, best first), rounded up to the oracle's 10^-6;
- hosts: allocatable memory (capacity − reserved), model slots, compatibility tokens (each
  runtime, plus `runtime+backend` pairs so a backend-bound model only fits where the lab allows
  it), `speed` = the machine's performance, `throttle` = the workday's throttled interval at
  lab.THROTTLE, `down` = the outage intervals;
- models: memory, tokens, replica_concurrency; hold 2 minutes and load 1 minute (the contract's
  defaults; the lab's 300 s minimum residency is stricter), no initial replicas (the lab starts
  empty too).
A replica READY at minute t serves replica_concurrency × speed of that minute's work, a model's
replicas pool, and a class's work may go to any of its models: physics.py computes exactly
that for the run's own routing, the oracle maximises it over every schedule and routing. So
every strategy's `served` ≤ the oracle's served when it is OPTIMAL, and ≤ `bound` always (the
run's READY timeline is a valid oracle schedule: `run_placements_valid`).
`run_schedule` turns the run's READY timeline into an oracle schedule, and the oracle's
replayer values it with the best routing: `run_placements_served` (≥ `run_served`, the run's
own `served`). `potential_gain` = (oracle served − run_served) / demand, split into
`placement_gain` (oracle served − run_placements_served) and `routing_gain`
(run_placements_served − run_served), all over demand, not clamped (negative only when a
budget-cut FEASIBLE oracle fell short).
`winning_changes`: the oracle's (model, host, [from, to)) residencies the run's schedule lacked,
ranked by served gain, the first WINNING_CHANGES_SHOWN (`winning_changes_total` counts all).
"""

from __future__ import annotations

import math
from typing import Any

from grid.lab.oracle import (
    Action,
    Problem,
    Replay,
    compile_trace,
    parse_trace,
    replay,
    solve_oracle,
)
from grid.lab.scenario import workday
from grid.lab.scenario.lab import THROTTLE, RunResult
from grid.lab.scenario.physics import request_class
from grid.lab.scenario.world import World

DEFAULT_TIME_LIMIT_S = 30.0


def _up(value: float) -> float:
    """A demand value rounded up to the oracle's resolution (10^-6), so rounding never lets a
    run serve more than the oracle's trace offers."""
    return round(math.ceil(value * 1e6 - 1e-6) / 1e6, 6)


def class_demand(world: World) -> dict[str, list[float]]:
    """Concurrency-minutes that arrived per request class (a named model or an `auto` word)
    and minute: what every strategy's physics is offered."""
    minutes = len(world.arrivals)
    out: dict[str, list[float]] = {}
    for t, requests in enumerate(world.arrivals):
        for req in requests:
            out.setdefault(request_class(req), [0.0] * minutes)[t] += req.units
    return out


def oracle_document(run: RunResult) -> dict[str, Any]:
    return world_document(run.world)


def world_document(world: World) -> dict[str, Any]:
    """The oracle trace of a world (the same for every strategy: the arrivals are seeded)."""
    minutes = len(world.arrivals)
    down = workday.down_intervals(world.events, minutes)
    slow = workday.throttle_intervals(world.events, minutes)
    hosts = []
    for x in world.machines:
        h = x.host
        tokens = sorted(set(h.runtimes) | {f"{r}+{b}" for r in h.runtimes for b in h.backends})
        hosts.append(
            {
                "host_id": h.host_id,
                "capacity_mb": h.capacity_mb - h.reserved_mb,
                "max_models": h.max_models,
                "runtimes": tokens,
                "down": [list(span) for span in down.get(h.host_id, [])],
                "speed": x.kind.perf,
                "throttle": [[a, b, THROTTLE] for a, b in slow.get(h.host_id, [])],
            }
        )
    models = []
    for p in world.profiles:
        tokens = (
            sorted(f"{r}+{b}" for r in p.runtimes for b in p.backends)
            if p.backends
            else sorted(p.runtimes)
        )
        models.append(
            {
                "model_id": p.model_id,
                "memory_mb": p.memory_mb,
                "runtimes": tokens,
                "replica_concurrency": p.replica_concurrency,
            }
        )
    names = {p.model_id for p in world.profiles}
    demand = {k: [_up(v) for v in series] for k, series in sorted(class_demand(world).items())}
    classes = {k: serving_models(world, k) for k in sorted(demand) if k not in names}
    return {
        "schema_version": 1,
        "minutes": minutes,
        "hold_minutes": 2,
        "load_minutes": 1,
        "hosts": hosts,
        "models": models,
        "demand": demand,
        "initial": [],
        "classes": classes,
    }


def serving_models(world: World, word: str) -> list[str]:
    """Every model that may serve an `auto` request of `word`, most suitable first."""
    able = [p for p in world.profiles if p.workload_scores.get(word, 0.0) > 0]
    able.sort(key=lambda p: (-p.workload_scores[word], p.memory_mb, p.model_id))
    return [p.model_id for p in able]


def solve_run(run: RunResult, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> tuple[Problem, Any]:
    trace = parse_trace(oracle_document(run))
    return compile_trace(trace), solve_oracle(trace, time_limit_s=time_limit_s, deterministic=True)


def run_oracle(run: RunResult, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> dict[str, Any]:
    problem, result = solve_run(run, time_limit_s)
    return oracle_report(run, problem, result)


def oracle_report(run: RunResult, problem: Problem, result: Any) -> dict[str, Any]:
    own = replay(problem, run_schedule(run), keep_residency=True)
    best = replay(problem, result.schedule, keep_residency=True)
    out = result.to_dict()
    own_served = own.total / problem.scale
    served = sum(w.served for w in run.metrics.words.values())
    out["run_placements_served"] = round(own_served, 4)
    out["run_placements_valid"] = own.valid
    out["run_placement_changes"] = own.mutations
    out["run_served"] = round(served, 4)
    out["run_served_on_target"] = round(run.metrics.on_target, 4)
    demand = result.demand
    out["potential_gain"] = round((result.served - served) / demand, 6) if demand > 0 else 0.0
    out["placement_gain"] = round((result.served - own_served) / demand, 6) if demand > 0 else 0.0
    out["routing_gain"] = round((own_served - served) / demand, 6) if demand > 0 else 0.0
    changes = winning_changes(problem, best, own)
    out["winning_changes"] = changes[:WINNING_CHANGES_SHOWN]
    out["winning_changes_total"] = len(changes)
    return out


WINNING_CHANGES_SHOWN = 10


def _present(rep: Replay, t: int) -> set[tuple[int, int]]:
    return {(m, h) for h, resident in enumerate(rep.residency[t]) for m in resident}


def winning_changes(problem: Problem, oracle: Replay, run: Replay) -> list[dict[str, Any]]:
    """The oracle's residencies the run did not have, as (model, host, [from, to)) ranges, ranked
    by served gain (best first; ties by model, host, start).

    A range is a maximal run of minutes in which the oracle holds the model on the host and the
    run's own schedule does not. Its served gain is, over the minutes its replica is ready, the
    oracle's surplus for that model, max(0, oracle served − run served), split evenly among the
    oracle's ready replicas of that model the run lacked that minute and capped at one replica's
    capacity. The gains of all ranges sum to at most (oracle served − run served) on the oracle's
    measure; a range with no gain (held but not needed) is left out."""
    minutes, scale, load = problem.minutes, problem.scale, problem.load
    extra_ready: list[dict[int, int]] = []
    for t in range(minutes):
        counts: dict[int, int] = {}
        for h, resident in enumerate(oracle.residency[t]):
            for m, start in resident.items():
                if t - start >= load and m not in run.residency[t][h]:
                    counts[m] = counts.get(m, 0) + 1
        extra_ready.append(counts)
    open_: dict[tuple[int, int], list[float]] = {}  # (m, h) -> [from, gain]
    out: list[dict[str, Any]] = []

    def close(key: tuple[int, int], end: int) -> None:
        start, gain = open_.pop(key)
        if gain > 0:
            m, h = key
            out.append(
                {
                    "model_id": problem.model_ids[m],
                    "host_id": problem.host_ids[h],
                    "from_minute": int(start),
                    "to_minute": end,
                    "served_gain": round(gain / scale, 4),
                }
            )

    for t in range(minutes + 1):
        now = _present(oracle, t) - _present(run, t) if t < minutes else set()
        for key in sorted(set(open_) - now):
            close(key, t)
        for m, h in sorted(now):
            entry = open_.setdefault((m, h), [float(t), 0.0])
            start = oracle.residency[t][h][m]
            if t - start >= load:
                surplus = max(0, oracle.by_model[m][t] - run.by_model[m][t])
                entry[1] += min(problem.cap(m, h, t), surplus / extra_ready[t][m])
    out.sort(key=lambda c: (-c["served_gain"], c["model_id"], c["host_id"], c["from_minute"]))
    return out


def run_schedule(run: RunResult) -> list[Action]:
    """The run's own placements as an oracle schedule (for checking the ceiling independently).

    A replica that served minute t (READY at its start) is present in minutes t − 1 and t in
    oracle terms (present from its load minute, ready one minute later); a host's down minutes
    clear it, as the oracle does, with no action.
    """
    m = run.metrics
    down = workday.down_intervals(run.world.events, m.minutes)
    is_down = {
        (h, t) for h, spans in down.items() for a, b in spans for t in range(a, min(b, m.minutes))
    }
    serving = [set(s) for s in m.serving] + [set()]
    present: set[tuple[str, str]] = set()
    out: list[Action] = []
    for t in range(m.minutes):
        present = {(h, x) for h, x in present if (h, t) not in is_down}
        want = {p for p in serving[t] | serving[t + 1] if (p[0], t) not in is_down}
        for h, x in sorted(present - want):
            out.append(Action(minute=t, action="unload", model_id=x, host_id=h))
        for h, x in sorted(want - present):
            out.append(Action(minute=t, action="load", model_id=x, host_id=h))
        present = want
    return out
