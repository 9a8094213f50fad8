"""The lab: generated fleets, what-if capacity and the N-1 drill, the logical fleet of real
llama.cpp children, the scenario lab (grid.lab.scenario) and the hindsight oracle
(grid.lab.oracle).

The face lists what other packages use; names are imported on first use (grid/fleet/faces.py),
so importing it loads no OR-Tools or scipy. `capacity` (the what-if answer) is read from
grid.lab.capacity itself: the name is also that submodule's.
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.lab.capacity import CapacityAnswer
    from grid.lab.capacity_survive import SurviveAnswer, size_to_survive
    from grid.lab.capacity_templates import DEFAULT_MAX, check_demand, check_max, load_templates
    from grid.lab.fleetgen import DEFAULT_NOW, generate_fleet, what_if_document
    from grid.lab.fleetgen_production import generate_production_fleet
    from grid.lab.fleetgen_trace import generate_trace_fleet
    from grid.lab.logical_fleet import LogicalFleet, default_run_dir
    from grid.lab.logical_fleet_settings import (
        DEFAULT_ENGINE_PORT_BASE,
        DEFAULT_PORT,
        MAX_MACHINES,
        CandidateModel,
        FleetModel,
        FleetSettings,
        available_mb,
        capacity_shares,
        resolve_model,
    )
    from grid.lab.oracle import OracleResult, load_trace, solve_oracle
    from grid.lab.report_html import graduate_html, save_report, scenario_html
    from grid.lab.scenario import (
        STRATEGIES,
        WORDS,
        ScenarioConfig,
        document,
        graduate,
        oracle_document,
        parse_option,
        read_trace,
        run_oracle,
        run_scenario,
    )
    from grid.lab.whatif_drill import Drill, drill

# module -> the names it gives the face, separated by spaces
_EXPORTS: dict[str, str] = {
    "grid.lab.capacity": "CapacityAnswer",
    "grid.lab.capacity_survive": "SurviveAnswer size_to_survive",
    "grid.lab.capacity_templates": "DEFAULT_MAX check_demand check_max load_templates",
    "grid.lab.fleetgen": "DEFAULT_NOW generate_fleet what_if_document",
    "grid.lab.fleetgen_production": "generate_production_fleet",
    "grid.lab.fleetgen_trace": "generate_trace_fleet",
    "grid.lab.logical_fleet": "LogicalFleet default_run_dir",
    "grid.lab.logical_fleet_settings": (
        "CandidateModel DEFAULT_ENGINE_PORT_BASE DEFAULT_PORT FleetModel FleetSettings"
        " MAX_MACHINES available_mb capacity_shares resolve_model"
    ),
    "grid.lab.oracle": "OracleResult load_trace solve_oracle",
    "grid.lab.scenario": (
        "STRATEGIES ScenarioConfig WORDS document graduate oracle_document parse_option"
        " read_trace run_oracle run_scenario"
    ),
    "grid.lab.report_html": "graduate_html save_report scenario_html",
    "grid.lab.whatif_drill": "Drill drill",
}

__all__ = [
    "DEFAULT_ENGINE_PORT_BASE",
    "DEFAULT_MAX",
    "DEFAULT_NOW",
    "DEFAULT_PORT",
    "MAX_MACHINES",
    "STRATEGIES",
    "WORDS",
    "CandidateModel",
    "CapacityAnswer",
    "Drill",
    "FleetModel",
    "FleetSettings",
    "LogicalFleet",
    "OracleResult",
    "ScenarioConfig",
    "SurviveAnswer",
    "available_mb",
    "capacity_shares",
    "check_demand",
    "check_max",
    "default_run_dir",
    "document",
    "drill",
    "generate_fleet",
    "generate_production_fleet",
    "generate_trace_fleet",
    "graduate",
    "graduate_html",
    "load_templates",
    "load_trace",
    "oracle_document",
    "parse_option",
    "read_trace",
    "resolve_model",
    "run_oracle",
    "run_scenario",
    "save_report",
    "scenario_html",
    "size_to_survive",
    "solve_oracle",
    "what_if_document",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
