"""One scenario run on the virtual clock: arrivals -> physics -> production signals -> planner
-> reconciler -> simulated nodes, one controller tick per minute. Pure and deterministic by seed.

Minute t (the clock is T0 + 60 t at its start):
1. the workday's node events of minute t (throttle, outage, restore) happen;
2. minute t's arrivals are routed onto what is READY now (so a replica planned at tick t − 1
   serves from minute t: the one-tick startup delay) and the physics decides their outcomes;
   READY replicas report the routed work as active requests;
3. minute t − 1's completed requests reach the control as observations (the real
   `observation_from` on the classifier's shape and the physics' measurements: served model,
   outcome, device time, queue wait and depth), so overload feeds the next controller tick;
4. the control's demand fields go into the snapshot; the simulator runs the planner and the
   reconciler (minimum-residency fence, governors, drains that stay resident when deferred),
   delivers actions and advances 60 s, in which the nodes execute them; for smart the snapshot
   also carries the control's predictions, so the production planner's cache-only advisories
   become disk-only predictive loads (and exact evictions) like any other action.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from grid.demand import EndpointFamily, Observation, Outcome, RequestOutcome, observation_from
from grid.fleet import FleetSnapshot, HostState, Mode, ModelProfile, Plan, ResidencyState
from grid.lab.scenario import workday
from grid.lab.scenario.catalog import designated
from grid.lab.scenario.fleet import LabFleet
from grid.lab.scenario.metrics import Metrics
from grid.lab.scenario.personas import build_users
from grid.lab.scenario.physics import MinuteResult, Replica, Routed, route_minute
from grid.lab.scenario.strategies import STRATEGIES, Control, make_control
from grid.lab.scenario.world import ScenarioConfig, World, build_world
from grid.lab.simulator import SimConfig

T0 = 8 * 3600.0  # the virtual workday starts at 08:00
TICK_S = 60.0
THROTTLE = 0.5


@dataclass
class RunResult:
    config: ScenarioConfig
    world: World
    metrics: Metrics
    fleet: LabFleet


def _chooser(fleet: LabFleet, world: World, live: bool) -> Callable[[str], str | None]:
    def choose(word: str) -> str | None:
        machines = world.machines
        if live:
            machines = [m for m in machines if fleet.hosts[m.host_id].admitting]
        return designated(world.profiles, machines, word)

    return choose


def _replicas(fleet: LabFleet, world: World) -> list[Replica]:
    out: list[Replica] = []
    for m in world.machines:
        host = fleet.hosts[m.host_id]
        if not host.admitting:
            continue
        speed = m.kind.perf * (
            host.template.throttle_fraction if host.state is HostState.THROTTLED else 1.0
        )
        for model_id, res in sorted(host.residencies.items()):
            prof = fleet.models.get(model_id)
            if prof is None or res.state is not ResidencyState.READY or not host.routed(model_id):
                continue
            out.append(Replica(m.host_id, model_id, speed, 60.0 * prof.replica_concurrency))
    return out


def _apply_event(fleet: LabFleet, event: workday.Event) -> None:
    host = fleet.hosts[event.host_id]
    if event.kind == "throttle":
        host.template = host.template.model_copy(update={"throttle_fraction": THROTTLE})
        fleet.set_host_state(event.host_id, HostState.THROTTLED)
    elif event.kind == "unthrottle":
        fleet.set_host_state(event.host_id, HostState.ACCEPTING)
    elif event.kind == "outage":
        fleet.outage(event.host_id)
    elif event.kind == "restore":
        fleet.restore(event.host_id)
        host.residencies.clear()  # the machine rebooted: processes are gone, the disk stays


def queued_units(r: Routed) -> int:
    """Queue depth the boundary reports for a finished request, in concurrency units.

    Routed: the replica's overflow (physics). NO_ROUTE: no engine could take the job, so all of
    its work is still queued at the boundary: its base device seconds over one unit (60 device
    seconds per minute), rounded up; a queued minute-long video job is two units, which is what
    lets it cross the spec's offered-concurrency gate (or the media canary band) at once."""
    if r.outcome is Outcome.NO_ROUTE:
        return max(1, math.ceil(r.request.service_s / TICK_S - 1e-9))
    return r.queue_depth


def _observations(
    result: MinuteResult, start: float, models: Mapping[str, ModelProfile]
) -> list[tuple[Observation, str, str | None]]:
    items: list[tuple[Observation, str, str | None, float]] = []
    for r in result.routed:
        req = r.request
        done = min(start + req.offset_s + r.latency_s, start + TICK_S)
        outcome = RequestOutcome(
            requested_model=req.requested,
            served_model=r.model_id,
            outcome=r.outcome,
            service_time_s=r.device_s,
            queue_wait_s=max(0.0, r.latency_s - r.device_s),
            queue_depth=queued_units(r),
            body_bytes=req.body_bytes,
            timestamp=done,
        )
        obs = observation_from(req.shape, EndpointFamily(req.family), outcome)
        prof = models.get(r.model_id) if r.model_id else None
        items.append((obs, req.user_id, prof.artifact_sha256 if prof else None, done))
    items.sort(key=lambda x: (x[3], x[1]))
    return [(o, s, sha) for o, s, sha, _ in items]


def _set_activity(fleet: LabFleet, result: MinuteResult, now: float) -> None:
    for host in fleet.hosts.values():
        for res in host.residencies.values():
            if res.state is ResidencyState.READY:
                res.active_requests = 0
    for rep in result.replicas:
        if rep.used_s <= 0:
            continue
        res = fleet.hosts[rep.host_id].residencies[rep.model_id]
        res.active_requests = max(1, math.ceil(min(rep.used_s, rep.budget_s) / 60.0))
        res.last_used_at = now


def run_scenario(cfg: ScenarioConfig, world: World | None = None) -> RunResult:
    if cfg.strategy not in STRATEGIES:
        raise ValueError(cfg.strategy)
    world = world or build_world(cfg)
    hosts = [m.host.model_copy(update={"last_heartbeat": T0}) for m in world.machines]
    snap = FleetSnapshot(now=T0, hosts=hosts, models=world.profiles)
    placeholder: list[Control] = []
    fleet = LabFleet(
        snap,
        world.machines,
        config=SimConfig(tick_s=TICK_S, seed=cfg.seed, mode=Mode.AUTOMATIC),
        planner=lambda s: placeholder[0].plan(s),
    )
    users = build_users(cfg.users, cfg.seed)
    control = make_control(
        cfg.strategy,
        world.profiles,
        cfg.seed,
        _chooser(fleet, world, cfg.strategy == "greedy"),
        users,
    )
    placeholder.append(control)
    metrics = Metrics(world, cfg.strategy)
    mapping: dict[str, str] = control.mapping(None)
    pending: list[tuple[Observation, str, str | None]] = []
    profiles = {p.model_id: p for p in world.profiles}
    plan: Plan | None = None
    for t in range(cfg.minutes):
        start = fleet.now
        happened = [e for e in world.events if e.minute == t]
        for event in happened:
            _apply_event(fleet, event)
        result = route_minute(world.arrivals[t], _replicas(fleet, world), mapping, profiles)
        _set_activity(fleet, result, start)
        control.observe(pending, start)
        pending = _observations(result, start, fleet.models)
        fleet.fields = control.fields(start)
        fleet.predictions = control.predicted
        report = fleet.step()
        plan = report.plan
        mapping = control.mapping(plan)
        evicted = fleet.evict_disk()
        metrics.minute(t, start, result, report, fleet, happened, mapping, evicted)
    metrics.finish(fleet)
    return RunResult(cfg, world, metrics, fleet)


__all__ = ["T0", "TICK_S", "RunResult", "run_scenario"]
