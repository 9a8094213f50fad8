"""GPU devices per host (grid/planner/gpus.py): a tensor-parallel replica consumes its devices.

For each host h and each threshold t among the per-device memory needs g_m of its GPU candidates,
with k_m the devices one replica of m takes and D(h, t) the devices of h with at least t MB:

    desired       Σ_{m: g_m ≥ t} k_m·x[m,h]      ≤ D(h, t) − fixed(h, t)                  (gpu)
    make-before   Σ_{new m: g_m ≥ t} k_m·x[m,h]  ≤ D(h, t) − live(h, t)
where fixed(h, t) and live(h, t) count the devices (of threshold ≥ t) that unmanaged replicas,
respectively every live process, hold. A row that every candidate fits at once is left out.
Both ledgers are the family `gpu`; the pair filter `gpu_shortfall` already removed hosts that
cannot hold even one replica.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Guard, PlacementVars, guarded
from grid.planner.gpu_ledger import gpu_table
from grid.planner.gpus import FAMILY, rows
from grid.planner.problem import PlacementProblem


def add_gpus(
    model: cp_model.CpModel,
    xs: PlacementVars,
    problem: PlacementProblem,
    guard: Guard | None = None,
) -> None:
    table = gpu_table(problem)
    if table is None:
        return
    for host_id in xs.hosts():
        gpus = table.hosts.get(host_id)
        if gpus is None:
            continue
        for keys, held in (
            (xs.keys_on_host(host_id), gpus.fixed),
            (xs.new_keys_on_host(host_id), gpus.live),
        ):
            need = {k: d for k in keys if (d := table.demand(k[0]))[0] > 0}
            if not need:
                continue
            devices = {k: d[0] for k, d in need.items()}
            free = rows(gpus.devices_mb, held, {g for _k, g in need.values()})
            for threshold, room in sorted(free.items()):
                members = [k for k, (_c, g) in need.items() if g >= threshold]
                if sum(devices[k] for k in members) <= room:
                    continue
                total = xs.total(members, devices.__getitem__)
                guarded(model.add(total <= max(0, room)), guard, FAMILY, host_id)
