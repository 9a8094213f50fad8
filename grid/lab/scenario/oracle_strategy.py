"""The `oracle` strategy: the hindsight oracle's schedule replayed through the lab's physics.

The oracle (grid/lab/oracle) is solved on the world's trace (oracle_bridge.world_document: the
same arrivals, topology and events every strategy sees). Its schedule's residency gives the
READY replicas of every minute (present since an earlier minute: the one-minute load), its
replay's flow gives each request class's quotas per model, and physics.route_minute serves
minute t's arrivals on them. The physics is the oracle's service model, so the run serves what
the oracle says it serves (up to float rounding); the report's other terms (suitability, SLO,
least-workload, lifecycle, churn, mapping changes) are then measured on it as on any run.

Nothing here runs the planner or the reconciler: the oracle's schedule obeys the contract's
timing (load 1, hold 2 minutes), not the lab's minimum residency, so it is a yardstick, not an
allocator; it has no safety checks of its own (its `safety_violations` is 0 by construction).
Lifecycle: a load at minute s is a start at the end of minute s (cold when the host had no
cached artifact of the model: its seeded cache, then every artifact it loaded), an unload at
minute t an unload at its start. The mapping of a workload in a minute is the model its quotas
give the most work (ties: the class's order), for `mapping_changes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grid.fleet import FleetSnapshot, Mode
from grid.lab.oracle import OracleResult, Problem, Replay, compile_trace, parse_trace, solve_oracle
from grid.lab.oracle import replay as replay_schedule
from grid.lab.scenario import workday
from grid.lab.scenario.churn import UNLOAD, Change
from grid.lab.scenario.fleet import LabFleet
from grid.lab.scenario.lab import T0, TICK_S, RunResult
from grid.lab.scenario.metrics import Metrics
from grid.lab.scenario.oracle_bridge import DEFAULT_TIME_LIMIT_S, world_document
from grid.lab.scenario.physics import Replica, route_minute
from grid.lab.scenario.world import ScenarioConfig, World, build_world
from grid.lab.simulator import SimConfig

ORACLE = "oracle"


@dataclass
class OracleRun:
    run: RunResult
    problem: Problem
    result: OracleResult
    replay: Replay


def _quotas(problem: Problem, rep: Replay, t: int) -> dict[str, list[tuple[str, float]]]:
    flow = rep.flows[t]
    out: dict[str, list[tuple[str, float]]] = {}
    for c, members in enumerate(problem.class_models):
        rows = [
            (problem.model_ids[m], flow[c, m] / problem.scale) for m in members if (c, m) in flow
        ]
        if rows:
            out[problem.class_ids[c]] = rows
    return out


def _replicas(world: World, problem: Problem, rep: Replay, t: int) -> list[Replica]:
    out: list[Replica] = []
    profiles = {p.model_id: p for p in world.profiles}
    for h, resident in enumerate(rep.residency[t]):
        for m, start in sorted(resident.items()):
            if t - start < problem.load:
                continue
            prof = profiles[problem.model_ids[m]]
            speed = problem.cap(m, h, t) / problem.scale / prof.replica_concurrency
            out.append(
                Replica(problem.host_ids[h], prof.model_id, speed, 60.0 * prof.replica_concurrency)
            )
    return out


def _memory(world: World, problem: Problem, rep: Replay, t: int) -> float:
    live = alloc = 0
    for h, machine in enumerate(world.machines):
        if not problem.up[h][t]:
            continue
        host = machine.host
        alloc += host.capacity_mb - host.reserved_mb
        live += sum(problem.memory[m] for m in rep.residency[t][h])
    return live / alloc if alloc else 0.0


def run_oracle_strategy(
    cfg: ScenarioConfig,
    *,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    world: World | None = None,
) -> OracleRun:
    world = world or build_world(cfg)
    trace = parse_trace(world_document(world))
    problem = compile_trace(trace)
    result = solve_oracle(trace, time_limit_s=time_limit_s, deterministic=True)
    rep = replay_schedule(problem, result.schedule, keep_residency=True)
    hosts = [m.host.model_copy(update={"last_heartbeat": T0}) for m in world.machines]
    snap = FleetSnapshot(now=T0, hosts=hosts, models=world.profiles)

    def no_planner(_snap: FleetSnapshot) -> Any:
        raise RuntimeError("the oracle strategy never plans")

    fleet = LabFleet(
        snap,
        world.machines,
        config=SimConfig(tick_s=TICK_S, seed=cfg.seed, mode=Mode.AUTOMATIC),
        planner=no_planner,
    )
    metrics = Metrics(world, ORACLE)
    profiles = {p.model_id: p for p in world.profiles}
    by_minute: dict[int, list[str]] = {}
    for a in result.schedule:
        by_minute.setdefault(a.minute, []).append(f"{a.action}:{a.model_id}@{a.host_id}")
    words = set(workday.WORDS)
    for t in range(cfg.minutes):
        start = T0 + TICK_S * t
        happened = [e for e in world.events if e.minute == t]
        quotas = _quotas(problem, rep, t)
        minute = route_minute(
            world.arrivals[t], _replicas(world, problem, rep, t), {}, profiles, quotas
        )
        metrics.service(t, start, minute, happened)
        metrics.admission(minute, None)
        metrics.memory(_memory(world, problem, rep, t), 0)
        mapping = {c: max(rows, key=lambda r: r[1])[0] for c, rows in quotas.items() if c in words}
        metrics.tick_entry(
            t,
            minute,
            happened,
            mapping,
            [],
            actions=by_minute.get(t, []),
            withdrawn=[],
            deferred=[],
            shortfalls=[],
            violations=[],
        )
    cached = {m.host_id: set(m.host.cached_models) for m in world.machines}
    starts: list[tuple[float, str, str, bool]] = []
    unloads: list[Change] = []
    for a in result.schedule:
        if a.action == "load":
            cold = a.model_id not in cached[a.host_id]
            cached[a.host_id].add(a.model_id)
            starts.append((T0 + TICK_S * (a.minute + 1) - 1.0, a.host_id, a.model_id, cold))
        else:
            unloads.append(Change(T0 + TICK_S * a.minute, UNLOAD, a.host_id, a.model_id))
    metrics.finish_schedule(starts, unloads)
    return OracleRun(RunResult(cfg, world, metrics, fleet), problem, result, rep)


__all__ = ["ORACLE", "OracleRun", "run_oracle_strategy"]
