"""The planner's entry point: (snapshot) -> Plan, with either engine (pure but for timing).

`cpsat` is hinted with the incumbent placement, the heuristic's plan and that plan improved by
vacate moves (vacate.py: a whole host freed for a replica that needs one), and, on a fleet whose
hosts group into types (types.py; at least half the candidates on types of several hosts),
first solves the replica levels over host types (cpsat/aggregate.py): its disaggregated
placement is the first hint, and its levels, when the check proves them, the replica levels'
bounds. When it finds no
feasible solution within its budget the heuristic's plan is returned and `solver.status`
says so. One `Deadline` (deadline.py) budgets every phase: the problem build and the
heuristic spend from it, CP-SAT gets what remains less the reserve of the phases after it
(staging, explanations, the caller's validation and output), and explanations shorten once it
has run out. Wall time is measured with the deadline's monotonic clock, never the calendar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.assemble import assemble_plan
from grid.planner.deadline import (
    EXPLANATION_CORES_LIMIT_SHARE,
    Deadline,
    explanation_cores_s,
    model_build_s_per_key,
    portfolio_share_s,
    post_solve_reserve_s,
)
from grid.planner.gcpause import gc_paused
from grid.planner.heuristic import heuristic_placement
from grid.planner.levels import compare, score_placement
from grid.planner.preemption import stage_changes
from grid.planner.prefetch import attach_prefetch
from grid.planner.problem import PlacementProblem, build_problem
from grid.planner.targets import Target

if TYPE_CHECKING:
    from grid.planner.cpsat.aggregate import AggregateResult

Engine = Literal["cpsat", "heuristic"]
Key = tuple[str, str]
ENGINES = ("cpsat", "heuristic")
MIN_SOLVE_S = 0.05  # below this a CP-SAT solve cannot improve on the heuristic's hint
AGGREGATE_SHARE = 0.6  # of the solve budget, for the replica levels over host types
AGGREGATE_WIDE_SHARE = 0.9  # ... when the per-host model is too large to build after it
EARLY_TYPES_MAX_HOSTS = 2000  # up to this many hosts the host-type model runs before vacate
VACATE_SHARE = 0.5  # of the solve budget, at most, for the vacate moves before the solve
VACATE_MIN_S = 0.5  # ... but never less than this
VACATE_TRIAL_S = 0.1  # the pass may overrun its time by one trial (10,000 hosts: <= 0.09 s)
# Fixed costs that do not shrink with their budget, as shares of the problem build just
# measured (a slow build predicts slow setups). The solver's setup (its scorer and static
# bounds, scoring every hint, the final check of the placement): 0.5-0.6 s after a 2 s build
# at 10,000 production hosts, 0.07 s after 0.07 s at 1,000. The host-type model's build and
# static bounds: 0.6 s after 2 s, 0.05 s after 0.07 s. A phase that would not cover its
# setup is not started: it would spend the reserve of the phases after it.
SOLVE_SETUP_SHARE = 0.3
AGGREGATE_SETUP_SHARE = 0.35


def incumbent_placement(problem: PlacementProblem) -> set[tuple[str, str]]:
    """Keys of every incumbent candidate (a hint, not necessarily feasible)."""
    return {(cand.model_id, cand.host_id) for cand in problem.incumbent_candidates}


def make_plan(
    snap: FleetSnapshot,
    *,
    engine: str = "cpsat",
    time_limit_s: float = 5.0,
    deterministic: bool = False,
    targets: dict[str, Target] | None = None,
    soft_stage_limit_s: float | None = None,
    deadline: Deadline | None = None,
) -> Plan:
    """`deadline`: the whole command's budget when the caller started it earlier (the CLI
    starts it before loading the snapshot); else `time_limit_s` from now."""
    if engine not in ENGINES:
        raise GridError(
            "unknown_engine",
            f"engine {engine!r} is not one of {', '.join(ENGINES)}",
            fix="use --engine cpsat or --engine heuristic",
        )
    if not time_limit_s > 0:
        raise GridError(
            "invalid_time_limit",
            f"time limit {time_limit_s} must be a positive number of seconds",
            fix="pass --time-limit with a value such as 2.5",
        )
    deadline = deadline if deadline is not None else Deadline(time_limit_s)
    with gc_paused():
        plan = _make_plan(snap, engine, deadline, deterministic, targets, soft_stage_limit_s)
    # The predictive cache's advisories belong to the authoritative plan only (issue 23).
    return attach_prefetch(snap, plan)


def _make_plan(
    snap: FleetSnapshot,
    engine: str,
    deadline: Deadline,
    deterministic: bool,
    targets: dict[str, Target] | None,
    soft_stage_limit_s: float | None,
) -> Plan:
    started = deadline.clock()
    problem = build_problem(snap, targets)
    deadline.keep.append(problem)  # freed by the deadline's holder, after its output
    clock = deadline.mark("build", started)
    greedy = heuristic_placement(problem)
    clock = deadline.mark("heuristic", clock)

    def wall_ms() -> float:
        return (deadline.clock() - started) * 1000

    if engine == "heuristic":
        return assemble_plan(
            problem,
            greedy,
            engine="heuristic",
            status="HEURISTIC",
            wall_ms=wall_ms(),
            deadline=deadline,
        )
    build_s = deadline.spent["build"]
    if snap.workloads:
        # The workload portfolio runs after this whole plan: its share of the deadline is
        # held from every phase below and released by attach_portfolio (deadline.py).
        keys = _portfolio_keys(snap, problem)
        policy_s = snap.policy.portfolio.time_limit_s
        deadline.hold(portfolio_share_s(deadline.limit_s, keys, policy_s))
    # The solver's own setup is kept out of what vacate moves and the host-type model spend.
    hosts, output_s, limit_s = len(problem.hosts), deadline.output_s, deadline.limit_s
    reserve = post_solve_reserve_s(
        problem.distinct_candidates, build_s, hosts=hosts, output_s=output_s, limit_s=limit_s
    )
    setup = SOLVE_SETUP_SHARE * build_s
    if deadline.remaining() - reserve - setup < MIN_SOLVE_S:
        # No time for CP-SAT, but the vacate moves (pure, stopped between trials) still run
        # while the phases after them keep their reserve, less the explanations' CP-SAT cores
        # (explanations shorten here anyway) and the per-candidate term (a fallback stages
        # once: 1,000 x 200 mixed takes 0.13-0.35 s after vacate, production 1,000 0.14 s,
        # under the 0.26 s floor at 1,000 hosts); not in deterministic mode. (1,000 x 200
        # mixed at 2 s before the reserve's recalibration: 0.25 s, p10:direct:1 41 -> 42; it
        # now reaches CP-SAT there.)
        floor = _floor_s(build_s, hosts, output_s, limit_s)
        if deterministic or deadline.remaining() <= floor:
            return _no_time_left(problem, greedy, deadline, wall_ms(), "loading and building")
        from grid.planner.vacate import vacate_improve

        moved = vacate_improve(problem, greedy, out_of_time=lambda: deadline.remaining() < floor)
        deadline.mark("vacate", clock)
        return _no_time_left(problem, moved, deadline, wall_ms(), "loading, building and vacate")

    from grid.planner.cpsat.aggregate import aggregation_pays
    from grid.planner.cpsat.solve import solve_lexicographic

    # Host types first where they pay and usually prove (up to EARLY_TYPES_MAX_HOSTS hosts;
    # not in deterministic mode, whose plans keep their order): a proof of every replica level
    # leaves no vacate move anything to raise (production 1,000 x 200 at --time-limit 2: the
    # vacate pass took 0.47 s and left the host-type model too little to prove; run first it
    # proves in 0.3 s, whole command 1.17 s). At 5,000 production hosts it does not prove in
    # its share and the vacate pass first does better (98 open replica levels against 102).
    aggregated: AggregateResult | None = None
    held = reserve + setup
    pays = aggregation_pays(problem)
    early = pays and not deterministic and len(problem.hosts) <= EARLY_TYPES_MAX_HOSTS
    if early:
        aggregated = _host_types(problem, greedy, deadline, held, build_s)
        clock = deadline.mark("aggregate", clock)
    if aggregated is not None and aggregated.proven:
        vacated = aggregated.placed
    else:
        vacated = _vacate(problem, greedy, deadline, held, deterministic, build_s)
    hints = [vacated, greedy, incumbent_placement(problem)]
    clock = deadline.mark("vacate", clock)
    if pays and not early:
        aggregated = _host_types(problem, greedy, deadline, held, build_s)
        clock = deadline.mark("aggregate", clock)
    proven: dict[str, int] | None = None
    if aggregated is not None:
        if aggregated.placed is not vacated:
            hints.insert(0, aggregated.placed)
        proven = aggregated.values if aggregated.proven else None
    if deadline.remaining() - reserve < setup:  # vacate or the host-type model ran late
        return _no_time_left(problem, vacated, deadline, wall_ms(), "the phases before it")
    result = solve_lexicographic(
        problem,
        hints=hints,
        proven_bounds=proven,
        time_limit_s=deadline.remaining(),
        deterministic=deterministic,
        soft_stage_limit_s=soft_stage_limit_s,
        reserve_s=reserve,
        build_s_per_key=model_build_s_per_key(len(problem.candidates), build_s),
    )
    deadline.mark("solve", clock)
    if result.placed is None:
        return assemble_plan(
            problem,
            greedy,
            engine="heuristic",
            status="HEURISTIC_FALLBACK",
            wall_ms=wall_ms(),
            message=result.message or "CP-SAT found no feasible solution within the time limit",
            deadline=deadline,
        )
    placed, message = result.placed, result.message
    clock = deadline.clock()
    staged = stage_changes(problem, placed)
    values = None
    if placed != greedy:
        # Staged evictions depend on where everything else sits: a solver placement that is
        # at least as good before staging can lose replicas to a larger victim set after it.
        greedy_staged = stage_changes(problem, greedy)
        values = score_placement(problem, staged[1])
        greedy_values = score_placement(problem, greedy_staged[1])
        if compare(problem, greedy_values, values) > 0:
            placed, staged, values = greedy, greedy_staged, greedy_values
            message = (message + " " if message else "") + (
                "kept the heuristic's placement: it needs fewer evictions once preemption is staged"
            )
    deadline.mark("staging", clock)
    return assemble_plan(
        problem,
        placed,
        engine="cp-sat",
        status=result.status,
        wall_ms=wall_ms(),
        bounds=result.bounds,
        message=message,
        deadline=deadline,
        staged=staged,
        values=values,
    )


def _portfolio_keys(snap: FleetSnapshot, problem: PlacementProblem) -> int:
    """The candidates of every model scored for an active workload: the portfolio model's
    variable count before host types (what its share of the deadline is sized by)."""
    scored = {
        m.model_id for m in snap.models if any(w in snap.workloads for w in m.workload_scores)
    }
    return sum(len(problem.candidates_of_model(m)) for m in scored)


def _floor_s(build_s: float, hosts: int, output_s: float | None, limit_s: float) -> float:
    """What vacate moves leave for a fallback's later phases: the reserve without the
    explanations' cores and the per-candidate term (a fallback stages once)."""
    reserve = post_solve_reserve_s(0, build_s, hosts=hosts, output_s=output_s, limit_s=limit_s)
    return reserve - min(explanation_cores_s(0), EXPLANATION_CORES_LIMIT_SHARE * limit_s)


def _host_types(
    problem: PlacementProblem,
    greedy: set[Key],
    deadline: Deadline,
    held_s: float,
    build_s: float,
) -> AggregateResult | None:
    """The replica levels on n[m,T] (cpsat/aggregate.py) where the budget left after `held_s`
    (the post-solve reserve and the solver's setup) covers the model's build and its
    disaggregations (10,000 production hosts: 0.7 + 2 s) with time to solve; None otherwise."""
    from grid.planner.cpsat.aggregate import disaggregation_s, solve_aggregated
    from grid.planner.cpsat.solve import BUILD_S_PER_KEY, BUILD_SHARE

    left = deadline.remaining() - held_s
    # When the per-host model could not be built in what is left anyway (solve.py skips it),
    # the host-type model gets nearly all of it.
    per_host = max(BUILD_S_PER_KEY, model_build_s_per_key(len(problem.candidates), build_s))
    wide = per_host * len(problem.candidates) > BUILD_SHARE * left * (1 - AGGREGATE_SHARE)
    share = (AGGREGATE_WIDE_SHARE if wide else AGGREGATE_SHARE) * left
    if share <= AGGREGATE_SETUP_SHARE * build_s + disaggregation_s(problem) + MIN_SOLVE_S:
        return None
    return solve_aggregated(problem, hint=greedy, time_limit_s=share)


def _vacate(
    problem: PlacementProblem,
    greedy: set[Key],
    deadline: Deadline,
    held_s: float,
    deterministic: bool,
    build_s: float,
) -> set[Key]:
    """Vacate moves may use VACATE_SHARE of the solve budget, and at least VACATE_MIN_S
    (1,000 mixed hosts: 0.15 s, its best replica levels; 10,000 production: 0.3-1.1 s) but
    never the solver's setup (then the plan would be the fallback); a deterministic plan
    (the lab) always runs the whole pass."""
    from grid.planner.vacate import vacate_improve

    budget = deadline.remaining() - held_s
    vacate_s = min(budget - VACATE_TRIAL_S, max(VACATE_MIN_S, VACATE_SHARE * budget))
    vacate_by = deadline.elapsed() + vacate_s
    cut: list[bool] = []

    def vacate_late() -> bool:
        late = deadline.elapsed() > vacate_by
        cut.extend([True] if late else [])
        return late

    vacated = vacate_improve(problem, greedy, out_of_time=None if deterministic else vacate_late)
    if cut and deadline.remaining() - held_s < VACATE_MIN_S:
        # The pass was cut for a solve with no time to pay (1,000 x 200 mixed at 2.5-2.65 s:
        # p10:baseline:1 8/12 after a cut pass, 12/12 and p10:direct:1 42/43 after a whole
        # one): the moves go on to the fallback's floor; the solve below runs if time is left.
        floor = _floor_s(build_s, len(problem.hosts), deadline.output_s, deadline.limit_s)
        vacated = vacate_improve(problem, vacated, out_of_time=lambda: deadline.remaining() < floor)
    return vacated


def _no_time_left(
    problem: PlacementProblem, placed: set[Key], deadline: Deadline, wall_ms: float, what: str
) -> Plan:
    """The heuristic's placement (improved by vacate moves when they ran): CP-SAT would not
    have had the time to set up before the reserve of the phases after it; `what` took it."""
    return assemble_plan(
        problem,
        placed,
        engine="heuristic",
        status="HEURISTIC_FALLBACK",
        wall_ms=wall_ms,
        message=f"the time limit of {deadline.limit_s:g} s left no time for CP-SAT "
        f"({what} took {deadline.elapsed():.1f} s)",
        deadline=deadline,
    )
