"""The CP-SAT placement engine: variables, one module per constraint family, levels, solve.

Sets       M models, H hosts, C ⊆ M×H candidate pairs (problem.py: static refusals removed);
           incumbent candidates (managed live residencies kept at zero new memory) and new ones;
           F fixed (unmanaged) replicas, never variables.
Variables  x[m,h] ∈ {0,1} for (m,h) ∈ C (variables.py), plus exact auxiliaries: unary replica
           steps r[m,k] = [count_m ≥ k], host counts, failure-domain indicators, host-used flags.
Hard       memory.py       Σ mem·x ≤ allocatable − fixed_mb
                           Σ_new mem·x ≤ allocatable − live_mb − headroom
           slots.py        Σ x ≤ desired_cap;  Σ_new x ≤ new_cap
           colocation.py   x[m,h] ⇒ count(h) + fixed ≤ c_m (both ledgers);  x[a,h] + x[b,h] ≤ 1
           disk.py         Σ_uncached new artifact·x ≤ disk_free (known only)
           gpus.py         Σ_{g_m ≥ t} k_m·x ≤ devices(h, t) − held(h, t) per threshold t
           replicas.py     Σ_h x[m,h] ≤ open(m)
                           Σ_{h ∉ pins} x[m,h] ≤ desired − |pins| − fixed replicas off the pins
Levels     objective.py    one linear expression per level of levels.py (equal to score_placement);
           domains.py      the domain_shortfall term
Solve      solve.py        lexicographic stages (stages.py), hinted, within a time budget
Explain    assumptions.py  a feasibility model with one assumption literal per (family, host) and
                           per protected model; its infeasibility core names the binding constraints
Types      aggregate.py    the replica levels over host types (n[m,T], per-type ledgers and cuts);
           arcflow.py      exact packing of a type: its configuration graph (arc-flow) of one
                           host's ledger, for given counts or linked to n[m,T]
Bounds     bounds.py       capacity-blind; forced.py under forced counts (Martello-Toth L2);
           exclusive.py    the exclusive-host relaxation of solo models
ledger.py is the placement-wide ledger over grid/planner/ledger.py, the one per-host ledger
(hint repair, disaggregation, vacate moves, explanation amounts).

The face lists what the rest of the planner uses; names are imported on first use
(grid/fleet/faces.py).
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.planner.cpsat.aggregate import (
        AggregateResult,
        aggregation_pays,
        disaggregation_s,
        solve_aggregated,
    )
    from grid.planner.cpsat.allowance import pinned_hosts, unpinned_allowance
    from grid.planner.cpsat.assumptions import Core, binding_core
    from grid.planner.cpsat.bounds import static_bounds
    from grid.planner.cpsat.build import add_hard_constraints
    from grid.planner.cpsat.colocation import add_colocation
    from grid.planner.cpsat.disk import add_disk
    from grid.planner.cpsat.gpus import add_gpus
    from grid.planner.cpsat.ledger import Blocker, HostLoad, Ledger, host_blockers, host_load
    from grid.planner.cpsat.memory import add_memory
    from grid.planner.cpsat.scoring import Scorer
    from grid.planner.cpsat.slots import add_slots
    from grid.planner.cpsat.solve import solve_lexicographic
    from grid.planner.cpsat.type_ledgers import (
        TypeRoom,
        add_conflict_cuts,
        add_type_ledgers,
        fits_alone,
    )
    from grid.planner.cpsat.variables import Expr, Guard, PlacementVars

# module -> the names it gives the face, separated by spaces
_EXPORTS: dict[str, str] = {
    "grid.planner.cpsat.aggregate": (
        "AggregateResult aggregation_pays disaggregation_s solve_aggregated"
    ),
    "grid.planner.cpsat.assumptions": "Core binding_core",
    "grid.planner.cpsat.bounds": "static_bounds",
    "grid.planner.cpsat.build": "add_hard_constraints",
    "grid.planner.cpsat.colocation": "add_colocation",
    "grid.planner.cpsat.disk": "add_disk",
    "grid.planner.cpsat.gpus": "add_gpus",
    "grid.planner.cpsat.ledger": "Blocker HostLoad Ledger host_blockers host_load",
    "grid.planner.cpsat.memory": "add_memory",
    "grid.planner.cpsat.allowance": "pinned_hosts unpinned_allowance",
    "grid.planner.cpsat.scoring": "Scorer",
    "grid.planner.cpsat.slots": "add_slots",
    "grid.planner.cpsat.solve": "solve_lexicographic",
    "grid.planner.cpsat.type_ledgers": "TypeRoom add_conflict_cuts add_type_ledgers fits_alone",
    "grid.planner.cpsat.variables": "Expr Guard PlacementVars",
}

__all__ = [
    "AggregateResult",
    "Blocker",
    "Core",
    "Expr",
    "Guard",
    "HostLoad",
    "Ledger",
    "PlacementVars",
    "Scorer",
    "TypeRoom",
    "add_colocation",
    "add_conflict_cuts",
    "add_disk",
    "add_gpus",
    "add_hard_constraints",
    "add_memory",
    "add_slots",
    "add_type_ledgers",
    "aggregation_pays",
    "binding_core",
    "disaggregation_s",
    "fits_alone",
    "host_blockers",
    "host_load",
    "pinned_hosts",
    "solve_aggregated",
    "solve_lexicographic",
    "static_bounds",
    "unpinned_allowance",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
