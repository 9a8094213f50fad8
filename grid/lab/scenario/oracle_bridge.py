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
The oracle counts a workload's demand as served only on that designated model, so the run's
comparable figure is `run_served_on_target` (what the run served on the same model): the run's
own residency schedule is a feasible oracle schedule (its memory and slot ledgers, one-minute
start, a longer hold), so oracle served >= run_served_on_target always. Service the run gave on
another model is real service (`run_served` counts it) that the oracle's ceiling does not model.
`potential_gain` = (oracle served − run_served) / demand, never below 0.
`run_schedule` turns the run's own READY timeline into an oracle schedule; the oracle's replayer
values it (`run_placements_served`, `run_placement_changes`, `run_placements_valid`), so
`placement_gain` = (oracle served − run_placements_served) / demand is the placement opportunity
on the oracle's own terms (oracle served ≥ run_placements_served ≥ run_served_on_target).
"""

from __future__ import annotations

from typing import Any

from grid.lab.oracle import Action, compile_trace, parse_trace, replay, solve_oracle
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
    own = replay(problem, run_schedule(run))
    out = result.to_dict()
    out["run_placements_served"] = round(own.total / problem.scale, 4)
    out["run_placements_valid"] = own.valid
    out["run_placement_changes"] = own.mutations
    out["placement_gain"] = (
        round(max(0.0, result.served - own.total / problem.scale) / result.demand, 6)
        if result.demand > 0
        else 0.0
    )
    served = sum(w.served for w in run.metrics.words.values())
    out["run_served"] = round(served, 4)
    out["run_served_on_target"] = round(run.metrics.on_target, 4)
    out["potential_gain"] = (
        round(max(0.0, result.served - served) / result.demand, 6) if result.demand > 0 else 0.0
    )
    out["winning_changes"] = len(result.schedule)
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
