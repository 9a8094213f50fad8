"""Every command of the `grid` Typer app documents itself (issue 14, item 10).

The walk resolves every lazy noun, so it also proves each sub-command module imports.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid.cli.main import app

pytestmark = [pytest.mark.unit, pytest.mark.smoke]

runner = CliRunner()


def _walk(command: Any, path: tuple[str, ...], ctx: Any) -> list[tuple[tuple[str, ...], Any]]:
    found = [(path, command)]
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                found += _walk(sub, (*path, name), ctx)
    return found


def _commands() -> list[tuple[tuple[str, ...], Any]]:
    root = typer.main.get_command(app)
    ctx = root.make_context("grid", ["--help"], resilient_parsing=True)
    return _walk(root, ("grid",), ctx)


def test_every_option_and_command_has_help() -> None:
    missing = []
    commands = _commands()
    assert len(commands) > 30  # the walk really went down every noun
    for path, command in commands:
        if not (command.help or command.short_help):
            missing.append(" ".join(path))
        for param in command.params:
            if param.param_type_name == "option" and not (param.help or "").strip():
                missing.append(f"{' '.join(path)} {param.opts[0]}")
            if param.param_type_name == "argument" and not (getattr(param, "help", "") or ""):
                missing.append(f"{' '.join(path)} {param.name} (argument)")
    assert missing == []


@pytest.mark.parametrize("args", [["--help"], ["allocator", "--help"], ["test", "start", "--help"]])
def test_flags_show_no_bool_metavar(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert "<bool>" not in result.output
    assert "--help" in result.output


def test_every_help_page_renders_without_bool() -> None:
    for path, _command in _commands():
        result = runner.invoke(app, [*path[1:], "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, path


def test_bare_grid_prints_help_and_exits_zero() -> None:
    result = runner.invoke(app, [])
    assert result.exit_code == 0
    assert "Usage: grid" in result.output
    for noun in ("plan", "allocator", "test", "lab", "capacity"):
        assert noun in result.output


def _grid(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grid", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.service
def test_install_completion_writes_the_bash_script(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    done = _grid(["--install-completion", "bash"], env)
    assert done.returncode == 0, done.stderr
    assert "completion installed" in done.stdout.lower()
    script = (tmp_path / ".bash_completions" / "grid.sh").read_text()
    assert "_GRID_COMPLETE" in script
    assert "grid.sh" in (tmp_path / ".bashrc").read_text()


@pytest.mark.service
def test_completion_completes_nouns_and_lazy_sub_commands(tmp_path: Path) -> None:
    base = {**os.environ, "HOME": str(tmp_path), "_GRID_COMPLETE": "complete_bash"}
    done = _grid([], {**base, "COMP_WORDS": "grid allo", "COMP_CWORD": "1"})
    assert done.stdout.split() == ["allocator"], done.stderr
    done = _grid([], {**base, "COMP_WORDS": "grid allocator no", "COMP_CWORD": "2"})
    assert sorted(done.stdout.split()) == ["node", "node-credential"], done.stderr


def test_version_does_not_import_the_planner() -> None:
    code = (
        "import sys; from grid.cli.main import app\n"
        "try:\n    app(['--version'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('ortools', 'scipy', 'grid.planner', 'grid.lab.oracle') "
        "if m in sys.modules]\nprint('HEAVY', heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "grid 0.1" in done.stdout
    assert "HEAVY []" in done.stdout, done.stdout
