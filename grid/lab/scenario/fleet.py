"""The lab's fleet: the shared `FleetSimulator` with modeled disk, the strategy's demand fields
in every snapshot, and residency activity set by the routing physics (not by named demand).

What this adds to grid/lab/simulator.py (nothing there changes):
- `snapshot()` carries the strategy's `demand`, `workloads` and `outcomes` and each machine's
  modeled `disk_free_mb` (total disk − artifacts cached there);
- `_serve_requests()` is the physics' job: a READY replica's `active_requests` is what the
  minute routed to it (set before the tick, so the reconciler sees busy replicas); anything
  draining has finished its requests by the end of the minute;
- `evict_disk()`: a machine whose free disk falls below 15 % reclaims its least recently used
  artifacts that are not live (never a live or pinned one), counting the reclaimed MB;
- `predictions`: the strategy's predictions for the predictive cache, in every snapshot (the
  production planner and reconciler do the prefetching; a predictive load is disk only).
"""

from __future__ import annotations

from grid.fleet import (
    LIVE_STATES,
    DemandEntry,
    FleetSnapshot,
    Outcome,
    Prediction,
    ResidencyState,
    WorkloadForecast,
)
from grid.lab.scenario.catalog import Machine
from grid.lab.simulator import FleetSimulator, PlannerFn, SimConfig

DISK_RECLAIM_FRACTION = 0.15


class LabFleet(FleetSimulator):
    def __init__(
        self,
        snapshot: FleetSnapshot,
        machines: list[Machine],
        *,
        config: SimConfig,
        planner: PlannerFn,
    ) -> None:
        super().__init__(snapshot, config=config, planner=planner)
        self.machines = {m.host_id: m for m in machines}
        self.fields: tuple[dict[str, DemandEntry], dict[str, WorkloadForecast], list[Outcome]] = (
            {},
            {},
            [],
        )
        self.predictions: list[Prediction] = []
        self.last_cached_use: dict[tuple[str, str], float] = {}
        self.reclaimed_mb = 0

    # ------------------------------------------------------------------ disk
    def disk_used_mb(self, host_id: str) -> int:
        host = self.hosts[host_id]
        return sum(self.models[m].artifact_size_mb for m in host.cached if m in self.models)

    def disk_free_mb(self, host_id: str) -> int:
        return max(0, self.machines[host_id].disk_mb - self.disk_used_mb(host_id))

    def evict_disk(self) -> list[tuple[str, str]]:
        evicted: list[tuple[str, str]] = []
        for host_id, host in self.hosts.items():
            total = self.machines[host_id].disk_mb
            for model_id in sorted(host.cached):
                res = host.residencies.get(model_id)
                if res is not None and res.state in LIVE_STATES:
                    self.last_cached_use[(host_id, model_id)] = self.now
            victims = sorted(
                (
                    m
                    for m in host.cached
                    if m in self.models
                    and not (host.residencies.get(m) and host.residencies[m].state in LIVE_STATES)
                    and host_id not in self.models[m].pinned_hosts
                ),
                key=lambda m: (self.last_cached_use.get((host_id, m), -1.0), m),
            )
            for model_id in victims:
                if self.disk_free_mb(host_id) >= DISK_RECLAIM_FRACTION * total:
                    break
                host.cached.discard(model_id)
                self.reclaimed_mb += self.models[model_id].artifact_size_mb
                evicted.append((host_id, model_id))
        return evicted

    # ------------------------------------------------------------------ views
    def snapshot(self) -> FleetSnapshot:
        base = super().snapshot()
        demand, workloads, outcomes = self.fields
        hosts = [
            h.model_copy(update={"disk_free_mb": self.disk_free_mb(h.host_id)}) for h in base.hosts
        ]
        return base.model_copy(
            update={
                "hosts": hosts,
                "demand": {m: d for m, d in sorted(demand.items()) if m in self.models},
                "workloads": dict(sorted(workloads.items())),
                "outcomes": list(outcomes),
                "predictions": [p for p in self.predictions if p.model_id in self.models],
            }
        )

    def _serve_requests(self) -> None:
        for host in self.hosts.values():
            for res in host.residencies.values():
                serving = host.admitting and res.state is ResidencyState.READY
                if not serving:
                    res.active_requests = 0
