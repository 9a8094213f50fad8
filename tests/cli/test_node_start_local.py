"""`grid allocator node start` with no flags on the controller's machine (issue 14, item 3):
the local controller writes the node a credential; the node registers; `grid down` stops both.
Real processes: the controller and the node agent run detached, as a user starts them."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.grid_process import clean_env, grid
from tests.service.harness import free_port

pytestmark = pytest.mark.service


def _grid(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return grid(clean_env(home), *args, timeout=120)


def test_node_start_needs_no_flags_next_to_its_controller(tmp_path: Path) -> None:
    home = tmp_path
    up = _grid(home, "up", "--port", str(free_port()))
    assert up.returncode == 0, up.stderr
    try:
        started = _grid(home, "allocator", "node", "start")
        assert started.returncode == 0, started.stderr
        token = home / ".grid" / "node" / "node.token"
        assert "The local controller wrote a credential for host" in started.stdout
        assert stat.S_IMODE(token.stat().st_mode) == 0o600
        secret = token.read_text().splitlines()[0]
        assert secret not in started.stdout + started.stderr
        assert "Next: grid allocator node status" in started.stdout
        host = json.loads((home / ".grid" / "node" / "node.json").read_text())["host_id"]
        deadline = time.monotonic() + 60
        hosts: list[str] = []
        while time.monotonic() < deadline and host not in hosts:
            doc = json.loads(_grid(home, "allocator", "status", "--json").stdout)
            hosts = [h["host_id"] for h in doc["hosts"]]
            time.sleep(1)
        assert host in hosts  # the node registered with the minted credential
        again = _grid(home, "allocator", "node", "start")
        assert again.returncode == 0 and again.stdout.startswith("Already running")
    finally:
        down = _grid(home, "down")
    assert "Stopped the node agent" in down.stdout and "Stopped the controller." in down.stdout


def test_without_a_local_controller_the_remote_case_is_explained(tmp_path: Path) -> None:
    result = _grid(tmp_path, "allocator", "node", "start")
    assert result.returncode == 2
    assert "Error [no_node_credential]" in result.stderr
    assert "grid allocator token write node.token --host-id ID" in result.stderr
    assert "Next: grid up" in result.stderr
    assert not (tmp_path / ".grid" / "node" / "node.token").exists()


def test_a_remote_controller_is_not_asked_for_a_local_credential(tmp_path: Path) -> None:
    up = _grid(tmp_path, "up", "--port", str(free_port()))
    assert up.returncode == 0, up.stderr
    try:
        args = ["allocator", "node", "start", "--grid", "https://grid.example:22101"]
        result = _grid(tmp_path, *args)
    finally:
        _grid(tmp_path, "down")
    assert result.returncode == 2
    assert "no_node_credential" in result.stderr and "not the one on this machine" in result.stderr
    assert "--token-file node.token" in result.stderr
