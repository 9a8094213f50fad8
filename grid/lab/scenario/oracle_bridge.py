"""`--oracle`: the hindsight oracle (grid/lab/oracle) on the run's exact demand and topology.

The trace (DESIGN.md "Oracle contract") is built from what the run recorded:
- minutes = the run's minutes; demand[m][t] = concurrency-minutes that arrived in minute t for
  model m: named requests for their model, `auto` requests for their word's most suitable
  allocatable model (`catalog.designated`, the same for every strategy);
- hosts: allocatable memory (capacity − reserved), model slots, and compatibility tokens: each
  runtime, plus `runtime+backend` pairs so a backend-bound model (video on CUDA) only fits where
  the lab allows it; `down` = the workday's outage intervals;
- models: memory, tokens, replica_concurrency × the fastest machine's performance (the oracle
  has no per-host speed, so it gets the most optimistic one: an upper bound);
- hold 2 minutes and load 1 minute (the contract's defaults; the lab's 300 s minimum residency
  is stricter), no initial replicas (the lab starts empty too).
The oracle counts a workload's demand as served only on that designated model, at its own
per-replica capacity. `run_schedule` turns the run's READY timeline into an oracle schedule and
the oracle's replayer values it: `run_placements_served` is the run on the oracle's measure (its
schedule is feasible for the oracle: memory and slot ledgers, one-minute start, a longer hold),
so with an OPTIMAL oracle served ≥ run_placements_served ≥ run_served_on_target (what the lab's
physics served on the designated models). `potential_gain` = (oracle served −
run_placements_served) / demand, both on that one measure, not clamped: a negative value can
only come from a FEASIBLE (budget-cut) oracle that fell short of the run's own schedule.
`run_served` (all service, on any model, under the lab's physics) is real service on another
measure, reported beside it and never subtracted from the oracle's figure.
`winning_changes`: the oracle's (model, host, [from, to)) residencies the run's schedule lacked,
ranked by served gain, the first WINNING_CHANGES_SHOWN (`winning_changes_total` counts all).
"""

from __future__ import annotations

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
from grid.lab.scenario.lab import RunResult

DEFAULT_TIME_LIMIT_S = 30.0


def oracle_document(run: RunResult) -> dict[str, Any]:
    world, m = run.world, run.metrics
    minutes = m.minutes
    perf = max(x.kind.perf for x in world.machines)
    down = workday.down_intervals(world.events, minutes)
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
                "replica_concurrency": round(p.replica_concurrency * perf, 6),
            }
        )
    demand = {
        k: [round(v, 6) for v in (series + [0.0] * minutes)[:minutes]]
        for k, series in sorted(m.oracle_demand.items())
    }
    return {
        "schema_version": 1,
        "minutes": minutes,
        "hold_minutes": 2,
        "load_minutes": 1,
        "hosts": hosts,
        "models": models,
        "demand": demand,
        "initial": [],
    }


def run_oracle(run: RunResult, time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> dict[str, Any]:
    trace = parse_trace(oracle_document(run))
    result = solve_oracle(trace, time_limit_s=time_limit_s, deterministic=True)
    problem = compile_trace(trace)
    own = replay(problem, run_schedule(run), keep_residency=True)
    best = replay(problem, result.schedule, keep_residency=True)
    out = result.to_dict()
    own_served = own.total / problem.scale
    out["run_placements_served"] = round(own_served, 4)
    out["run_placements_valid"] = own.valid
    out["run_placement_changes"] = own.mutations
    served = sum(w.served for w in run.metrics.words.values())
    out["run_served"] = round(served, 4)
    out["run_served_on_target"] = round(run.metrics.on_target, 4)
    # One measure: the oracle's (its demand, its per-replica capacity) for both sides.
    out["potential_gain"] = (
        round((result.served - own_served) / result.demand, 6) if result.demand > 0 else 0.0
    )
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
                surplus = max(0, oracle.served[m][t] - run.served[m][t])
                entry[1] += min(problem.conc[m], surplus / extra_ready[t][m])
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
