"""`grid lab oracle` through the CLI: bad traces exit 2 with code and field path; the JSON
document is the contract's; the same trace gives the same answer."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.lab.oracle import generate_document, parse_trace
from tests.lab.test_oracle_reference import brute_force, simulate

pytestmark = pytest.mark.unit

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "models" / "oracle" / "example.json"
CONTRACT_KEYS = {
    "schema_version",
    "status",
    "served",
    "demand",
    "service_ceiling",
    "bound",
    "gap",
    "mutations",
    "schedule",
    "wall_s",
}


def _doc() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text())


def _set(path: str, value: Any) -> Any:
    def spoil(doc: dict[str, Any]) -> None:
        parts = path.split(".")
        target: Any = doc
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return spoil


BAD_TRACES = [
    (_set("demand.coder", [1.0, 2.0]), "demand_length", "demand.coder"),
    (_set("demand.ghost", [0.0] * 10), "unknown_model", "demand.ghost"),
    (_set("demand.chat.3", -1.0), "out_of_range", "demand.chat[3]"),
    (_set("demand.chat.0", float("nan")), "non_finite_number", "demand.chat[0]"),
    (_set("demand.chat.1", float("inf")), "non_finite_number", "demand.chat[1]"),
    (_set("hosts.0.capacity_mb", -5), "negative_number", "hosts[0].capacity_mb"),
    (_set("models.1.replica_concurrency", 0), "out_of_range", "models[1].replica_concurrency"),
    (_set("hosts.0.down", [[8, 12]]), "down_out_of_range", "hosts[0].down[0]"),
    (_set("hosts.0.down", [[5, 5]]), "down_out_of_range", "hosts[0].down[0]"),
    (_set("hosts.1.down", [[1, 5], [4, 6]]), "down_overlap", "hosts[1].down[1]"),
    (_set("hosts.1.host_id", "gpu-01"), "duplicate_id", "hosts[1].host_id"),
    (_set("hosts.0.colour", "red"), "unknown_field", "hosts[0].colour"),
    (_set("initial.0.model_id", "ghost"), "unknown_model", "initial[0].model_id"),
    (_set("initial.0.host_id", "ghost"), "unknown_host", "initial[0].host_id"),
    (_set("hosts.0.runtimes", ["vllm"]), "runtime_mismatch", "initial[0]"),
    (
        _set(
            "initial",
            [{"model_id": "chat", "host_id": "gpu-01"}, {"model_id": "chat", "host_id": "gpu-01"}],
        ),
        "duplicate_initial",
        "initial[1]",
    ),
    (
        _set("hosts.0.capacity_mb", 9000),
        "initial_over_capacity",
        "initial[0]",
    ),
    (_set("minutes", 0), "out_of_range", "minutes"),
    (_set("minutes", 3_000_000), "trace_too_large", "minutes"),
    (_set("schema_version", 2), "unsupported_schema_version", "schema_version"),
]


@pytest.mark.parametrize(("spoil", "code", "path"), BAD_TRACES)
def test_bad_trace_exits_2_with_code_and_path(
    tmp_path: Path, spoil: Any, code: str, path: str
) -> None:
    doc = _doc()
    if code == "initial_over_capacity":
        doc["models"][1]["memory_mb"] = 9500  # chat alone exceeds gpu-01 at 9000 MB
    spoil(doc)
    file = tmp_path / "trace.json"
    file.write_text(json.dumps(doc))  # NaN/Infinity are written as JSON extensions
    result = runner.invoke(app, ["lab", "oracle", str(file), "--json"])
    assert result.exit_code == 2, result.output
    assert f"Error [{code}] at {path}:" in result.stderr
    assert "To fix:" in result.stderr
    assert "Next: grid lab oracle --help" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_missing_minutes_is_named(tmp_path: Path) -> None:
    doc = _doc()
    del doc["minutes"]
    file = tmp_path / "trace.json"
    file.write_text(json.dumps(doc))
    result = runner.invoke(app, ["lab", "oracle", str(file)])
    assert result.exit_code == 2
    assert "Error [missing_field] at minutes:" in result.stderr


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    result = runner.invoke(app, ["lab", "oracle", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "Error [file_not_found]" in result.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"minutes": ')
    result = runner.invoke(app, ["lab", "oracle", str(bad)])
    assert result.exit_code == 2
    assert "Error [invalid_syntax]" in result.stderr
    assert "Traceback" not in result.output


def test_example_json_is_the_contract_document_and_exact() -> None:
    result = runner.invoke(app, ["lab", "oracle", str(EXAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out) == CONTRACT_KEYS
    doc = _doc()
    served, mutations = brute_force(doc)
    assert out["status"] == "OPTIMAL"
    assert out["served"] == pytest.approx(float(served), abs=1e-9)
    assert out["mutations"] == mutations
    assert out["demand"] == pytest.approx(sum(sum(v) for v in doc["demand"].values()))
    assert out["service_ceiling"] == pytest.approx(out["served"] / out["demand"])
    assert out["gap"] == pytest.approx(0.0, abs=1e-12)
    assert simulate(doc, out["schedule"]) == (served, mutations)
    for act in out["schedule"]:
        assert set(act) == {"minute", "action", "model_id", "host_id"}


def test_human_output_has_the_summary_and_schedule() -> None:
    result = runner.invoke(app, ["lab", "oracle", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "Hindsight oracle" in result.stdout
    assert "OPTIMAL" in result.stdout
    assert "greedy" in result.stdout
    assert "load" in result.stdout


def _without_wall(text: str) -> dict[str, Any]:
    doc = json.loads(text)
    doc.pop("wall_s")
    return doc


@pytest.mark.parametrize("window_path", [False, True])
def test_same_trace_same_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window_path: bool
) -> None:
    if window_path:  # force the time-window search that large traces take
        monkeypatch.setattr("grid.lab.oracle.solve.FULL_MODEL_CELLS", 0)
        monkeypatch.setattr("grid.lab.oracle.search.MIN_WINDOW_MINUTES", 10)
        monkeypatch.setattr("grid.lab.oracle.search.WINDOW_CELLS", 200)
    doc = generate_document(3, 4, 40, seed=7)
    file = tmp_path / "trace.json"
    file.write_text(json.dumps(doc))
    args = ["lab", "oracle", str(file), "--json", "--deterministic", "--time-limit", "2"]
    first = runner.invoke(app, args)
    second = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert _without_wall(first.stdout) == _without_wall(second.stdout)
    out = _without_wall(first.stdout)
    served, _mutations = simulate(copy.deepcopy(doc), out["schedule"])
    assert float(served) == pytest.approx(out["served"], abs=1e-6)
    assert out["bound"] >= out["served"] - 1e-9


@pytest.mark.parametrize("path", sorted((REPO / "models" / "oracle").glob("*.json")))
def test_shipped_traces_validate(path: Path) -> None:
    trace = parse_trace(json.loads(path.read_text()))
    assert trace.minutes > 0 and trace.hosts and trace.models
