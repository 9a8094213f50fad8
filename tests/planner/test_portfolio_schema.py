"""Snapshot vocabulary of issue 9: workloads, outcomes, the workload vocabulary, the plan field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.errors import SnapshotError
from tests.planner.portfolio.builders import host, model, plan_of, work, wsnapshot

pytestmark = pytest.mark.unit


def _refusal(**kwargs: object) -> SnapshotError:
    base: dict[str, object] = {
        "hosts": [host("h1")],
        "models": [model("coder", workload_scores={"coding": 1.0})],
        "workloads": {"coding": work()},
    }
    base.update(kwargs)
    with pytest.raises(SnapshotError) as info:
        wsnapshot(**base)  # type: ignore[arg-type]
    return info.value


def test_unknown_workload_word_in_workloads_names_the_path() -> None:
    err = _refusal(workloads={"cooking": work()})
    assert (err.code, err.path) == ("unknown_workload", "workloads.cooking")
    assert "policy.workload_vocabulary" in err.fix


def test_unknown_workload_word_in_scores_and_outcomes() -> None:
    err = _refusal(models=[model("coder", workload_scores={"poetry": 0.5})])
    assert (err.code, err.path) == ("unknown_workload", "models[0].workload_scores.poetry")
    err = _refusal(outcomes=[{"model_id": "coder", "workload": "knitting"}])
    assert (err.code, err.path) == ("unknown_workload", "outcomes[0].workload")


@pytest.mark.parametrize("score", [0.0, -0.2, 1.5])
def test_workload_score_outside_unit_interval_is_refused(score: float) -> None:
    err = _refusal(models=[model("coder", workload_scores={"coding": score})])
    assert err.path == "models[0].workload_scores"
    assert "(0, 1]" in err.message


def test_outcome_for_unknown_model_and_impossible_counts() -> None:
    err = _refusal(outcomes=[{"model_id": "ghost", "workload": "coding"}])
    assert (err.code, err.path) == ("unknown_model", "outcomes[0].model_id")
    err = _refusal(
        outcomes=[{"model_id": "coder", "workload": "coding", "requests": 2, "successes": 3}]
    )
    assert err.path == "outcomes[0]"


def test_configured_vocabulary_replaces_the_default() -> None:
    snap = wsnapshot(
        [host("h1")],
        [model("m", workload_scores={"legal": 1.0})],
        {"legal": work()},
        policy={"workload_vocabulary": ["legal", "general"]},
    )
    assert list(snap.workloads) == ["legal"]
    err = _refusal(policy={"workload_vocabulary": ["legal"]})
    assert err.code == "unknown_workload"  # coding is no longer a word
    err = _refusal(policy={"workload_vocabulary": ["coding", "coding"]})
    assert (err.code, err.path) == ("invalid_workload_vocabulary", "policy.workload_vocabulary[1]")


def test_unknown_workload_field_and_bad_modality() -> None:
    err = _refusal(workloads={"coding": {"observations": 3, "users": 4}})
    assert (err.code, err.path) == ("unknown_field", "workloads.coding.users")
    err = _refusal(workloads={"coding": {"modality": "smell"}})
    assert (err.code, err.path) == ("unknown_enum_value", "workloads.coding.modality")


def test_plan_has_no_portfolio_key_without_workloads() -> None:
    snap = wsnapshot([host("h1")], [model("m", min_replicas=1)], {})
    document = plan_of(snap).model_dump(mode="json")
    assert "portfolio" not in document


def test_grid_plan_refuses_an_unknown_workload_with_a_code(tmp_path: Path) -> None:
    doc = {
        "schema_version": 1,
        "hosts": [{"host_id": "h1", "capacity_mb": 8000}],
        "models": [{"model_id": "m", "memory_mb": 1000}],
        "workloads": {"astrology": {"observations": 9}},
    }
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    text = result.output
    assert "unknown_workload" in text and "workloads.astrology" in text
    assert "Traceback" not in text
