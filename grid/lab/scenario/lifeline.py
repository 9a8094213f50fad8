"""The run's replica timeline for the safety checks that need history (grid/lab/sim_checks.py
`timeline_violations`: minimum residency, make-before-break of the last ready replica).

Recorded from ground truth, not from the reconciler: READY moments are the simulated hosts'
own `loaded_at` (set when a warm finishes), losses are the workday's outage and restore events,
drains are the simulator's records that succeeded, stamped with the tick that decided them and
what that tick's plan wanted for the model and whether the host admitted work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grid.fleet import ActionKind, RecordStatus, ResidencyState
from grid.lab.scenario import workday
from grid.lab.sim_checks import LifeEvent, SimViolation, timeline_violations

if TYPE_CHECKING:
    from grid.fleet import Plan
    from grid.lab.scenario.fleet import LabFleet


class LifeLog:
    def __init__(self) -> None:
        self.events: list[LifeEvent] = []
        self._seen: set[tuple[str, str, float]] = set()
        self._wanted: dict[float, dict[str, int]] = {}
        self._admitting: dict[float, dict[str, bool]] = {}

    def node_events(self, start: float, events: list[workday.Event]) -> None:
        for e in events:
            if e.kind in ("outage", "restore"):
                self.events.append(LifeEvent(start, "lost", e.host_id))

    def tick(self, start: float, plan: Plan, fleet: LabFleet) -> None:
        """After the tick that started at `start` ran and the nodes advanced."""
        self._wanted[start] = dict(plan.desired_replicas)
        self._admitting[start] = {h: x.admitting for h, x in fleet.hosts.items()}
        for host_id, host in sorted(fleet.hosts.items()):
            for model_id, res in sorted(host.residencies.items()):
                if res.state is not ResidencyState.READY or res.loaded_at is None:
                    continue
                key = (host_id, model_id, res.loaded_at)
                if key not in self._seen:
                    self._seen.add(key)
                    self.events.append(LifeEvent(res.loaded_at, "ready", host_id, model_id))

    def violations(self, fleet: LabFleet, min_residency_s: dict[str, float]) -> list[SimViolation]:
        drains = [
            LifeEvent(
                r.created_at,
                "drain",
                r.host_id,
                r.model_id,
                preemption=r.preemption,
                admitting=self._admitting.get(r.created_at, {}).get(r.host_id, True),
                wanted=self._wanted.get(r.created_at, {}).get(r.model_id, 0),
            )
            for r in fleet.records.values()
            if r.kind is ActionKind.DRAIN and r.status is RecordStatus.SUCCEEDED
        ]
        return timeline_violations(self.events + drains, min_residency_s)
