"""The run steps of pipeline.PHASES, one function per phase (pure but for the deadline's clock).

Each reads and writes the `Run`; the order, the estimates and whether a step applies live in
pipeline.py. Budgets come from the run (`Run.room_s`: the deadline less the later phases'
estimates) and the calibration table (deadline.CALIBRATION).
"""

from __future__ import annotations

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.planner.assemble import plan_document
from grid.planner.heuristic import heuristic_placement
from grid.planner.levels import compare, score_placement
from grid.planner.narrow import narrowed, portfolio_targets
from grid.planner.pipeline_run import Outcome, Run
from grid.planner.preemption import stage_within
from grid.planner.problem_build import build_problem
from grid.planner.targets import compute_targets

KEPT_HEURISTIC = (
    "kept the heuristic's placement: it needs fewer evictions once preemption is staged"
)


def build(run: Run) -> None:
    """The placement problem, once: with workloads the portfolio's (its targets desire more),
    and the base problem narrowed from it (narrow.py)."""
    snap = run.snapshot
    targets = run.targets if run.targets is not None else compute_targets(snap)
    if snap.workloads:
        run.wide = build_problem(snap, portfolio_targets(snap, targets))
        run.problem = narrowed(run.wide, targets)
    else:
        run.problem = build_problem(snap, targets)
    # Freed by the deadline's holder, after its output.
    run.deadline.keep.extend(p for p in (run.problem, run.wide) if p is not None)


def heuristic(run: Run) -> None:
    """The greedy placement (whole: a pass cut short leaves unmet replicas whose staging and
    explanations cost more than the pass saved); the machine's pace is read around it."""
    problem = run.built
    run.pace = run.deadline.pace()
    run.greedy = run.placed = heuristic_placement(problem)
    run.pace = run.deadline.pace()
    run.hints = [{(c.model_id, c.host_id) for c in problem.incumbent_candidates}]


def host_types(run: Run) -> None:
    """The replica levels on n[m,T] (cpsat/aggregate.py) with aggregate_share of the room (or
    aggregate_wide_share when the per-host model could not be built after it anyway), where
    that covers the model's setup and disaggregations; a proof there makes its placement the
    run's and its levels the replica levels' bounds."""
    from grid.planner.cpsat import disaggregation_s, solve_aggregated

    c, problem = budget.CALIBRATION, run.built
    left = run.room_s()
    per_host = max(c.model_build_s_per_key, run.build_s_per_key())
    wide = per_host * len(problem.candidates) > c.model_build_share * left * (1 - c.aggregate_share)
    share = (c.aggregate_wide_share if wide else c.aggregate_share) * left
    if share <= c.aggregate_setup_share * run.build_s + disaggregation_s(problem) + c.min_solve_s:
        return
    run.aggregated = solve_aggregated(problem, hint=run.greedy, time_limit_s=share)


def vacate(run: Run) -> None:
    """Vacate moves (vacate.py) within vacate_share of the room (at least vacate_min_s, never
    the solver's setup; a deterministic plan runs the whole pass). On the fallback path they
    run down to the later phases' floor instead (not in deterministic mode)."""
    from grid.planner.vacate import vacate_improve

    c, problem, deadline = budget.CALIBRATION, run.built, run.deadline
    if not run.solver_reachable():
        floor = run.floor_s()
        if run.deterministic or deadline.remaining() <= floor:
            return
        run.placed = vacate_improve(
            problem, run.greedy, out_of_time=lambda: deadline.remaining() < floor
        )
        run.fallback = "loading, building and vacate"
        return
    if run.aggregated is not None and run.aggregated.proven:
        return  # the host-type model proved every replica level: nothing for a move to raise
    room = run.room_s()
    vacate_s = min(room - c.vacate_trial_s, max(c.vacate_min_s, c.vacate_share * room))
    vacate_by = deadline.elapsed() + vacate_s
    cut: list[bool] = []

    def late() -> bool:
        over = deadline.elapsed() > vacate_by
        cut.extend([True] if over else [])
        return over

    out_of_time = None if run.deterministic else late
    run.placed = vacate_improve(problem, run.greedy, out_of_time=out_of_time)
    if cut and run.room_s() < c.vacate_min_s:
        # The pass was cut for a solve with no time to pay: the moves go on to the fallback's
        # floor; the solve runs if time is left.
        floor = run.floor_s()
        run.placed = vacate_improve(
            problem, run.placed, out_of_time=lambda: deadline.remaining() < floor
        )


def solve(run: Run) -> None:
    """The lexicographic CP-SAT solve with what the later phases leave, hinted with the
    host-type model's placement, the placement so far, the heuristic's and the incumbents."""
    from grid.planner.cpsat import solve as cpsat_solve  # its module: tests wrap the solve

    problem, deadline = run.built, run.deadline
    late = None
    if not run.solver_reachable():
        late = run.fallback or "loading and building"
    elif deadline.remaining() - run.portfolio_s - run.reserve_s() < run.setup_s():
        late = "the phases before it"
    reserve = run.floor_s() if late else run.reserve_s()
    if late is not None:
        # No time for a search; proofs by bounds alone still pay while the floor of the later
        # phases leaves the solver's setup and a short solve (not in deterministic plans).
        left = deadline.remaining() - run.portfolio_s - reserve - run.setup_s()
        if run.deterministic or left < budget.CALIBRATION.min_solve_s:
            run.outcome = _no_time_left(run, late)
            return
    aggregated, proven = run.aggregated, None
    hints = [run.placed]
    if run.greedy is not run.placed:
        hints.append(run.greedy)
    if aggregated is not None:
        hints.insert(0, aggregated.placed)
        proven = aggregated.values if aggregated.proven else None
    hints += run.hints
    result = cpsat_solve.solve_lexicographic(
        problem,
        hints=hints,
        proven_bounds=proven,
        time_limit_s=deadline.remaining() - run.portfolio_s,
        deterministic=run.deterministic,
        soft_stage_limit_s=run.soft_stage_limit_s,
        reserve_s=reserve,
        build_s_per_key=run.build_s_per_key(),
        prove_only=late is not None,
    )
    if late is not None and result.placed is not None:
        # No time for a search: the placement so far, with every level its bounds prove.
        run.placed = result.placed
        limit, elapsed = deadline.limit_s, deadline.elapsed()
        note = f"the time limit of {limit:g} s left no time for a CP-SAT search ({late} took "
        note += f"{elapsed:.1f} s): levels proven by bounds only"
        message = f"{note}; {result.message}" if result.message else note
        run.outcome = Outcome("cp-sat", result.status, message, result.bounds)
        return
    if result.placed is None:
        run.placed = run.greedy
        message = result.message or "CP-SAT found no feasible solution within the time limit"
        run.outcome = Outcome("heuristic", "HEURISTIC_FALLBACK", message)
        return
    run.placed = result.placed
    run.outcome = Outcome("cp-sat", result.status, result.message, result.bounds)
    run.solved = True


def _no_time_left(run: Run, what: str) -> Outcome:
    """The placement so far: CP-SAT would not have had the time to set up before the later
    phases' estimates; `what` took it. A placement whose replica levels the host-type model
    proved keeps those levels' bounds (cp-sat, FEASIBLE)."""
    limit, elapsed = run.deadline.limit_s, run.deadline.elapsed()
    note = f"the time limit of {limit:g} s left no time for CP-SAT ({what} took {elapsed:.1f} s)"
    aggregated = run.aggregated
    if aggregated is not None and aggregated.proven:
        from grid.planner.cpsat import static_bounds

        run.placed = aggregated.placed
        bounds = {**static_bounds(run.built), **aggregated.values}
        note += "; the replica levels are proven over host types"
        return Outcome("cp-sat", "FEASIBLE", note, bounds)
    return Outcome("heuristic", "HEURISTIC_FALLBACK", note)


def stage(run: Run) -> None:
    """Preemption staging of the placement; a solver placement that is as good before staging
    can lose replicas to a larger victim set after it, so the heuristic's staged placement is
    kept where it is better then. Staging stops once the deadline leaves only the later
    phases' floor (`Run.after_stage_s`; not in deterministic plans), and the plan says how
    many models short of replicas were not examined; the comparison then does not run."""
    problem, deadline = run.built, run.deadline
    if run.outcome is None:  # the heuristic engine
        run.outcome = Outcome("heuristic", "HEURISTIC")
    floor = run.after_stage_s()

    def late() -> bool:
        return deadline.expired(floor)

    out_of_time = None if run.deterministic else late
    preemptions, final, unexamined = stage_within(problem, run.placed, out_of_time)
    staged = (preemptions, final)
    run.values = None
    if unexamined:
        note = f"preemption staging stopped at the time limit of {deadline.limit_s:g} s: "
        note += f"{unexamined} model(s) short of replicas were not examined for evictions"
        run.outcome.message = f"{run.outcome.message} {note}".strip()
    elif run.solved and run.placed != run.greedy and not (out_of_time and late()):
        greedy_preemptions, greedy_final, cut = stage_within(problem, run.greedy, out_of_time)
        greedy_staged = (greedy_preemptions, greedy_final)
        run.values = score_placement(problem, staged[1])
        greedy_values = score_placement(problem, greedy_staged[1])
        # A comparison cut short is not one: the solver's staged placement stays.
        if not cut and compare(problem, greedy_values, run.values) > 0:
            run.placed, staged, run.values = run.greedy, greedy_staged, greedy_values
            kept = KEPT_HEURISTIC
            run.outcome.message = f"{run.outcome.message} {kept}".strip()
    run.staged = staged


def explain(run: Run) -> None:
    outcome = run.outcome
    assert outcome is not None and run.staged is not None
    run.plan = plan_document(
        run.built,
        run.staged,
        engine=outcome.engine,
        status=outcome.status,
        wall_ms=run.wall_ms(),
        bounds=outcome.bounds,
        message=outcome.message,
        deadline=run.deadline,
        values=run.values,
        explain_floor_s=run.portfolio_s + run.output_s,
    )


def portfolio(run: Run) -> None:
    """Workload portfolio (portfolio/attach.py): fixed on top of the base plan, absent without
    workloads; its CP-SAT gets what the deadline leaves after validation and output."""
    from grid.planner.assemble import assignments_of
    from grid.planner.portfolio import attach_portfolio

    assert run.plan is not None
    run.plan = attach_portfolio(
        run.snapshot,
        run.plan,
        engine=run.plan.solver.engine,
        assignments_of=assignments_of,
        deadline=run.deadline,
        targets=run.built.targets,
        problem=run.wide,
    )


def validate(run: Run) -> None:
    """validate.py on the final plan, before anyone prints or acts on it: a violation is a
    planner bug, raised (InvalidPlan), never returned."""
    from grid.planner.validate import InvalidPlan, violations

    assert run.plan is not None
    found = violations(run.snapshot, run.plan, run.built.targets)
    if found:
        raise InvalidPlan(found)
