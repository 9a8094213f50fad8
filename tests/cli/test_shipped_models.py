"""The shipped catalog and example fleets load, and both engines plan them validly."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from grid.fleet.models import ModelProfile
from grid.fleet.snapshot import load_snapshot
from grid.planner.plan import make_plan
from grid.planner.validate import violations

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
FLEETS = sorted((MODELS / "fleets").glob("*.*"))
NOW = 1_800_000_000.0
GEMMA_SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _catalog() -> dict[str, ModelProfile]:
    doc = tomllib.loads((MODELS / "catalog.toml").read_text(encoding="utf-8"))
    profiles = [ModelProfile.model_validate(entry) for entry in doc["models"]]
    return {p.model_id: p for p in profiles}


def test_catalog_profiles_validate_and_are_unique() -> None:
    doc = tomllib.loads((MODELS / "catalog.toml").read_text(encoding="utf-8"))
    catalog = _catalog()
    assert len(catalog) == len(doc["models"])
    # The two real GGUFs, with the resident sizes measured for them.
    assert catalog["smollm2-135m"].memory_mb == 180
    assert catalog["gemma-3-270m"].memory_mb == 370
    assert catalog["gemma-3-270m"].artifact_sha256 == GEMMA_SHA
    workloads = {w for p in catalog.values() for w in p.workload_scores}
    assert {"coding", "general", "embedding", "image", "video"} <= workloads


def test_example_fleets_are_present() -> None:
    names = {f.name for f in FLEETS}
    assert {"office.json", "fleet-64.json", "tiny.toml"} <= names


@pytest.mark.parametrize("fleet", FLEETS, ids=lambda p: p.name)
def test_example_fleet_is_a_what_if_snapshot(fleet: Path) -> None:
    snap = load_snapshot(fleet, now=NOW)
    assert snap.now == NOW  # `now` is omitted in the file: the caller's clock applies
    assert all(h.last_heartbeat == NOW for h in snap.hosts)


def test_office_fleet_shape() -> None:
    snap = load_snapshot(MODELS / "fleets" / "office.json", now=NOW)
    catalog = _catalog()
    assert len(snap.hosts) == 4
    backends = {b for h in snap.hosts for b in h.backends}
    assert {"cuda", "metal"} <= backends
    assert any(h.state.value == "throttled" for h in snap.hosts)
    assert any(not r.is_managed for h in snap.hosts for r in h.residencies)
    assert any(m.pinned_hosts for m in snap.models)
    assert any(m.max_colocated_models for m in snap.models)
    assert len({m.priority for m in snap.models}) >= 3
    for model in snap.models:  # the office uses catalog profiles, pins aside
        entry = catalog[model.model_id]
        assert model.model_copy(update={"pinned_hosts": []}) == entry


@pytest.mark.parametrize("fleet", FLEETS, ids=lambda p: p.name)
def test_heuristic_plans_every_example_fleet_validly(fleet: Path) -> None:
    snap = load_snapshot(fleet, now=NOW)
    plan = make_plan(snap, engine="heuristic")
    assert violations(snap, plan) == []
    assert plan.assignments


@pytest.mark.parametrize("name", ["office.json", "tiny.toml"])
def test_cpsat_plans_small_example_fleets_validly(name: str) -> None:
    snap = load_snapshot(MODELS / "fleets" / name, now=NOW)
    plan = make_plan(snap, engine="cpsat", time_limit_s=20.0, deterministic=True)
    assert violations(snap, plan) == []
    assert plan.solver.engine == "cp-sat"
