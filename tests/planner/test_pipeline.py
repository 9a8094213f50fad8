"""The planner as a declared pipeline (grid/planner/pipeline.py): the phase list is the only
place the order lives. The tests read PHASES, run make_plan under a reordered or instrumented
list, and scan the sources for a second place that sequences the phases."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner import pipeline
from grid.planner.deadline import CALIBRATION, Deadline
from grid.planner.pipeline import PHASES, Phase
from grid.planner.plan import make_plan
from grid.planner.validate import InvalidPlan, Violation, violations
from tests.planner.fleets import host, model, snapshot, want

pytestmark = pytest.mark.unit

PLANNER = Path(__file__).resolve().parents[2] / "grid" / "planner"
ORDER = [
    "build",
    "heuristic",
    "host_types",
    "vacate",
    "host_types_late",
    "solve",
    "stage",
    "explain",
    "portfolio",
    "validate",
]


def _fleet():  # type: ignore[no-untyped-def]
    return snapshot(
        [host("h1", 16384), host("h2", 16384)],
        [model("a", 6000, max_replicas=2), model("b", 9000)],
        {"a": want(2), "b": want(1)},
    )


def test_the_phase_list_names_the_issue_order_with_an_estimate_and_a_step_each() -> None:
    assert [p.name for p in PHASES] == ORDER
    assert all(callable(p.estimate) and callable(p.applies) and callable(p.step) for p in PHASES)


def test_make_plan_runs_and_clocks_the_phases_in_list_order() -> None:
    deadline = Deadline(10.0)
    plan = make_plan(_fleet(), deadline=deadline)
    ran = list(deadline.spent)
    assert ran == [name for name in ORDER if name in ran]  # a subsequence of the list
    assert {"build", "heuristic", "vacate", "solve", "stage", "explain", "validate"} <= set(ran)
    assert violations(_fleet(), plan) == []


def test_a_reordered_list_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host types after vacate on a fleet that would run them first: only the list moved."""
    by_name = {p.name: p for p in PHASES}
    early = by_name["host_types"]
    moved = [p for p in PHASES if p.name != "host_types"]
    moved.insert(moved.index(by_name["vacate"]) + 1, early)
    monkeypatch.setattr(pipeline, "PHASES", tuple(moved))
    deadline = Deadline(10.0)
    make_plan(generate_production_fleet(128, 24, 64), deadline=deadline, soft_stage_limit_s=0.05)
    ran = list(deadline.spent)
    assert ran.index("vacate") < ran.index("host_types")


def test_every_estimate_reads_the_calibration_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every calibrated figure zeroed the estimates are zero: no phase keeps a figure of
    its own (the build's and heuristic's per-pair figures, the reserve's, the setups')."""
    counts = {"early_types_max_hosts", "reserve_candidates_max", "reserve_hosts_max"}
    zero = dataclasses.replace(
        CALIBRATION,
        **{f.name: 0.0 for f in dataclasses.fields(CALIBRATION) if f.name not in counts},
    )
    seen: dict[str, float] = {}
    real = pipeline.run_phases

    def record(run: pipeline.Run, phases: tuple[Phase, ...] | None = None) -> object:
        monkeypatch.setattr("grid.planner.deadline.CALIBRATION", zero)
        run.deadline.output_s = 0.0
        plan = real(run, phases)
        seen.update({p.name: p.estimate(run) for p in PHASES if p.name != "host_types_late"})
        return plan

    monkeypatch.setattr("grid.planner.plan.run_phases", record)
    make_plan(_fleet(), time_limit_s=10.0)
    assert seen and all(value == 0.0 for value in seen.values()), seen


def test_no_other_module_sequences_the_phase_steps() -> None:
    """The steps are called from the list only: no planner module but pipeline.py names the
    steps module, and make_plan calls none of the phases' work itself."""
    for path in PLANNER.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name not in ("pipeline.py", "pipeline_steps.py"):
            assert "pipeline_steps" not in text, path
    tree = ast.parse((PLANNER / "plan.py").read_text(encoding="utf-8"))
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    for work in ("build_problem", "heuristic_placement", "stage_changes", "solve_lexicographic"):
        assert work not in called


def test_a_plan_that_breaks_a_hard_constraint_is_raised_before_it_is_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The validate phase runs validate.py on the final plan; a violation is raised."""
    broken = [Violation("memory", "h1 holds more than its memory")]
    monkeypatch.setattr("grid.planner.validate.violations", lambda *a, **k: broken)
    with pytest.raises(InvalidPlan):
        make_plan(_fleet(), time_limit_s=5.0)


# A demand rule, not the planner's budget: the cold-start lookahead's horizon (targets.py).
NOT_BUDGET = {("targets.py", "LOOKAHEAD_CAP_S")}
TIMING = ("_S", "_S_PER_KEY", "_WORK", "WORK", "_SHARE", "_BUILDS")


def test_every_calibrated_time_figure_lives_in_the_calibration_table() -> None:
    """No planner module but deadline.py binds a timing figure (seconds, work, shares of a
    budget) to a number at module level: the budget has one owner (issue 20's review counted
    46 such constants in 11 files)."""
    found = []
    for path in PLANNER.rglob("*.py"):
        if path.name == "deadline.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            value = getattr(node, "value", None)
            if not isinstance(target, ast.Name) or not isinstance(value, ast.Constant):
                continue
            name = target.id
            numeric = isinstance(value.value, (int, float))
            if numeric and name.endswith(TIMING) and (path.name, name) not in NOT_BUDGET:
                found.append(f"{path.relative_to(PLANNER)}:{node.lineno} {name}")
    assert found == []
