"""The replica levels solved over host types (types.py): n[m,T] replicas of m on type T.

Variables
    x[m,h] ∈ {0,1}   candidates on individual hosts (types of count 1), with every hard
                     constraint family of build.py but the replica bounds (memory, slots,
                     colocation, disk: the per-host model, exact)
    n[m,T] ∈ 0..min(|T|, open(m))   replicas of m on the hosts of an aggregated type T
Per-type ledgers (cpsat/type_ledgers.py; T has |T| identical hosts, budget B, new budget B',
slot cap s, disk D):
    Σ_m mem(m)·n[m,T] ≤ |T|·B,   Σ_m new_mb(m)·n[m,T] ≤ |T|·B',   Σ_m n[m,T] ≤ |T|·s,
    Σ_m disk(m)·n[m,T] ≤ |T|·D,   n[a,T] + n[b,T] ≤ |T| for every excluded pair,
    Σ_{m: size(m)·k > L} n[m,T] ≤ (k−1)·|T| for k = 2..s and both ledgers L ∈ {B, B'}
    (a host holds at most k−1 items each larger than L/k: valid cuts of the packing),
    colocation ceilings are not aggregated (the disaggregation enforces them).
Replica bounds over both kinds: Σ_h x[m,h] + Σ_T n[m,T] ≤ open(m), and the pins'
reservation on the unpinned candidates (replicas.py), so the levels' expressions are those of
objective.py with count_m = fixed(m) + Σ x + Σ n.

A candidate that does not fit an empty host of its type alone (memory, new memory or disk:
memory is not a static filter in problem.py) gets n[m,T] = 0.
Exactness. n[m,T] ≤ |T| is exact (one replica of m per host). With a slot cap of 1 every
per-type ledger is exact too (each candidate fits a host alone). Otherwise the per-type sums
are a relaxation of the per-host packing (bin packing): a solution's counts may not pack. The
relaxation's lexicographic optimum is an upper bound of the per-host model's, level by level
(every per-host placement maps to a feasible n with equal replica levels), so
`solve_aggregated` disaggregates (types.disaggregate, first-fit decreasing) and checks: when
the disaggregated placement reaches the aggregate's value at every replica level and every
stage was OPTIMAL, those values are the per-host optimum (proven); else it is only a hint.
Symmetry: hosts of one type are not variables of the model at all, so there is no symmetry
within a type to break; the disaggregation's host order (by ID) is the canonical choice.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.planner.cpsat.allowance import pinned_hosts, unpinned_allowance
from grid.planner.cpsat.arcflow import (
    TypeFlow,
    add_type_flow,
    build_graph,
    deal,
    decompose,
    item_classes,
    pack_type,
)
from grid.planner.cpsat.bounds import static_bounds
from grid.planner.cpsat.colocation import add_colocation
from grid.planner.cpsat.disk import add_disk
from grid.planner.cpsat.gpus import add_gpus
from grid.planner.cpsat.memory import add_memory
from grid.planner.cpsat.objective import _sum, _weighted
from grid.planner.cpsat.scoring import Scorer
from grid.planner.cpsat.slots import add_slots
from grid.planner.cpsat.stages import Stage, fold_stages, stages_of

# _threshold_cuts is imported from here by tests/planner/test_aggregate_cuts.py.
from grid.planner.cpsat.type_ledgers import (
    TypeRoom,
    _threshold_cuts,  # noqa: F401
    add_type_ledgers,
    fits_alone,
)
from grid.planner.cpsat.variables import Key, PlacementVars
from grid.planner.levels import (
    baseline_members,
    baseline_rounds,
    compare,
    direct_rounds,
    inferred_members,
    round_members,
)
from grid.planner.problem import Candidate, PlacementProblem
from grid.planner.types import HostType, disaggregate, host_types, type_counts
from grid.planner.vacate import vacate_improve

SEED = 20240611
RELAXED = 2**62  # a window's relaxed constraint: expr >= -RELAXED always holds
BALANCE_SCALE = 10**6  # `_balance`: integer weights of the relative memory load
Expr = cp_model.LinearExpr
# A solution of the host-type model: n[m,T] by (model, type_id), the individual hosts'
# placements, and the per-host contents (class paths) of the exact types' flows.
Solution = tuple[dict[Key, int], set[Key], dict[str, list[list[int]]]]


@dataclass
class AggregateResult:
    placed: set[Key]
    values: dict[str, int]  # the aggregate's optimum (or best) per replica level
    proven: bool  # the disaggregated placement reaches them and every stage was OPTIMAL
    statuses: list[str] = field(default_factory=list)
    variables: int = 0
    aggregated_hosts: int = 0
    types: int = 0
    counts: dict[Key, int] = field(default_factory=dict)  # the aggregate's n[m,T] (model, type)
    # Types whose counts were proven not to pack (arcflow.pack_type): the sums were loose there.
    unpacked: set[str] = field(default_factory=set)
    exact: bool = False  # types with a configuration graph were exact (arcflow.py)


def aggregation_pays(problem: PlacementProblem) -> bool:
    """At least half of the candidates sit on hosts of types with more than one host."""
    types = host_types(problem)
    grouped = sum(t.count * len(t.models) for t in types if t.count > 1)
    return grouped * 2 >= max(1, len(problem.candidates))


class _AggregateModel:
    def __init__(
        self,
        problem: PlacementProblem,
        types: Sequence[HostType],
        exact: Iterable[str] = (),
    ) -> None:
        self.problem = problem
        self.exact = set(exact)
        self.flows: dict[str, TypeFlow] = {}  # type_id -> its arc-flow (exact types)
        self.model = cp_model.CpModel()
        self.grouped = [t for t in types if t.count > 1]
        singles = [t.host_ids[0] for t in types if t.count == 1]
        keys = [c[:2] for h in singles for c in problem.candidates_of_host(h)]
        self.xs = PlacementVars(self.model, problem, keys=keys)
        add_memory(self.model, self.xs, problem)
        add_slots(self.model, self.xs, problem)
        add_colocation(self.model, self.xs, problem)
        add_disk(self.model, self.xs, problem)
        add_gpus(self.model, self.xs, problem)
        self.n: dict[tuple[str, str], cp_model.IntVar] = {}
        self.top: dict[int, int] = {}  # upper bound of each n variable, by index
        for htype in self.grouped:
            self._add_type(htype)
        self._replicas()
        self._steps: dict[str, list[cp_model.IntVar]] = {}

    def _add_type(self, htype: HostType) -> None:
        problem, first, count = self.problem, htype.host_ids[0], htype.count
        budget = problem.host_by_id[first]
        cands = [problem.candidates[(m, first)] for m in htype.models]
        room = TypeRoom.of(budget)
        ns = []
        for cand in cands:
            top = min(count, problem.open_replicas(cand.model_id)) if fits_alone(cand, room) else 0
            var = self.model.new_int_var(0, top, "")
            self.top[var.index] = top
            self.n[(cand.model_id, htype.type_id)] = var
            ns.append(var)
        add_type_ledgers(self.model, ns, cands, room, count, problem.excluded_pairs, most_cut=True)
        if htype.type_id in self.exact:
            self._add_flow(htype, cands, ns)

    def _add_flow(
        self, htype: HostType, cands: Sequence[Candidate], ns: Sequence[cp_model.IntVar]
    ) -> None:
        """The type's configuration graph linked to its n[m,T] (arcflow.py): exact packing."""
        tops = {c.model_id: self.top[v.index] for c, v in zip(cands, ns, strict=True)}
        live = [m for m, top in tops.items() if top > 0]
        classes = item_classes(self.problem, htype, live, {m: tops[m] > 1 for m in live})
        graph = build_graph(self.problem, htype, classes)
        if graph is None:
            return
        var_of = {c.model_id: v for c, v in zip(cands, ns, strict=True)}
        most = [sum(tops[m] for m in cls.models) for cls in classes]
        flow = add_type_flow(self.model, graph, htype.count, most)
        for cls, arcs in zip(classes, flow.by_class, strict=True):
            self.model.add(Expr.sum(arcs) == Expr.sum([var_of[m] for m in cls.models]))
        self.flows[htype.type_id] = flow

    def count_terms(self, model_id: str, *, unpinned: bool = False) -> list[cp_model.IntVar]:
        pins = pinned_hosts(self.problem, model_id) if unpinned else frozenset()
        out = [self.xs.x[k] for k in self.xs.keys_of_model(model_id) if k[1] not in pins]
        for htype in self.grouped:
            var = self.n.get((model_id, htype.type_id))
            if var is not None and not (unpinned and set(htype.host_ids) & pins):
                out.append(var)
        return out

    def _replicas(self) -> None:
        problem = self.problem
        for m in problem.models:
            terms = self.count_terms(m.model_id)
            if terms:
                self.model.add(Expr.sum(terms) <= problem.open_replicas(m.model_id))
            if m.pinned_hosts:
                off = self.count_terms(m.model_id, unpinned=True)
                if off:
                    self.model.add(Expr.sum(off) <= unpinned_allowance(problem, m.model_id))

    def at_least(self, model_id: str, k: int) -> cp_model.IntVar | int:
        base = self.problem.fixed_count(model_id)
        if k <= base:
            return 1
        steps = self._steps.get(model_id)
        if steps is None:
            terms = self.count_terms(model_id)
            reach = sum(self.top.get(t.index, 1) for t in terms)
            size = min(reach, self.problem.open_replicas(model_id))
            steps = [self.model.new_bool_var("") for _ in range(size)]
            for earlier, later in itertools.pairwise(steps):
                self.model.add_implication(later, earlier)
            self.model.add(Expr.sum(terms) == Expr.sum(steps))
            self._steps[model_id] = steps
        index = k - base - 1
        return steps[index] if index < len(steps) else 0

    def expressions(self) -> dict[str, Expr]:
        problem, harm = self.problem, self.problem.harm_rank
        pinned = [self.xs.x[k] for k in self.xs.x if problem.candidates[k].pinned]
        for (model_id, tid), var in self.n.items():
            if problem.candidates[(model_id, tid)].pinned:
                pinned.append(var)
        fixed_pinned = sum(
            1 for f in problem.fixed if f.host_id in problem.model_by_id[f.model_id].pinned_hosts
        )
        out: dict[str, Expr] = {"pinned": Expr.sum(pinned) + fixed_pinned}
        for p in problem.priorities:
            for k in baseline_rounds(problem, p):
                out[f"p{p}:baseline:{k}"] = _sum(
                    self.at_least(m, k) for m in baseline_members(problem, p, k)
                )
            for k in direct_rounds(problem, p):
                ids = round_members(problem, p, k)
                out[f"p{p}:direct:{k}"] = _sum(self.at_least(m, k) for m in ids)
                out[f"p{p}:direct:{k}:harm"] = _weighted(
                    [(self.at_least(m, k), harm[m]) for m in ids]
                )
            inferred = inferred_members(problem, p)
            if inferred:
                out[f"p{p}:inferred"] = _sum(
                    self.at_least(m, k)
                    for m in inferred
                    for k in range(problem.targets[m].baseline + 1, problem.targets[m].desired + 1)
                )
        return out

    def hint(self, counts: dict[Key, int], singles: set[Key]) -> None:
        """Hint n, x and the replica steps: a complete hint, so even a stage too large to
        solve in its slice starts from a feasible solution (10,000 production hosts: the first
        stage ended UNKNOWN after 3.4 s with n and x alone)."""
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        placed: dict[str, int] = {}
        indices: list[int] = []
        values: list[int] = []
        for key, var in self.xs.x.items():
            indices.append(var.index)
            values.append(int(key in singles))
            if key in singles:
                placed[key[0]] = placed.get(key[0], 0) + 1
        for key, var in self.n.items():
            value = counts.get(key, 0)
            indices.append(var.index)
            values.append(value)
            placed[key[0]] = placed.get(key[0], 0) + value
        for model_id, steps in self._steps.items():
            for index, step in enumerate(steps):  # steps[i]: count ≥ fixed + i + 1
                indices.append(step.index)
                values.append(int(placed.get(model_id, 0) > index))
        # One bulk extend instead of an add_hint call per variable (107,000 calls, 0.47 s,
        # over the 34 solved stages of the 1,000-host production fleet).
        self.model.proto.solution_hint.vars.extend(indices)
        self.model.proto.solution_hint.values.extend(values)


def disaggregation_s(problem: PlacementProblem) -> float:
    """The three disaggregations' time after the last stage: disaggregate_s_per_replica per
    open replica (the stages leave that much of the budget)."""
    return budget.CALIBRATION.disaggregate_s_per_replica * sum(
        problem.open_replicas(m.model_id) for m in problem.models
    )


def solve_aggregated(
    problem: PlacementProblem, *, hint: set[Key], time_limit_s: float, exact: bool = False
) -> AggregateResult:
    """Lexicographic replica levels over host types, then disaggregation and its check.

    First with windows (`_Attempt`: a run of stages proven at once where one solution meets
    all their static bounds); when a type's counts are proven not to pack (arcflow.pack_type),
    once more with that type's configuration graph (exact there); when the counts still do not
    disaggregate to a proof and time is left, once more stage by stage on a fresh model (the
    solve before windows existed). `exact`: every aggregated type with a configuration graph
    of at most arcflow.MAX_ARCS arcs is exact from the first pass."""
    end = time.perf_counter() + max(0.0, time_limit_s)
    deadline = end - disaggregation_s(problem)
    types = host_types(problem)
    scorer = Scorer(problem)
    static = static_bounds(problem, scorer.quality)
    started = time.perf_counter()
    grouped = [t.type_id for t in types if t.count > 1]
    first = _Attempt(problem, types, scorer, static, exact=grouped if exact else ())
    build_s = time.perf_counter() - started
    result = first.run(hint, deadline, end, windows=True)
    if not result.proven and result.unpacked and deadline - time.perf_counter() > build_s:
        # The sums were loose on some type (its counts do not pack): its configuration graph
        # makes the model exact there, and the levels it proves are the per-host optimum.
        tight = _Attempt(problem, types, scorer, static, exact=result.unpacked)
        result = _better(problem, scorer, result, tight.run(hint, deadline, end, windows=True))
    # The second pass builds its model again: only while that leaves it time to solve.
    if (
        not result.proven
        and deadline - time.perf_counter() > budget.CALIBRATION.fallback_builds * build_s
    ):
        again = _Attempt(problem, types, scorer, static).run(hint, deadline, end, windows=False)
        result = _better(problem, scorer, result, again)
    return result


def _better(
    problem: PlacementProblem, scorer: Scorer, result: AggregateResult, again: AggregateResult
) -> AggregateResult:
    gain = compare(problem, scorer.score(again.placed), scorer.score(result.placed))
    if again.proven or gain > 0:
        return again
    return result


@dataclass
class _Climb:
    """Where the lexicographic climb over the stages stands."""

    solution: Solution
    known: dict[str, int]  # every replica level at the last solution
    window: int  # how many stages the next window tries at once (0: one stage at a time)
    index: int = 0  # the next stage
    solved: bool = False
    statuses: list[str] = field(default_factory=list)
    best: dict[str, int] = field(default_factory=dict)


class _Attempt:
    """One lexicographic pass over the replica stages of one fresh host-type model."""

    def __init__(
        self,
        problem: PlacementProblem,
        types: list[HostType],
        scorer: Scorer,
        static: dict[str, int],
        exact: Iterable[str] = (),
    ) -> None:
        self.problem, self.types, self.scorer, self.static = problem, types, scorer, static
        self.built = _AggregateModel(problem, types, exact)
        self.unpacked: set[str] = set()
        self.exprs = self.built.expressions()
        self.stages = [s for s in fold_stages(stages_of(problem), static) if _replica(s)]

    def run(
        self, hint: set[Key], deadline: float, end: float | None = None, *, windows: bool
    ) -> AggregateResult:
        """`deadline`: for the stages; `end` (default: `deadline`): for the disaggregation's
        exact packings and vacate moves too."""
        end = deadline if end is None else end
        values = self.scorer.score(hint)
        grouped = [t for t in self.types if t.count > 1]
        singles_hint = {k for k in hint if k in self.built.xs.x}
        climb = _Climb(
            solution=(type_counts(grouped, hint), singles_hint, {}),
            known=dict(values),  # every replica level at the last solution (first: the hint's)
            window=len(self.stages) if windows else 0,
        )
        stages = self.stages
        while climb.index < len(stages):
            stage = stages[climb.index]
            remaining = deadline - time.perf_counter()
            if remaining <= 0.001:
                climb.statuses.append("SKIPPED")
                break
            if stage.signed(climb.known) >= stage.signed(self.static):
                climb.statuses.append("OPTIMAL")  # the last solution already meets the bound
                self.built.model.add(stage.expression(self.exprs) >= stage.signed(climb.known))
                climb.best.update({lv.name: climb.known[lv.name] for lv in stage.levels})
                climb.index += 1
                continue
            share = remaining / (len(stages) - climb.index)
            self.built.hint(*climb.solution[:2])
            if climb.window > 0:  # the static bounds of the next `window` stages at once?
                self._window_step(climb, remaining, share)
            elif not self._stage_step(climb, stage, remaining, share, windows=windows):
                break
        placed = set(hint)
        if climb.solved:  # disaggregated once, at the end; never worse than the hint
            placed, values = self._disaggregate(climb.solution, placed, values, climb.best, end)
        statuses, best = climb.statuses, climb.best
        proven = (
            len(statuses) == len(stages)
            and all(s == "OPTIMAL" for s in statuses)
            and all(values[name] == v for name, v in best.items())
        )
        return AggregateResult(
            placed=placed,
            values=best,
            proven=proven,
            statuses=statuses,
            variables=len(self.built.model.proto.variables),
            aggregated_hosts=sum(t.count for t in self.types if t.count > 1),
            types=len(self.types),
            counts=climb.solution[0],
            unpacked=set(self.unpacked),
            exact=bool(self.built.flows),
        )

    def _window_step(self, climb: _Climb, remaining: float, share: float) -> None:
        """Try the next `window` stages at their static bounds in one solution: all proven
        without a solve each (the window doubles), or a shorter window (infeasible), or none
        (out of time)."""
        group = self.stages[climb.index : climb.index + climb.window]
        limit = min(budget.CALIBRATION.window_share * remaining, max(0.01, share * len(group)))
        targets = [(s.expression(self.exprs), s.signed(self.static)) for s in group]
        reached, status = _reach_bounds(self.built, targets, limit)
        if reached is None:
            climb.window = climb.window // 2 if status == cp_model.INFEASIBLE else 0
            return
        climb.statuses.extend("OPTIMAL" for _ in group)
        for member in group:
            climb.best.update({lv.name: self.static[lv.name] for lv in member.levels})
        climb.known, climb.solution = _values(reached, self.exprs), _solution(reached, self.built)
        climb.solved = True
        climb.index += len(group)
        climb.window *= 2

    def _stage_step(
        self, climb: _Climb, stage: Stage, remaining: float, share: float, *, windows: bool
    ) -> bool:
        """Maximise one stage and fix it at what was reached; False: no solution in time."""
        self.built.model.maximize(stage.expression(self.exprs))
        solver = _solver(max(0.01, share, min(remaining, budget.CALIBRATION.first_stage_s)))
        status = solver.solve(self.built.model)
        climb.statuses.append(solver.status_name(status))
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False
        achieved = round(solver.objective_value)
        self.built.model.add(stage.expression(self.exprs) >= achieved)
        climb.known = _values(solver, self.exprs)
        climb.best.update({lv.name: climb.known[lv.name] for lv in stage.levels})
        climb.solution, climb.solved = _solution(solver, self.built), True
        climb.index, climb.window = climb.index + 1, 1 if windows else 0
        return True

    def _disaggregate(
        self,
        solution: Solution,
        placed: set[Key],
        values: dict[str, int],
        best: dict[str, int],
        end: float,
    ) -> tuple[set[Key], dict[str, int]]:
        problem, scorer = self.problem, self.scorer
        counts, singles, _paths = solution

        def reached() -> bool:
            return all(values[name] == v for name, v in best.items())

        def consider(current: set[Key], ties: bool = False) -> None:
            nonlocal placed, values
            current_values = scorer.score(current)
            gain = compare(problem, current_values, values)
            if gain > 0 or (ties and gain == 0):
                placed, values = current, current_values

        for packing in ("first_fit", "spread", "slots"):
            current = disaggregate(problem, self.types, counts, singles, packing=packing)
            consider(current, ties=packing == "first_fit")
        if not reached():
            # The packings missed the counts on some type: pack them exactly (arcflow.py).
            consider(self._pack_exactly(solution, placed, end))
        if not reached():
            # A packing lost replicas the counts promise: vacate moves (a host freed for a
            # missing replica, the evicted ones re-placed) often win them back.
            consider(vacate_improve(problem, placed, out_of_time=lambda: time.perf_counter() > end))
        return placed, values

    def _pack_exactly(self, solution: Solution, placed: set[Key], end: float) -> set[Key]:
        """The solution's individual placements, and per aggregated type: the heuristic
        packing where it reached the type's counts, the flow's paths on an exact type, else
        arcflow.pack_type (types proven not to pack are noted in `unpacked`)."""
        counts, singles, paths = solution
        grouped = [t for t in self.types if t.count > 1]
        reached = type_counts(grouped, placed)
        out = set(singles)
        todo: list[HostType] = []
        for htype in grouped:
            wanted = {m: counts.get((m, htype.type_id), 0) for m in htype.models}
            on_type = set(htype.host_ids)
            mine = {k for k in placed if k[1] in on_type}
            if all(reached.get((m, htype.type_id), 0) == n for m, n in wanted.items()):
                out |= mine
            elif htype.type_id in paths:
                graph = self.built.flows[htype.type_id].graph
                out |= deal(htype, graph, paths[htype.type_id], wanted) or mine
            else:
                todo.append(htype)
        for index, htype in enumerate(todo):
            wanted = {m: counts.get((m, htype.type_id), 0) for m in htype.models}
            on_type = set(htype.host_ids)
            mine = {k for k in placed if k[1] in on_type}
            left = (end - time.perf_counter()) / (len(todo) - index)
            if left <= 0.01:
                out |= mine
                continue
            packed = pack_type(self.problem, htype, wanted, time_limit_s=left, hint=mine)
            if packed.infeasible:
                self.unpacked.add(htype.type_id)
            out |= packed.placed if len(packed.placed) > len(mine) else mine
        return out


def _solver(limit_s: float) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = limit_s
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    # Presolve repeats for every stage of a growing model: without it the 1,000-host
    # production fleet's 34 solved stages take 1.6 s instead of 4.7 s, all OPTIMAL.
    solver.parameters.cp_model_presolve = False
    return solver


def _reach_bounds(
    built: _AggregateModel, targets: list[tuple[Expr, int]], limit_s: float
) -> tuple[cp_model.CpSolver | None, cp_model.CpSolverStatus]:
    """A solution with every stage of a window at its static bound (or None), and the status.

    The bounds are upper bounds, so such a solution proves the whole window at once (1,000
    production hosts: every one of the 41 stages solved one by one ended at its static bound).
    The window's constraints stay when it is reached (they are the stages' fixed levels);
    otherwise they are relaxed to always-true in place (a CpModel cannot drop a constraint).
    Among such solutions the one loading the types' memory least relative to their capacity
    (`_balance`): counts near a type's memory sum often do not pack onto its hosts (1,000
    production hosts: any solution at the bounds left 3 replicas unpacked on a 3-slot type
    filled to 95 %; the balanced one packs)."""
    added = [built.model.add(expr >= bound).index for expr, bound in targets]
    _balance(built)
    solver = _solver(limit_s)
    status = solver.solve(built.model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver, status
    for index in added:
        built.model.proto.constraints[index].linear.domain[0] = -RELAXED
    return None, status


def _balance(built: _AggregateModel) -> None:
    """Objective: minimize Σ_T Σ_m n[m,T]·mem(m) / (|T|·budget(T)), scaled to integers."""
    problem = built.problem
    terms: list[cp_model.IntVar] = []
    coefs: list[int] = []
    for htype in built.grouped:
        capacity = max(1, htype.count * problem.host_by_id[htype.host_ids[0]].footprint_budget_mb)
        for model_id in htype.models:
            terms.append(built.n[(model_id, htype.type_id)])
            mem = problem.candidates[(model_id, htype.type_id)].memory_mb
            coefs.append(round(BALANCE_SCALE * mem / capacity))
    built.model.minimize(Expr.weighted_sum(terms, coefs))


def _values(solver: cp_model.CpSolver, exprs: dict[str, Expr]) -> dict[str, int]:
    return {name: round(solver.value(expr)) for name, expr in exprs.items()}


def _solution(solver: cp_model.CpSolver, built: _AggregateModel) -> Solution:
    counts = {key: solver.value(var) for key, var in built.n.items()}
    paths = {
        tid: decompose(flow.graph, [solver.value(v) for v in flow.flows])
        for tid, flow in built.flows.items()
    }
    return counts, {k for k, var in built.xs.x.items() if solver.boolean_value(var)}, paths


def _replica(stage: Stage) -> bool:
    return all(lv.replica_level for lv in stage.levels)
