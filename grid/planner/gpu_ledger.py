"""The GPU ledgers of one placement problem (grid/planner/gpus.py has the rule): per host, its
devices and the devices held in each ledger, made once per problem and shared by the CP-SAT
family (cpsat/gpus.py), the heuristic's feasibility test and the host-type grouping."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from grid.fleet import Host, ModelProfile
from grid.planner.gpus import Demand, fits, held_by
from grid.planner.problem import Candidate, PlacementProblem


@dataclass(frozen=True)
class HostGpus:
    devices_mb: list[int]
    fixed: list[Demand]  # held in the desired ledger
    live: list[Demand]  # held in the make-before-break ledger


class GpuTable:
    """Per host, what a partial placement may still take (the heuristic's GPU ledger)."""

    def __init__(self, hosts: Iterable[Host], profiles: dict[str, ModelProfile]) -> None:
        self.profiles = profiles
        self.hosts = {
            h.host_id: HostGpus(
                h.devices_mb, held_by(h, profiles, live=False), held_by(h, profiles, live=True)
            )
            for h in hosts
        }

    def demand(self, model_id: str) -> Demand:
        prof = self.profiles.get(model_id)
        return prof.gpu_demand if prof is not None else (0, 0)

    def holds_gpu_work(self, cands: Iterable[Candidate]) -> bool:
        """Does any of these candidates need a GPU? (such hosts are never aggregated)"""
        return any(self.demand(c.model_id)[0] for c in cands)

    def fits(
        self, host_id: str, placed: Iterable[tuple[str, bool]], model_id: str, new: bool
    ) -> bool:
        """Would adding `model_id` (a new process or an incumbent) to `placed` (model, is_new)
        pairs on `host_id` keep both GPU ledgers?"""
        demand = self.demand(model_id)
        if demand[0] == 0:
            return True
        gpus = self.hosts[host_id]
        placed = list(placed)
        desired = [self.demand(m) for m, _n in placed] + gpus.fixed + [demand]
        if not fits(gpus.devices_mb, desired):
            return False
        if not new:
            return True
        fresh = [self.demand(m) for m, is_new in placed if is_new] + gpus.live + [demand]
        return fits(gpus.devices_mb, fresh)


def gpu_table(problem: PlacementProblem) -> GpuTable | None:
    """The problem's GPU ledger table, made once (None when no model needs a GPU)."""
    if "gpus" not in problem.memo:
        profiles = {m.model_id: m for m in problem.snapshot.models}
        needed = any(m.gpu_demand[0] for m in profiles.values())
        problem.memo["gpus"] = GpuTable(problem.snapshot.hosts, profiles) if needed else None
    table = problem.memo["gpus"]
    return table if isinstance(table, GpuTable) else None
