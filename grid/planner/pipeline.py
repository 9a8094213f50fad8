"""The planner as a declared pipeline: one ordered list of phases, one budget owner.

`PHASES` is the only place the order lives; `plan.make_plan` runs them in turn and clocks each
the same way (`Deadline.mark`, by name). Each phase has a name, a cost estimate from the one
calibration table (deadline.CALIBRATION), whether it applies to this run, and a run step that
reads and writes the run's state (`Run`). Modelled on Kubernetes' scheduler framework registry
(named plugins in one ordered table), Ray Serve's control loop (one loop over declared steps)
and the cpsat-primer's solve-then-validate split.

    build           the placement problem (problem.py), once
    heuristic       the greedy placement (heuristic.py): the fallback and the first hint
    host_types      the replica levels over host types (cpsat/aggregate.py) where hosts group
                    into types, on fleets of at most early_types_max_hosts hosts
    vacate          vacate moves (vacate.py) on the placement so far
    host_types_late the same after vacate, on larger fleets and in deterministic plans
    solve           the lexicographic CP-SAT solve (cpsat/solve.py), hinted with every placement
    stage           preemption staging (preemption.py), the better of solver and heuristic
    explain         the plan document: objective values and bounds, explanations (assemble.py)
    portfolio       the workload portfolio (portfolio/attach.py), with workloads only
    validate        validate.py: a plan that breaks a hard constraint is never returned

Budget (deadline.py owns every figure). Build and heuristic always run. A flexible phase (host
types, vacate, solve) gets what the deadline leaves after the estimates of the phases after it
(`Run.later_s`: staging, explanations, portfolio, validation and output, plus the solver's
setup for the phases before the solve). When that leaves no solve worth starting, the run
takes the fallback path: vacate moves down to the later phases' floor, then the heuristic's
placement with `HEURISTIC_FALLBACK` and the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.fleet import Plan
from grid.planner import pipeline_steps as steps
from grid.planner.deadline import explain_s, stage_s
from grid.planner.pipeline_run import Outcome, Run

__all__ = ["PHASES", "Outcome", "Phase", "Run", "run_phases"]


@dataclass(frozen=True)
class Phase:
    name: str
    estimate: Callable[[Run], float]  # seconds, from deadline.CALIBRATION
    applies: Callable[[Run], bool]
    step: Callable[[Run], None]


def _always(_run: Run) -> bool:
    return True


def _cpsat(run: Run) -> bool:
    return run.engine == "cpsat"


def _workloads(run: Run) -> bool:
    return bool(run.snapshot.workloads)


def _early(run: Run) -> bool:
    limit = budget.CALIBRATION.early_types_max_hosts
    return not run.deterministic and len(run.built.hosts) <= limit


def _types_first(run: Run) -> bool:
    if not (_cpsat(run) and _early(run)):
        return False  # before the import: a heuristic plan loads no OR-Tools
    from grid.planner.cpsat import aggregation_pays

    return aggregation_pays(run.built) and run.solver_reachable()


def _types_late(run: Run) -> bool:
    if not _cpsat(run) or _early(run) or run.fallback is not None:
        return False
    from grid.planner.cpsat import aggregation_pays

    return aggregation_pays(run.built) and run.solver_reachable()


def _estimate_build(run: Run) -> float:
    snap = run.snapshot
    return budget.CALIBRATION.build_s_per_pair * len(snap.hosts) * len(snap.models)


def _estimate_heuristic(run: Run) -> float:
    return budget.CALIBRATION.heuristic_s_per_candidate * len(run.built.candidates)


def _estimate_host_types(run: Run) -> float:
    from grid.planner.cpsat import disaggregation_s

    c = budget.CALIBRATION
    return c.aggregate_setup_share * run.build_s + disaggregation_s(run.built) + c.min_solve_s


def _estimate_vacate(_run: Run) -> float:
    return budget.CALIBRATION.vacate_min_s


def _estimate_solve(run: Run) -> float:
    return run.setup_s() + budget.CALIBRATION.min_solve_s


def _estimate_stage(run: Run) -> float:
    problem = run.built
    return stage_s(problem.distinct_candidates, run.build_s, len(problem.hosts), run.pace)


def _estimate_explain(run: Run) -> float:
    return explain_s(run.built.distinct_candidates, run.deadline.limit_s)


def _estimate_portfolio(run: Run) -> float:
    return run.portfolio_s


def _estimate_validate(run: Run) -> float:
    return run.output_s


def _phases() -> tuple[Phase, ...]:
    return (
        Phase("build", _estimate_build, _always, steps.build),
        Phase("heuristic", _estimate_heuristic, _always, steps.heuristic),
        Phase("host_types", _estimate_host_types, _types_first, steps.host_types),
        Phase("vacate", _estimate_vacate, _cpsat, steps.vacate),
        Phase("host_types_late", _estimate_host_types, _types_late, steps.host_types),
        Phase("solve", _estimate_solve, _cpsat, steps.solve),
        Phase("stage", _estimate_stage, _always, steps.stage),
        Phase("explain", _estimate_explain, _always, steps.explain),
        Phase("portfolio", _estimate_portfolio, _workloads, steps.portfolio),
        Phase("validate", _estimate_validate, _always, steps.validate),
    )


PHASES: tuple[Phase, ...] = _phases()


def run_phases(run: Run, phases: tuple[Phase, ...] | None = None) -> Plan:
    """Every phase in order, each clocked by name; the plan document of the last one."""
    deadline = run.deadline
    run.started = deadline.clock()
    for phase in PHASES if phases is None else phases:
        if not phase.applies(run):
            continue
        since = deadline.clock()
        phase.step(run)
        deadline.mark(phase.name, since)
    assert run.plan is not None
    return run.plan
