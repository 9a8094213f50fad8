"""`grid test start --candidate-model/--workload-model`: what they register, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.cli.candidates import candidate_models, parse_workload_models
from grid.fleet.errors import GridError
from grid.lab.logical_fleet import candidate_profile
from grid.lab.logical_fleet_settings import FleetSettings, resolve_model
from grid.node.artifacts import GEMMA3_270M_MODEL_ID, SMOLLM2_MODEL_ID

pytestmark = pytest.mark.unit


def test_pairs_parse_and_bad_ones_are_clear_errors() -> None:
    assert parse_workload_models(["coding=gemma-3-270m", " general = x "]) == [
        ("coding", "gemma-3-270m"),
        ("general", "x"),
    ]
    with pytest.raises(GridError) as bad:
        parse_workload_models(["cooking=gemma-3-270m"])
    assert bad.value.code == "unknown_workload" and "coding" in bad.value.fix
    for text in ("coding", "=x", "coding="):
        with pytest.raises(GridError) as shape:
            parse_workload_models([text])
        assert shape.value.code == "invalid_workload_model"


def test_a_workload_model_becomes_a_candidate_with_min_replicas_zero(tmp_path: Path) -> None:
    try:
        baseline = resolve_model(SMOLLM2_MODEL_ID, tmp_path)
        scores, candidates = candidate_models(
            baseline, [], ["coding=gemma-3-270m", "general=smollm2-135m"], tmp_path
        )
    except GridError as exc:  # the shipped weights are an install step
        pytest.skip(exc.message)
    assert scores == {"general": 1.0}  # the baseline keeps its place, with its score
    (candidate,) = candidates
    assert (candidate.model_id, candidate.workload_scores) == (
        GEMMA3_270M_MODEL_ID,
        {"coding": 1.0},
    )
    settings = FleetSettings(
        machines=2, model=baseline, capacities_mb=[2048, 2048], candidates=candidates
    )
    assert [m.model_id for m in settings.catalog_models()] == [
        SMOLLM2_MODEL_ID,
        GEMMA3_270M_MODEL_ID,
    ]
    body = candidate_profile(settings, candidate)
    assert (body["min_replicas"], body["max_replicas"]) == (0, 1)
    assert body["workload_scores"] == {"coding": 1.0}
    assert body["artifact_sha256"] == candidate.sha256
