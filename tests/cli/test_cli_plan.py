"""`grid plan`: the JSON document and the Rich view, on the shipped office fleet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.models import Plan
from grid.fleet.snapshot import load_snapshot

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OFFICE = REPO / "models" / "fleets" / "office.json"
TINY = REPO / "models" / "fleets" / "tiny.toml"

runner = CliRunner()
WIDE = {"COLUMNS": "160", "GRID_DEBUG": "1"}


def _plan_json(path: Path, *extra: str) -> Plan:
    result = runner.invoke(app, ["plan", str(path), "--json", *extra], env=WIDE)
    assert result.exit_code == 0, result.output
    # json.loads refuses trailing text, so this proves stdout is exactly one document.
    doc = json.loads(result.stdout)
    return Plan.model_validate(doc)


@pytest.mark.parametrize("engine", ["heuristic", "cpsat"])
def test_plan_json_is_one_plan_document(engine: str) -> None:
    plan = _plan_json(OFFICE, "--engine", engine, "--deterministic", "--time-limit", "20")
    assert plan.schema_version == 1
    snap = load_snapshot(OFFICE, now=0.0)
    assert set(plan.desired_replicas) == {m.model_id for m in snap.models}
    # The pin to mac-studio-1 is satisfiable (embed-nomic is already ready there).
    assert "mac-studio-1" in {a.host_id for a in plan.placed("embed-nomic")}
    # video-wan needs an exclusive CUDA host with ComfyUI; the only one (gpu-01) carries an
    # external chat-general engine Grid may not stop, so every valid plan leaves it unmet.
    assert plan.placed("video-wan") == []
    assert "video-wan" in {u.model_id for u in plan.unsatisfied}
    # The external residency is a replica of chat-general that the plan keeps.
    kept = {(a.model_id, a.host_id) for a in plan.assignments if a.existing}
    assert ("chat-general", "gpu-01") in kept
    assert plan.solver.engine == ("heuristic" if engine == "heuristic" else "cp-sat")
    assert plan.solver.objective[0].level == "pinned"


def test_plan_json_is_repeatable_in_deterministic_mode() -> None:
    first = _plan_json(OFFICE, "--deterministic", "--engine", "cpsat", "--time-limit", "20")
    second = _plan_json(OFFICE, "--deterministic", "--engine", "cpsat", "--time-limit", "20")
    assert first.assignments == second.assignments
    assert first.unsatisfied == second.unsatisfied


@pytest.mark.parametrize("engine", ["heuristic", "cpsat"])
def test_rich_view_names_every_host_and_the_solver_status(engine: str) -> None:
    plan = _plan_json(OFFICE, "--engine", engine, "--deterministic", "--time-limit", "20")
    result = runner.invoke(
        app,
        ["plan", str(OFFICE), "--engine", engine, "--deterministic", "--time-limit", "20"],
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for host_id in ("gpu-01", "mac-studio-1", "mac-mini-2", "laptop-ana"):
        assert host_id in out
    assert f"Solver: {plan.solver.engine} · {plan.solver.status}" in out
    assert "throttled x0.5" in out  # laptop-ana's derating is shown
    assert "video-wan" in out and "Unmet replicas" in out
    for level in plan.solver.objective:
        assert level.level in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)  # the human view is not JSON


def test_rich_view_memory_columns_match_the_plan() -> None:
    """laptop-ana: allocatable is (24576 − 8192) × 0.5 = 8192 MB, with one model slot."""
    plan = _plan_json(OFFICE, "--engine", "heuristic")
    result = runner.invoke(app, ["plan", str(OFFICE), "--engine", "heuristic"], env=WIDE)
    lines = result.stdout.splitlines()
    row = next(i for i, text in enumerate(lines) if "laptop-ana" in text)
    on_laptop = [a for a in plan.assignments if a.host_id == "laptop-ana"]
    used = sum(a.memory_mb for a in on_laptop)
    assert f"{used} / 8192" in lines[row]
    assert f"{len(on_laptop)}/1" in lines[row]  # slots used of max_models 1
    assert f"{8192 - used} free" in lines[row + 1]


def test_toml_fleet_plans() -> None:
    plan = _plan_json(TINY, "--engine", "heuristic")
    assert plan.schema_version == 1
    # smollm2 is ready on desk-1 and required (min_replicas 1): it stays there.
    assert ("smollm2-135m", "desk-1") in {(a.model_id, a.host_id) for a in plan.assignments}


def test_the_time_limit_covers_the_whole_command() -> None:
    """A limit that the load and the problem build already use up (1 ms) leaves CP-SAT no
    time: the plan is the heuristic's, still valid, and says why; its explanations are the
    cheap ones and say so (issue 8, #7). Before, the solver got at least 50 ms regardless."""
    plan = _plan_json(OFFICE, "--engine", "cpsat", "--time-limit", "0.001")
    assert plan.solver.status == "HEURISTIC_FALLBACK"
    assert "left no time for CP-SAT" in plan.solver.message
    shortened = [u for u in plan.unsatisfied if "explanation shortened" in u.message]
    assert shortened and all(u.missing_replicas >= 1 for u in shortened)
    assert "video-wan" in {u.model_id for u in plan.unsatisfied}
