"""Values the planner cannot handle are refused where they enter (issue 8, #9).

Memory, capacity and disk amounts are whole megabytes up to 1 PiB (2**30 MB); a priority is at
most 1,000,000 and a replica count at most 100,000 (docs/value-ceilings.md). Above a ceiling the
refusal is `value_too_large` with the field path, for snapshot files, parsed documents and the
controller's profile API alike (it validates profiles with the same fleet models).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grid.fleet.errors import GridError, SnapshotError
from grid.fleet.snapshot import load_snapshot, parse_snapshot
from grid.runtime.controller.profiles import validate_profile
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

PIB_IN_MB = 1024**5 // 1024**2  # hand-worked: 1,073,741,824


def _doc() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "now": 1_785_300_000.0,
        "policy": {},
        "hosts": [
            {
                "host_id": "h1",
                "capacity_mb": 16384,
                "residencies": [{"model_id": "m1", "memory_mb": 1024, "state": "ready"}],
            }
        ],
        "models": [{"model_id": "m1", "memory_mb": 1024, "runtime_memory_mb": {"vllm": 2048}}],
        "demand": {"m1": {"desired_replicas": 1}},
    }


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: object) -> None:
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


FIELDS = [
    (("hosts", 0, "capacity_mb"), "hosts[0].capacity_mb"),
    (("hosts", 0, "reserved_mb"), "hosts[0].reserved_mb"),
    (("hosts", 0, "external_mb"), "hosts[0].external_mb"),
    (("hosts", 0, "disk_free_mb"), "hosts[0].disk_free_mb"),
    (("hosts", 0, "residencies", 0, "memory_mb"), "hosts[0].residencies[0].memory_mb"),
    (("models", 0, "memory_mb"), "models[0].memory_mb"),
    (("models", 0, "runtime_memory_mb", "vllm"), "models[0].runtime_memory_mb.vllm"),
    (("models", 0, "artifact_size_mb"), "models[0].artifact_size_mb"),
    (("policy", "predictive_disk_reserve_mb"), "policy.predictive_disk_reserve_mb"),
]


@pytest.mark.parametrize("value", [1e20, 10**20, PIB_IN_MB + 1])
@pytest.mark.parametrize(("where", "path"), FIELDS)
def test_megabytes_above_one_pib_are_value_too_large(
    where: tuple[Any, ...], path: str, value: float
) -> None:
    doc = _doc()
    _set(doc, where, value)
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(doc)
    err = info.value
    assert (err.code, err.path) == ("value_too_large", path)
    assert "1073741824" in err.message and "1 PiB" in err.message
    assert path in err.fix


@pytest.mark.parametrize(("where", "_path"), FIELDS)
def test_exactly_one_pib_is_accepted(where: tuple[Any, ...], _path: str) -> None:
    doc = _doc()
    _set(doc, where, PIB_IN_MB)
    snap = parse_snapshot(doc)
    assert snap.now == doc["now"]


@pytest.mark.parametrize(
    ("where", "limit", "path"),
    [
        (("models", 0, "priority"), 1_000_000, "models[0].priority"),
        (("models", 0, "min_replicas"), 100_000, "models[0].min_replicas"),
        (("models", 0, "max_replicas"), 100_000, "models[0].max_replicas"),
        (("demand", "m1", "desired_replicas"), 100_000, "demand.m1.desired_replicas"),
        (("hosts", 0, "max_models"), 100_000, "hosts[0].max_models"),
    ],
)
def test_counts_and_priorities_have_ceilings_too(
    where: tuple[Any, ...], limit: int, path: str
) -> None:
    doc = _doc()
    doc["models"][0]["max_replicas"] = 100_000
    _set(doc, where, limit)
    parse_snapshot(doc)
    _set(doc, where, limit + 1)
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(doc)
    assert (info.value.code, info.value.path) == ("value_too_large", path)


def test_a_file_without_schema_version_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "fleet.json"
    file.write_text('{"now": 1.0, "hosts": [{"host_id": "h", "capacity_mb": 1}], "models": []}')
    with pytest.raises(SnapshotError) as info:
        load_snapshot(file)
    assert (info.value.code, info.value.path) == ("missing_field", "schema_version")


@pytest.mark.parametrize("content", ["", "\n\t ", '{"schema_version": 1, "now": 5}'])
def test_an_empty_snapshot_file_is_refused(tmp_path: Path, content: str) -> None:
    file = tmp_path / "fleet.json"
    file.write_text(content)
    with pytest.raises(SnapshotError) as info:
        load_snapshot(file, now=1.0)
    assert info.value.code == "empty_snapshot"
    assert info.value.fix


def test_the_profile_api_refuses_the_same_values() -> None:
    with pytest.raises(GridError) as info:
        validate_profile("big", {"memory_mb": 1e20}, now=1.0)
    assert (info.value.code, info.value.path) == ("value_too_large", "memory_mb")
    assert "models[0]" not in info.value.fix
    with pytest.raises(GridError) as info:
        validate_profile("big", {"memory_mb": 1024, "artifact_size_mb": 10**20}, now=1.0)
    assert (info.value.code, info.value.path) == ("value_too_large", "artifact_size_mb")
    assert validate_profile("ok", {"memory_mb": PIB_IN_MB}, now=1.0).memory_mb == PIB_IN_MB


def test_the_controller_keeps_its_profiles_when_refusing(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [FakeNode("h1")])
    fleet.ctl.put_profile("m", profile(), fleet.now)
    before = fleet.ctl.profiles["m"]
    with pytest.raises(GridError) as info:
        fleet.ctl.put_profile("m", profile(memory_mb=10**20), fleet.now)
    assert info.value.code == "value_too_large"
    assert fleet.ctl.profiles["m"] == before


@pytest.mark.parametrize("field", ["capacity_mb", "reserved_mb", "external_mb", "disk_free_mb"])
def test_node_wire_resources_refuse_values_above_one_pib(field: str) -> None:
    """A node's registration carries the same ceiling, so the route answers 422, never 500."""
    from pydantic import ValidationError

    from grid.fleet.wire import WireResources

    body: dict[str, Any] = {"capacity_mb": 16384, field: PIB_IN_MB}
    assert WireResources.model_validate(body)  # at the ceiling: accepted
    body[field] = PIB_IN_MB + 1
    with pytest.raises(ValidationError, match=r"value_too_large|above the ceiling"):
        WireResources.model_validate(body)
