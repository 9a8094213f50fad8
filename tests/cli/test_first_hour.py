"""The first hour of a new user, command by command (issue 14): CLI tests that need no server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app

pytestmark = [pytest.mark.unit, pytest.mark.smoke]

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


# ----------------------------------------------------------------------------- item 13


def test_generate_fleet_refuses_a_missing_parent_folder(tmp_path: Path) -> None:
    target = tmp_path / "nope" / "deeper" / "f.json"
    result = runner.invoke(app, ["lab", "generate-fleet", "--hosts", "2", "-o", str(target)])
    assert result.exit_code == 2
    assert "Error [folder_not_found]" in result.stderr
    assert f"Next: mkdir -p {target.parent}" in result.stderr
    assert not (tmp_path / "nope").exists()  # nothing was created


def test_generate_fleet_refuses_a_file_as_parent(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    result = runner.invoke(app, ["lab", "generate-fleet", "-o", str(tmp_path / "plain" / "f.json")])
    assert result.exit_code == 2 and "folder_not_found" in result.stderr


def test_generate_fleet_writes_into_an_existing_folder(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    args = ["lab", "generate-fleet", "--hosts", "3", "--models", "2", "-o", str(target)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(target.read_text())
    assert len(doc["hosts"]) == 3 and len(doc["models"]) == 2


# ----------------------------------------------------------------------------- item 6


def test_ports_are_in_help() -> None:
    up = runner.invoke(app, ["up", "--help"], env={"COLUMNS": "200"})
    assert up.exit_code == 0 and "22101" in up.output
    start = runner.invoke(app, ["test", "start", "--help"], env={"COLUMNS": "200"})
    assert start.exit_code == 0 and "22100" in start.output
    listing = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "22101" in listing.output and "22100" in listing.output


def test_readme_examples_name_the_ports() -> None:
    readme = (REPO / "README.md").read_text()
    assert "127.0.0.1:22101" in readme and "127.0.0.1:22100" in readme
    assert "grid up" in readme and "grid test start" in readme


# ----------------------------------------------------------------------------- item 2


def test_root_help_documents_folders_and_token_variables() -> None:
    text = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    for name in (
        "GRID_STATE_DIR",
        "GRID_NODE_DIR",
        "GRID_TEST_DIR",
        "GRID_ALLOCATOR_CONTROL_TOKEN",
        "GRID_ALLOCATOR_NODE_TOKEN",
    ):
        assert name in text
    readme = (REPO / "README.md").read_text()
    for name in ("GRID_STATE_DIR", "GRID_NODE_DIR", "GRID_TEST_DIR"):
        assert name in readme


def test_next_hint_keeps_a_non_default_state_dir(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    result = runner.invoke(app, ["allocator", "tick", "--state-dir", str(folder)])
    assert result.exit_code == 2
    assert f"Next: grid up --state-dir {folder}" in result.stderr


# ----------------------------------------------------------------------------- startup


def test_version_is_fast_to_start() -> None:
    # Not a timed assertion: the modules a bare start imports are listed and checked.
    code = (
        "import sys, runpy\nsys.argv=['grid','--version']\n"
        "try:\n    runpy.run_module('grid', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('grid.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.strip().splitlines()[-1]
    for heavy in ("grid.planner", "grid.runtime", "grid.lab", "grid.node", "grid.api.process"):
        assert f"'{heavy}" not in loaded, (heavy, loaded)


def test_carry_dirs_adds_only_the_flags_a_follow_up_takes() -> None:
    from grid.cli.hints import carry_dirs

    argv = ["allocator", "node", "start", "--node-dir", "/n", "--state-dir", "/s"]
    assert carry_dirs("grid up", argv) == "grid up --state-dir /s"
    assert (
        carry_dirs("grid allocator node status", argv) == "grid allocator node status --node-dir /n"
    )
    assert carry_dirs("grid allocator node start", argv) == (
        "grid allocator node start --state-dir /s --node-dir /n"
    )
    assert carry_dirs("grid down", argv) == "grid down --state-dir /s --node-dir /n"
    assert carry_dirs("grid up --state-dir /x", argv) == "grid up --state-dir /x"
    assert carry_dirs("ls -l /x", argv) == "ls -l /x"
    assert carry_dirs("grid test stop", ["test", "start", "--run-dir", "/r"]) == (
        "grid test stop --run-dir /r"
    )


def test_an_error_from_deeper_layers_keeps_the_folders(tmp_path: Path) -> None:
    import socket

    from grid.api.settings import load_or_create_settings

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    state = tmp_path / "ctl"
    load_or_create_settings(state, port=port)  # a controller folder whose server is not running
    args = [
        "allocator",
        "node",
        "start",
        "--node-dir",
        str(tmp_path / "n"),
        "--state-dir",
        str(state),
    ]
    result = runner.invoke(app, args, env={"HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "controller_unreachable" in result.stderr
    assert f"Next: grid up --state-dir {state}" in result.stderr
