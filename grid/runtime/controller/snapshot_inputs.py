"""The planning snapshot of one tick, built from the controller's state (no I/O).

`fleet_snapshot` gathers what `Controller.snapshot` hands the planner: the registry's hosts
(measured), the profiles, learned start-up times, the workload inputs and the demand with its
predictions (`prefetch_inputs.snapshot_demand`).
"""

from __future__ import annotations

from grid.demand import Measurements
from grid.fleet import FleetSnapshot, Host
from grid.runtime.controller.live_state import ControllerState
from grid.runtime.controller.prefetch_inputs import snapshot_demand
from grid.runtime.controller.workload_inputs import mapped_inputs, measured_hosts


def fleet_snapshot(
    state: ControllerState, hosts: list[Host], measured: Measurements, now: float
) -> FleetSnapshot:
    """The planning snapshot of a tick: the registry's hosts, the profiles, and the demand and
    workload inputs the controller state holds (prunes the demand tracker to `now`)."""
    profiles = state.profiles
    models = [profiles[m] for m in sorted(profiles)]
    learned = state.timings.learned_startup(profiles, [h.host_id for h in hosts], now)
    state.tracker.prune(now)
    workloads, outcomes = state.signals.snapshot_fields(now, profiles)
    workloads, mapping = mapped_inputs(workloads, state.last.plan)
    explained = state.tracker.explain(now, models)
    demand, predictions = snapshot_demand(
        state.signals.edges(now), workloads, mapping, profiles, explained
    )
    return FleetSnapshot(
        now=now,
        policy=state.policy,
        hosts=measured_hosts(hosts, profiles, measured, now),
        models=models,
        demand=demand,
        learned_startup=learned,
        workloads=workloads,
        outcomes=outcomes,
        predictions=predictions,
    )
