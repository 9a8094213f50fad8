"""`grid plan` on the shipped office-workloads example: JSON shape of DESIGN.md and Rich tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "models" / "fleets" / "office-workloads.json"
PORTFOLIO_KEYS = {
    "mapping",
    "selected_models",
    "exploration_model",
    "admission",
    "candidates",
    "solver",
}
ADMISSION_KEYS = {
    "workload",
    "state",
    "reason",
    "model_id",
    "offered_concurrency",
    "desired",
    "planned",
    "ready",
    "missing",
    "eligible_hosts",
    "startup_s",
}
CANDIDATE_KEYS = {
    "workload",
    "model_id",
    "feasible",
    "rejection",
    "eligible_hosts",
    "best_host",
    "startup_s",
    "transition_penalty",
    "utility",
    "confidence",
    "exploration_bonus",
}


def _json(*extra: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["plan", str(EXAMPLE), "--json", "--deterministic", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_json_carries_the_portfolio_contract() -> None:
    doc = _json()
    portfolio = doc["portfolio"]
    assert isinstance(portfolio, dict) and set(portfolio) == PORTFOLIO_KEYS
    assert all(set(r) == ADMISSION_KEYS for r in portfolio["admission"])
    assert all(set(c) == CANDIDATE_KEYS for c in portfolio["candidates"])
    assert {"engine", "status", "wall_ms"} <= set(portfolio["solver"])
    states = {r["workload"]: r["state"] for r in portfolio["admission"]}
    # design: 2 observations; image: 1.2 units but the office fleet cannot prove spare slots;
    # sales: no profile scores it.
    assert states["design"] == "deferred" and states["image"] == "deferred"
    assert states["sales"] == "infeasible"
    assert portfolio["mapping"]["coding"] == "coder-32b"
    reasons = {r["workload"]: r["reason"] for r in portfolio["admission"]}
    assert reasons["design"] == "below_evidence_gate: 2 of 3 observations"
    workload_replicas = [
        a for a in doc["assignments"] if any("(portfolio)" in x for x in a["reasons"])
    ]
    assert workload_replicas, "the portfolio adds a replica for its workloads"


def test_heuristic_engine_reports_the_coordinate_search() -> None:
    doc = _json("--engine", "heuristic")
    assert doc["portfolio"]["solver"]["engine"] == "coordinate-search"


def test_plan_renders_admission_and_candidate_tables() -> None:
    result = CliRunner().invoke(app, ["plan", str(EXAMPLE)], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    text = result.output
    for needle in (
        "Workload admission",
        "Portfolio candidates",
        "below_evidence_gate",
        "no_candidate_model",
        "portfolio solver: cp-sat",
    ):
        assert needle in text
