"""`grid capacity`: the fewest hosts per template that place every desired replica.

The count model (CP-SAT). The snapshot is augmented with b copies of every template (copy k of
template t is host `<t>-k`, empty, seen now) and the planner's own placement problem is built
on it (`build_problem`: eligibility, footprints, budgets), with the planner's own hard
constraints (`add_hard_constraints`: both memory ledgers, slots, colocation, disk, replica
bounds and pins). On top of them:

    use[t,k] ∈ {0,1}          copy k of template t is added;  use[t,k+1] ⇒ use[t,k]
    x[m,h] ⇒ use[t,k]         nothing is placed on a copy that is not added
    Σ_h x[m,h] ≥ need(m)      every desired replica: need(m) = desired(m) − unmanaged replicas
    minimize  W·Σ use[t,k] + Σ alloc(t)·use[t,k]     W = Σ b·alloc(t) + 1 (hosts, then memory)

so count(t) = Σ_k use[t,k]. b starts at the replicas the current plan leaves unmet (capped by
--max and by the replicas to place, since every added host holds one): a bounded optimum with
total T ≤ b is the global one (any better answer has every count < T ≤ b); otherwise b grows.

Verification. The answer is planned with the real planner; if that plan still leaves a replica
unmet, the count vector and every vector below it are cut off and the model is solved again
(at most MAX_ROUNDS times); the answer says so in `binding` (constraint `verification`).

INFEASIBLE (capacity_explain.py): when no counts within --max help, each model is solved alone
to find the replicas no template can lift (a tag, a runtime, a tier, a pin, …); those are named,
and the answer gives the counts that place every replica that can be placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from grid.fleet import FleetSnapshot, GridError, Host, Plan
from grid.lab.capacity_explain import blocked_models, joint_core, plan_bindings
from grid.lab.capacity_templates import DEFAULT_MAX, check_demand, check_max
from grid.lab.whatif import augment, placed_by_model, plan
from grid.planner import PlacementProblem, allocatable_mb, build_problem
from grid.planner.cpsat import PlacementVars, add_hard_constraints

MAX_ROUNDS = 6
SEED = 20261201


@dataclass
class CapacityAnswer:
    added: dict[str, int]
    placed_before: int
    placed_after: int
    desired: int
    status: str
    binding: list[dict[str, object]] = field(default_factory=list)
    rounds: int = 1  # answers verified by planning (0: nothing to verify)
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """The contract's document (DESIGN.md, What-if capacity contract)."""
        return {
            "schema_version": 1,
            "added": dict(self.added),
            "placed_before": self.placed_before,
            "placed_after": self.placed_after,
            "desired": self.desired,
            "status": self.status,
            "binding": list(self.binding),
        }


@dataclass(frozen=True)
class CountResult:
    status: str  # OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN
    counts: dict[str, int] | None


def _binding(constraint: str, detail: str, **extra: object) -> dict[str, object]:
    return {"constraint": constraint, **extra, "detail": detail}


def solve_counts(
    snap: FleetSnapshot,
    templates: list[Host],
    bound: int,
    need: dict[str, int],
    cuts: list[dict[str, int]],
    time_limit_s: float,
) -> CountResult:
    """One solve of the count model with `bound` copies per template."""
    fleet, groups = augment(snap, {t.host_id: bound for t in templates}, templates)
    problem = build_problem(fleet)
    model = cp_model.CpModel()
    xs = PlacementVars(model, problem)
    add_hard_constraints(model, xs, problem)
    use: dict[str, list[cp_model.IntVar]] = {}
    for template in templates:
        lits = [model.new_bool_var(f"use[{hid}]") for hid in groups[template.host_id]]
        for later, earlier in zip(lits[1:], lits, strict=False):
            model.add_implication(later, earlier)
        for lit, host_id in zip(lits, groups[template.host_id], strict=True):
            for key in xs.keys_on_host(host_id):
                model.add_implication(xs.x[key], lit)
        use[template.host_id] = lits
    for model_id, wanted in need.items():
        if wanted > 0:
            model.add(xs.total(xs.keys_of_model(model_id)) >= wanted)
    for cut in cuts:  # some template gets more copies than in a vector the planner refused
        grow = [use[t][n] for t, n in cut.items() if n < len(use[t])]
        model.add_bool_or(grow if grow else [model.new_constant(0)])
    alloc = {t.host_id: allocatable_mb(t) for t in templates}
    weight = sum(bound * a for a in alloc.values()) + 1
    model.minimize(sum(weight * lit + alloc[t] * lit for t, lits in use.items() for lit in lits))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    code = solver.solve(model)
    status = solver.status_name(code)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return CountResult(status, None)
    counts = {t: sum(int(solver.value(lit)) for lit in lits) for t, lits in use.items()}
    return CountResult(status, counts)


def _search(
    snap: FleetSnapshot,
    templates: list[Host],
    max_per_template: int,
    need: dict[str, int],
    cuts: list[dict[str, int]],
    first_bound: int,
    time_limit_s: float,
) -> CountResult:
    """The count model's optimum over counts ≤ max, growing b only when the bound could bind."""
    ceiling = max(1, min(max_per_template, sum(need.values())))
    bound = max(1, min(first_bound, ceiling))
    while True:
        result = solve_counts(snap, templates, bound, need, cuts, time_limit_s)
        if result.counts is None:
            if result.status == "INFEASIBLE" and bound < ceiling:
                bound = ceiling
                continue
            return result
        total = sum(result.counts.values())
        if total <= bound or bound >= ceiling:
            return result
        bound = min(ceiling, total)


def _open_need(problem: PlacementProblem) -> dict[str, int]:
    return {m.model_id: problem.open_replicas(m.model_id) for m in problem.models}


def capacity(
    snap: FleetSnapshot,
    templates: list[Host],
    *,
    max_per_template: int = DEFAULT_MAX,
    time_limit_s: float = 5.0,
    before: Plan | None = None,
) -> CapacityAnswer:
    """How many hosts of each template to add so that every desired replica is placed."""
    check_max(max_per_template)
    if not templates:
        raise GridError(
            "no_template",
            "grid capacity needs at least one host template to add",
            fix="pass --add TEMPLATE.json (a GPU server ships in models/templates/)",
            next_command="grid capacity SNAPSHOT --add models/templates/gpu-server.json",
        )
    base = before if before is not None else plan(snap, time_limit_s=time_limit_s)
    check_demand(snap, base)
    desired = sum(base.desired_replicas.values())
    placed_before = sum(placed_by_model(base).values())
    zero = {t.host_id: 0 for t in templates}
    if placed_before >= desired:
        return CapacityAnswer(zero, placed_before, placed_before, desired, "OPTIMAL", rounds=0)
    need = _open_need(build_problem(snap))
    first_bound = desired - placed_before
    binding: list[dict[str, object]] = []
    result = _search(snap, templates, max_per_template, need, [], first_bound, time_limit_s)
    infeasible = False
    if result.counts is None:
        infeasible = True
        blocked, reduced = blocked_models(snap, templates, max_per_template, need)
        binding += blocked
        need = reduced
        result = _search(snap, templates, max_per_template, need, [], first_bound, time_limit_s)
        if result.counts is None:
            ceiling = max(1, min(max_per_template, sum(need.values())))
            binding += joint_core(snap, templates, ceiling, need)
            if ceiling < sum(need.values()):
                binding.append(
                    _binding(
                        "max_hosts",
                        f"{max_per_template} host(s) of each template cannot place the "
                        f"remaining replicas together (solver status {result.status}); "
                        "raise --max or add a larger template",
                        value=max_per_template,
                    )
                )
            return CapacityAnswer(
                zero, placed_before, placed_before, desired, "INFEASIBLE", binding, rounds=0
            )
    verified = _verify(snap, templates, max_per_template, need, first_bound, time_limit_s, result)
    binding += verified.notes
    if infeasible or not verified.ok:
        status = "INFEASIBLE"
    else:
        status = verified.status
        binding += plan_bindings(base)
    return CapacityAnswer(
        verified.counts,
        placed_before,
        verified.placed_after,
        desired,
        status,
        binding,
        verified.rounds,
    )


@dataclass
class _Verified:
    counts: dict[str, int]
    placed_after: int
    rounds: int
    ok: bool
    status: str
    notes: list[dict[str, object]]


def _verify(
    snap: FleetSnapshot,
    templates: list[Host],
    max_per_template: int,
    need: dict[str, int],
    first_bound: int,
    time_limit_s: float,
    result: CountResult,
) -> _Verified:
    """Plan the answer's fleet; while it falls short, cut the counts off and solve again."""
    fixed = build_problem(snap)
    target = sum(min(fixed.targets[m].desired, fixed.fixed_count(m) + n) for m, n in need.items())
    cuts: list[dict[str, int]] = []
    notes: list[dict[str, object]] = []
    rounds = 0
    while True:
        rounds += 1
        assert result.counts is not None
        counts = {t.host_id: result.counts.get(t.host_id, 0) for t in templates}
        fleet, _groups = augment(snap, counts, templates)
        placed_after = sum(placed_by_model(plan(fleet, time_limit_s=time_limit_s)).values())
        if placed_after >= target:
            return _Verified(counts, placed_after, rounds, True, result.status, notes)
        notes.append(
            _binding(
                "verification",
                f"planning the fleet with {_counts_text(counts)} left "
                f"{target - placed_after} replica(s) unmet; solving again with more hosts",
            )
        )
        cuts.append(counts)
        retry = _search(snap, templates, max_per_template, need, cuts, first_bound, time_limit_s)
        if retry.counts is None or rounds >= MAX_ROUNDS:
            notes.append(
                _binding(
                    "verification",
                    f"after {rounds} verified attempt(s) no fleet within --max placed every "
                    "replica the count model placed",
                )
            )
            return _Verified(counts, placed_after, rounds, False, "INFEASIBLE", notes)
        result = retry


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} × {t}" for t, n in counts.items())
