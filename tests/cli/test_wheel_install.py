"""A node installs Grid from the built wheel, without a checkout or dev tools: `pip wheel .`,
then `pip install` of that wheel into a new, empty virtual environment. The installed `grid`
plans a snapshot, ships the dashboard's files and serves /ui; no dev tool came with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.service.harness import free_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _run(*argv: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def test_the_built_wheel_installs_and_runs_in_a_clean_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, REPO,
                 cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("grid_allocator-*.whl")
    venv = tmp_path / "venv"
    assert _run(sys.executable, "-m", "venv", venv, cwd=tmp_path).returncode == 0
    py = venv / "bin" / "python"
    installed = _run(py, "-m", "pip", "install", "-q", "--disable-pip-version-check", wheel,
                     cwd=tmp_path)  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    grid = venv / "bin" / "grid"
    assert _run(grid, "--version", cwd=tmp_path).stdout.startswith("grid ")
    for tool in ("pytest", "ruff", "mypy", "hypothesis"):  # no dev tool came with it
        assert _run(py, "-c", f"import {tool}", cwd=tmp_path).returncode != 0, tool
    snapshot = tmp_path / "fleet.json"
    snapshot.write_text(json.dumps({
        "schema_version": 1,
        "hosts": [{"host_id": "h1", "capacity_mb": 8192, "runtimes": ["llama.cpp"]}],
        "models": [{"model_id": "m", "memory_mb": 1024, "min_replicas": 1}],
    }), encoding="utf-8")  # fmt: skip
    planned = _run(grid, "plan", snapshot, "--json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["assignments"][0]["host_id"] == "h1"
    # The controller from the wheel serves the dashboard (package data shipped).
    state, port = tmp_path / "ctl", free_port()
    up = _run(grid, "up", "--state-dir", state, "--port", str(port), cwd=tmp_path)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        deadline = time.monotonic() + 30
        page = None
        while time.monotonic() < deadline:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/ui/static/app.js", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert page is not None and page.status_code == 200 and "view.json" in page.text
    finally:
        _run(grid, "down", "--state-dir", state, cwd=tmp_path)
