"""A plan builds its placement problem once (grid/planner/narrow.py, pipeline.py's build phase),
and `grid plan` ends as a normal process (no os._exit: atexit handlers run, output is whole).

Oracles: `build_problem` itself for the narrowed problem (the narrowing is a separate code
path: it filters a wider build, the reference decides every pair again), a counter on the
build, and a child process's own atexit handler."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.snapshot import load_snapshot
from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner import problem_build as problem_module
from grid.planner.narrow import narrowed, portfolio_targets
from grid.planner.plan import make_plan
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.targets import Target, compute_targets
from tests.planner.strategies import clean_fleet, fleets

REPO = Path(__file__).resolve().parents[2]
OFFICE = REPO / "models" / "fleets" / "office-workloads.json"


def _shape(problem: PlacementProblem) -> dict[str, object]:
    return {
        "targets": problem.targets,
        "candidates": list(problem.candidates.items()),
        "refusals": [(k, problem.refusals[k]) for k in problem.refusals],
        "by_model": {m.model_id: problem.candidates_of_model(m.model_id) for m in problem.models},
        "by_host": {h.host_id: problem.candidates_of_host(h.host_id) for h in problem.hosts},
        "fixed": problem.fixed,
        "shapes": problem.memo.get("build_shapes"),
        "open": {m.model_id: problem.open_replicas(m.model_id) for m in problem.models},
    }


def _wider(targets: dict[str, Target], rng: random.Random) -> dict[str, Target]:
    """Targets that desire at least what `targets` do, some models raised from zero."""
    return {m: replace(t, desired=t.desired + rng.choice((0, 0, 1, 3))) for m, t in targets.items()}


def _zeroed(targets: dict[str, Target], rng: random.Random) -> dict[str, Target]:
    return {m: replace(t, desired=0) if rng.random() < 0.4 else t for m, t in targets.items()}


def _check(snap, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    base = _zeroed(compute_targets(snap), rng)
    wide = _wider(base, rng)
    assert _shape(narrowed(build_problem(snap, wide), base)) == _shape(build_problem(snap, base))


@pytest.mark.property
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=fleets(max_hosts=6, max_models=6), seed=st.integers(0, 10**6))
def test_the_narrowed_problem_equals_a_build_with_the_base_targets(snap, seed: int) -> None:  # type: ignore[no-untyped-def]
    _check(snap, seed)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_narrowing_holds_on_build_shapes_and_clean_fleets(seed: int) -> None:
    """Fleets whose hosts share build shapes (the copied candidates and shared refusals)."""
    _check(generate_production_fleet(96, 20, seed), seed)
    _check(clean_fleet(seed), seed)


@pytest.mark.unit
def test_a_wider_problem_that_desires_less_is_refused() -> None:
    snap = load_snapshot(OFFICE, now=time.time())
    base = compute_targets(snap)
    first = next(m for m, t in base.items() if t.desired > 0)
    less = {**base, first: replace(base[first], desired=0)}
    with pytest.raises(ValueError, match=first):
        narrowed(build_problem(snap, less), base)


@pytest.mark.unit
def test_a_plan_with_workloads_builds_its_problem_once(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = load_snapshot(OFFICE, now=time.time())
    assert snap.workloads
    calls: list[int] = []
    real = problem_module._build_problem

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(problem_module, "_build_problem", counted)
    plan = make_plan(snap, time_limit_s=10.0)
    assert len(calls) == 1
    assert plan.portfolio is not None and plan.portfolio.mapping
    # The portfolio solved the problem that asks for every scored model's ceiling.
    wide = portfolio_targets(snap, compute_targets(snap))
    assert any(wide[m].desired > t.desired for m, t in compute_targets(snap).items())


CHILD = """
import atexit, gc, sys
def done():
    sys.stderr.write(f"ATEXIT frozen={gc.get_freeze_count()}\\n")
atexit.register(done)
sys.argv = ["grid", *sys.argv[1:]]
from grid.cli.main import main
main()
"""


@pytest.mark.service
@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_grid_plan_ends_as_a_normal_process_with_its_output_whole(engine: str) -> None:
    """atexit handlers run (os._exit skips them), stdout is one whole JSON document, exit 0;
    the heap was frozen for the interpreter's final collection (gcpause.freeze_for_exit)."""
    argv = [sys.executable, "-c", CHILD, "plan", str(OFFICE), "--json", "--engine", engine]
    argv += ["--time-limit", "10"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["assignments"]
    line = [s for s in done.stderr.splitlines() if s.startswith("ATEXIT")]
    assert line, done.stderr
    assert int(line[0].split("frozen=")[1]) > 0
