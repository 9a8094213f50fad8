"""`grid capacity`: the JSON contract, hand-computed answers, the drill, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from tests.planner.fleets import host, model, want

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OFFICE = REPO / "models" / "fleets" / "office.json"
FLEET_64 = REPO / "models" / "fleets" / "fleet-64.json"
GPU_SERVER = REPO / "models" / "templates" / "gpu-server.json"
WORKSTATION = REPO / "models" / "templates" / "gpu-workstation.json"
CONTRACT_KEYS = {
    "schema_version",
    "added",
    "placed_before",
    "placed_after",
    "desired",
    "status",
    "binding",
}

runner = CliRunner()
WIDE = {"COLUMNS": "160"}


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _fleet(tmp_path: Path, **overrides: Any) -> Path:
    """A hand-written what-if fleet: no `now`, no heartbeats (planned as of the clock)."""
    doc: dict[str, Any] = {
        "schema_version": 1,
        "policy": {"memory_headroom_fraction": 0.0},
        "hosts": [host("h0", 4000)],
        "models": [model("a", 10000, max_replicas=2)],
        "demand": {"a": want(2)},
    }
    doc.update(overrides)
    for h in doc["hosts"]:
        h.pop("last_heartbeat", None)
    return _write(tmp_path / "fleet.json", doc)


def _json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, ["capacity", *args, "--json"], env=WIDE)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # exactly one document on stdout
    assert isinstance(doc, dict)
    return doc


def test_tie_break_by_memory_through_the_cli(tmp_path: Path) -> None:
    # a (10000 MB) needs 2 hosts of either template; small: 2 x 12000 MB < large 2 x 64000.
    large = _write(tmp_path / "large.json", {"host_id": "large", "capacity_mb": 64000})
    small = _write(tmp_path / "small.json", {"host_id": "small", "capacity_mb": 12000})
    doc = _json([str(_fleet(tmp_path)), "--add", str(large), "--add", str(small)])
    assert set(doc) == CONTRACT_KEYS
    assert doc["added"] == {"large": 0, "small": 2}
    assert (doc["placed_before"], doc["placed_after"], doc["desired"]) == (0, 2, 2)
    assert doc["status"] == "OPTIMAL"


def test_infeasible_exits_zero_and_names_the_tag(tmp_path: Path) -> None:
    fleet = _fleet(
        tmp_path,
        models=[model("v", 8000, required_tags=["gpu"])],
        demand={"v": want(1)},
    )
    cpu = _write(tmp_path / "cpu.json", {"host_id": "cpu", "capacity_mb": 64000})
    doc = _json([str(fleet), "--add", str(cpu)])
    assert doc["status"] == "INFEASIBLE"
    assert doc["added"] == {"cpu": 0}
    assert any(b["constraint"] == "missing_tag" and b["value"] == "gpu" for b in doc["binding"])
    human = runner.invoke(app, ["capacity", str(fleet), "--add", str(cpu)], env=WIDE)
    assert human.exit_code == 0
    assert "INFEASIBLE" in human.stdout and "gpu" in human.stdout


def test_a_host_copied_from_a_live_fleet_is_a_template(tmp_path: Path) -> None:
    # gpu-01 of the office fleet, residencies and all: the added copies start empty, so this
    # answer equals the GPU-server one (gpu-01 has the same runtimes, backend, tags and slots).
    office = json.loads(OFFICE.read_text(encoding="utf-8"))
    gpu01 = next(h for h in office["hosts"] if h["host_id"] == "gpu-01")
    assert gpu01["residencies"]
    template = _write(tmp_path / "gpu01.json", gpu01)
    doc = _json([str(OFFICE), "--add", str(template)])
    assert doc["added"] == {"gpu-01": 2}
    assert doc["placed_after"] == doc["desired"]


def test_office_needs_two_gpu_servers() -> None:
    # image-sdxl (ComfyUI, at most 2 models per host) fits neither gpu-01 (coder-32b and an
    # external chat-general already) nor the full mac-studio-1; video-wan (CUDA, tag gpu)
    # must be alone on its host. Neither shares a host with the other: 2 new servers.
    doc = _json([str(OFFICE), "--add", str(GPU_SERVER)])
    assert doc["added"] == {"gpu-server": 2}
    assert doc["placed_after"] == doc["desired"] == doc["placed_before"] + 2
    assert doc["status"] == "OPTIMAL"


def test_fleet_64_prefers_five_workstations() -> None:
    # Five replicas of exclusive (max_colocated_models 1) video models are unmet; each needs
    # its own host, and the workstation (40960 MB) holds the largest (37760 MB) in less
    # memory than the server (77824 MB).
    doc = _json([str(FLEET_64), "--add", str(GPU_SERVER), "--add", str(WORKSTATION)])
    assert doc["placed_before"] == doc["desired"] - 5
    assert doc["added"] == {"gpu-server": 0, "gpu-workstation": 5}
    assert doc["placed_after"] == doc["desired"]


def test_drill_json_hand_worked(tmp_path: Path) -> None:
    # h1 (20000 MB) holds a and b, h2 (12000 MB) a; if h1 fails h2 takes b (priority) only.
    fleet = _fleet(
        tmp_path,
        hosts=[host("h1", 20000), host("h2", 12000)],
        models=[model("a", 5000, max_replicas=2), model("b", 10000, priority=100)],
        demand={"a": want(2), "b": want(1)},
    )
    doc = _json([str(fleet), "--drill"])
    rows = {r["host_id"]: r for r in doc["hosts"]}
    assert rows["h1"]["unmet"] == {"a": 2}
    assert rows["h1"]["last_replica"] == ["b"] and rows["h1"]["lost"] == ["a"]
    assert rows["h2"]["unmet"] == {"a": 1} and rows["h2"]["lost"] == []
    human = runner.invoke(app, ["capacity", str(fleet), "--drill"], env=WIDE)
    assert human.exit_code == 0 and "N−1 drill" in human.stdout


def _refused(args: list[str], code: str) -> str:
    result = runner.invoke(app, ["capacity", *args], env=WIDE)
    assert result.exit_code == 2, result.output
    err = result.stderr
    assert f"Error [{code}]" in err
    assert "To fix:" in err and "Next:" in err
    assert "Traceback" not in result.output
    return err


@pytest.mark.parametrize(
    ("template", "code"),
    [
        ({"host_id": "t"}, "invalid_template"),  # no capacity_mb
        ({"host_id": "t", "capacity_mb": -1}, "invalid_template"),
        ({"host_id": "t", "capacity_mb": 1000, "colour": "red"}, "invalid_template"),
        ([{"host_id": "t", "capacity_mb": 1000}], "invalid_template"),
        (
            {"host_id": "t", "capacity_mb": 1000, "residencies": [{"model_id": ""}]},
            "invalid_template",
        ),
        ({"host_id": "t", "capacity_mb": 1000, "state": "paused"}, "invalid_template"),
    ],
)
def test_a_template_that_is_not_a_valid_host(tmp_path: Path, template: object, code: str) -> None:
    bad = _write(tmp_path / "bad.json", template)
    err = _refused([str(_fleet(tmp_path)), "--add", str(bad)], code)
    assert "bad.json" in err


def test_template_syntax_and_missing_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    _refused([str(_fleet(tmp_path)), "--add", str(broken)], "invalid_template")
    _refused([str(_fleet(tmp_path)), "--add", str(tmp_path / "none.json")], "template_not_found")


def test_duplicate_template_ids(tmp_path: Path) -> None:
    one = _write(tmp_path / "one.json", {"host_id": "t", "capacity_mb": 1000})
    two = _write(tmp_path / "two.json", {"host_id": "t", "capacity_mb": 2000})
    _refused([str(_fleet(tmp_path)), "--add", str(one), "--add", str(two)], "duplicate_template")


@pytest.mark.parametrize("value", ["0", "-3"])
def test_max_must_be_positive(tmp_path: Path, value: str) -> None:
    _refused([str(_fleet(tmp_path)), "--add", str(GPU_SERVER), "--max", value], "invalid_max")


def test_time_limit_must_be_positive(tmp_path: Path) -> None:
    args = [str(_fleet(tmp_path)), "--add", str(GPU_SERVER), "--time-limit", "0"]
    _refused(args, "invalid_time_limit")


def test_snapshot_without_demand(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, demand={})
    err = _refused([str(fleet), "--add", str(GPU_SERVER)], "no_demand")
    assert "demand" in err
    _refused([str(fleet), "--drill"], "no_demand")


def test_nothing_to_do_and_bad_snapshot(tmp_path: Path) -> None:
    _refused([str(_fleet(tmp_path))], "no_template")
    _refused([str(tmp_path / "missing.json"), "--add", str(GPU_SERVER)], "file_not_found")
