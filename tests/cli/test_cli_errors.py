"""Bad snapshots and crashes: exit codes, the error format, and no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid import __version__
from grid.cli.main import GuardedGroup, app
from grid.fleet.errors import GridError

pytestmark = pytest.mark.unit

runner = CliRunner()


def _fleet() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "hosts": [
            {"host_id": "h1", "capacity_mb": 16384, "runtimes": ["llama.cpp"]},
            {"host_id": "h2", "capacity_mb": 8192, "runtimes": ["llama.cpp"]},
        ],
        "models": [{"model_id": "m1", "memory_mb": 1024, "max_replicas": 2}],
        "demand": {"m1": {"offered_concurrency": 1.0}},
    }


def _unknown_field(doc: dict[str, Any]) -> None:
    doc["hosts"][1]["colour"] = "red"


def _negative_capacity(doc: dict[str, Any]) -> None:
    doc["hosts"][0]["capacity_mb"] = -1


def _duplicate_host(doc: dict[str, Any]) -> None:
    doc["hosts"][1]["host_id"] = "h1"


def _unknown_demand(doc: dict[str, Any]) -> None:
    doc["demand"]["ghost"] = {"offered_concurrency": 1.0}


def _huge_capacity(doc: dict[str, Any]) -> None:
    doc["hosts"][0]["capacity_mb"] = 1e20  # passed validate and crashed plan (issue 8, #9)


def _huge_model_memory(doc: dict[str, Any]) -> None:
    doc["models"][0]["memory_mb"] = 10**20


def _huge_disk(doc: dict[str, Any]) -> None:
    doc["hosts"][1]["disk_free_mb"] = 2**30 + 1  # one MB above 1 PiB


BAD_SNAPSHOTS = [
    (_unknown_field, "unknown_field", "hosts[1].colour"),
    (_negative_capacity, "negative_number", "hosts[0].capacity_mb"),
    (_duplicate_host, "duplicate_id", "hosts[1].host_id"),
    (_unknown_demand, "unknown_model", "demand.ghost"),
    (_huge_capacity, "value_too_large", "hosts[0].capacity_mb"),
    (_huge_model_memory, "value_too_large", "models[0].memory_mb"),
    (_huge_disk, "value_too_large", "hosts[1].disk_free_mb"),
]


@pytest.mark.parametrize(("spoil", "code", "path"), BAD_SNAPSHOTS)
@pytest.mark.parametrize("command", ["plan", "validate"])
def test_bad_snapshot_exits_2_with_code_and_path(
    tmp_path: Path, spoil: Any, code: str, path: str, command: str
) -> None:
    doc = _fleet()
    spoil(doc)
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(doc))
    result = runner.invoke(app, [command, str(file), "--json"])
    assert result.exit_code == 2, result.output
    assert f"Error [{code}] at {path}:" in result.stderr
    assert "To fix:" in result.stderr
    assert f"Next: grid validate {file}" in result.stderr
    assert "Traceback" not in result.output


def test_plan_refusal_leaves_stdout_empty(tmp_path: Path) -> None:
    doc = _fleet()
    _duplicate_host(doc)
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(doc))
    result = runner.invoke(app, ["plan", str(file), "--json"])
    assert result.exit_code == 2
    assert result.stdout == ""  # nothing a JSON reader could mistake for a plan


def test_validate_json_puts_the_verdict_on_stdout(tmp_path: Path) -> None:
    doc = _fleet()
    _negative_capacity(doc)
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(doc))
    result = runner.invoke(app, ["validate", str(file), "--json"])
    assert result.exit_code == 2
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is False
    assert verdict["error"]["code"] == "negative_number"
    assert verdict["error"]["path"] == "hosts[0].capacity_mb"


def test_non_json_file_is_a_syntax_error(tmp_path: Path) -> None:
    file = tmp_path / "fleet.json"
    file.write_text('{"schema_version": 1, "hosts": [')
    result = runner.invoke(app, ["plan", str(file)])
    assert result.exit_code == 2
    assert "Error [invalid_syntax]" in result.stderr
    assert "is not valid JSON" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("", "empty_snapshot"),
        ("  \n", "empty_snapshot"),
        ('{"schema_version": 1}', "empty_snapshot"),
        ('{"hosts": [], "models": []}', "missing_field"),
        ('{"hosts": [{"host_id": "h1", "capacity_mb": 8192}], "models": []}', "missing_field"),
    ],
)
@pytest.mark.parametrize("command", ["plan", "validate"])
def test_empty_or_unversioned_snapshot_is_refused(
    tmp_path: Path, content: str, code: str, command: str
) -> None:
    file = tmp_path / "fleet.json"
    file.write_text(content)
    result = runner.invoke(app, [command, str(file)])
    assert result.exit_code == 2, result.output
    assert f"Error [{code}]" in result.stderr
    if code == "missing_field":
        assert "at schema_version:" in result.stderr
    assert "To fix:" in result.stderr
    assert "Traceback" not in result.output


def test_a_fleet_at_the_value_ceilings_plans_with_both_engines(tmp_path: Path) -> None:
    """The ceiling is one the planner can handle: 1 PiB hosts and profiles plan and validate."""
    ceiling = 2**30  # 1 PiB in MB
    doc = _fleet()
    for h in doc["hosts"]:
        h.update(capacity_mb=ceiling, disk_free_mb=ceiling, reserved_mb=0)
    doc["models"] = [
        {
            "model_id": f"m{i}",
            "memory_mb": ceiling // 2,
            "artifact_size_mb": ceiling // 2,
            "min_replicas": 1,
            "max_replicas": 2,
            "priority": 1_000_000,
        }
        for i in range(3)
    ]
    doc["demand"] = {}
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(doc))
    for engine in ("cpsat", "heuristic"):
        result = runner.invoke(app, ["plan", str(file), "--engine", engine, "--json"])
        assert result.exit_code == 0, result.output
        plan = json.loads(result.stdout)
        # 1 PiB hosts with a 5 % headroom take one half-PiB model each: 2 of 3 baselines.
        assert len(plan["assignments"]) == 2


def test_missing_file_names_the_next_command(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert "Error [file_not_found]" in result.stderr
    assert "Next: ls models/" in result.stderr


def test_valid_snapshot_validates_with_counts(tmp_path: Path) -> None:
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(_fleet()))
    result = runner.invoke(app, ["validate", str(file), "--json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is True
    assert verdict["counts"]["hosts"] == 2
    assert verdict["counts"]["admitting_hosts"] == 2  # no `now`, no heartbeat: seen now
    assert verdict["counts"]["demand_entries"] == 1
    human = runner.invoke(app, ["validate", str(file)])
    assert human.exit_code == 0
    assert human.stdout.startswith("OK ")


def test_unknown_engine_is_a_usage_error(tmp_path: Path) -> None:
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(_fleet()))
    result = runner.invoke(app, ["plan", str(file), "--engine", "magic"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_non_positive_time_limit_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "fleet.json"
    file.write_text(json.dumps(_fleet()))
    result = runner.invoke(app, ["plan", str(file), "--time-limit", "0"])
    assert result.exit_code == 2
    assert "Error [invalid_time_limit]" in result.stderr


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"grid {__version__}"


# ----------------------------------------------------------------------------- the wrapper


def _guarded_app() -> typer.Typer:
    """A small app on the same group class, to exercise the wrapper on every path."""
    test_app = typer.Typer(cls=GuardedGroup, pretty_exceptions_enable=False)
    sub = typer.Typer()

    @test_app.command("crash")
    def crash() -> None:
        raise ValueError("the bucket has a hole\nsecond line never shown")

    @test_app.command("refuse")
    def refuse() -> None:
        raise GridError("no_room", "there is no room", fix="free some", path="hosts[3]")

    @sub.command("deep")
    def deep() -> None:
        raise GridError("deep_refusal", "refused in a sub-app", next_command="grid help")

    @test_app.command("fine")
    def fine() -> None:
        raise typer.Exit(3)  # a command's own exit code passes through untouched

    test_app.add_typer(sub, name="sub")
    return test_app


def test_unexpected_exception_is_one_line_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRID_DEBUG", raising=False)
    result = runner.invoke(_guarded_app(), ["crash"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        "Internal error: ValueError: the bucket has a hole "
        "(run again with GRID_DEBUG=1 for the traceback)"
    ]


def test_grid_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRID_DEBUG", "1")
    result = runner.invoke(_guarded_app(), ["crash"])
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "ValueError: the bucket has a hole" in result.stderr


def test_refusal_in_command_and_sub_app() -> None:
    result = runner.invoke(_guarded_app(), ["refuse"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[:2] == [
        "Error [no_room] at hosts[3]: there is no room",
        "To fix: free some",
    ]
    deep = runner.invoke(_guarded_app(), ["sub", "deep"])
    assert deep.exit_code == 2
    assert "Error [deep_refusal]: refused in a sub-app" in deep.stderr
    assert "Next: grid help" in deep.stderr


def test_explicit_exit_code_passes_through() -> None:
    result = runner.invoke(_guarded_app(), ["fine"])
    assert result.exit_code == 3
    assert result.stderr == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["allocator", "status", "--grid", "http://127.0.0.1:9", "--token-file", "{missing}"],
        ["node", "start", "--node-dir", "{node}", "--token-file", "{missing}"],  # a node's
    ],
)
def test_an_unreadable_token_file_is_refused_with_its_code(tmp_path: Path, argv: list[str]) -> None:
    missing, node = tmp_path / "no-such.token", tmp_path / "node"
    args = [a.format(missing=missing, node=node) for a in argv]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"Error [token_file_unreadable]: cannot read {missing}" in result.stderr
    assert "To fix: check the --token-file path and its permissions" in result.stderr
    assert "Traceback" not in result.output
    assert not (node / "config.json").exists()  # nothing saved for a start that was refused
