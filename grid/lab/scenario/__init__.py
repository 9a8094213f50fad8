"""The single-machine scenario lab: logical machines, personas, a seeded workday, routing
physics and four strategies, with the production demand signals, planner and reconciler on a
virtual clock (docs/scenario.md). Pure and deterministic by seed.

    run_scenario(ScenarioConfig(...)) -> RunResult; document(run) -> the stable JSON report
    run_oracle(run)                    -> the hindsight oracle on the run's trace
    run_oracle_strategy(cfg)           -> the oracle's schedule replayed through the physics
    graduate(...), gates(cells)        -> the graduation matrix and its gates
"""

from grid.lab.scenario.graduate import (
    DEFAULT_ORACLE_TIME_LIMIT_S,
    GATES,
    gates,
    graduate,
    run_cell,
)
from grid.lab.scenario.lab import RunResult, run_scenario
from grid.lab.scenario.oracle_bridge import (
    oracle_document,
    oracle_report,
    run_oracle,
    run_schedule,
    world_document,
)
from grid.lab.scenario.oracle_strategy import ORACLE, OracleRun, run_oracle_strategy
from grid.lab.scenario.report import coverage_term, document, overall_score, score_terms
from grid.lab.scenario.strategies import STRATEGIES
from grid.lab.scenario.traces import map_curve, parse_option, parse_rows, read_trace
from grid.lab.scenario.workday import WORDS
from grid.lab.scenario.world import ScenarioConfig, World, build_world

__all__ = [
    "DEFAULT_ORACLE_TIME_LIMIT_S",
    "GATES",
    "ORACLE",
    "STRATEGIES",
    "WORDS",
    "OracleRun",
    "RunResult",
    "ScenarioConfig",
    "World",
    "build_world",
    "coverage_term",
    "document",
    "gates",
    "graduate",
    "map_curve",
    "oracle_document",
    "oracle_report",
    "overall_score",
    "parse_option",
    "parse_rows",
    "read_trace",
    "run_cell",
    "run_oracle",
    "run_oracle_strategy",
    "run_scenario",
    "run_schedule",
    "score_terms",
    "world_document",
]
