"""`grid up|down` and `grid allocator ...` against a real background controller."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grid.fleet.wire import reply_key_path
from grid.node.agent import parse_credential
from tests.service.harness import REPO, HttpNode, free_port
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


def grid(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    full.update({"PYTHONPATH": str(REPO), "COLUMNS": "200"})
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tests.service.cli_app", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=full,
        timeout=120,
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "allocator"
    port = str(free_port())
    first = grid("up", "--state-dir", str(folder), "--port", port)
    assert first.returncode == 0, first.stderr
    try:
        yield folder
    finally:
        grid("down", "--state-dir", str(folder))


def test_up_is_idempotent_owner_only_and_down_stops(state_dir: Path) -> None:
    config = state_dir / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    token = json.loads(config.read_text())["operator_token"]
    again = grid("up", "--state-dir", str(state_dir))
    assert again.returncode == 0 and again.stdout.startswith("Already running")
    pid = json.loads((state_dir / "server.pid").read_text())["pid"]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert token not in ps and token not in again.stdout
    stopped = grid("down", "--state-dir", str(state_dir))
    assert stopped.returncode == 0 and stopped.stdout.startswith("Stopped")
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert grid("down", "--state-dir", str(state_dir)).stdout.startswith("No controller")


def test_status_names_binding_constraints_and_what_would_fit(
    state_dir: Path, tmp_path: Path
) -> None:
    folder = str(state_dir)
    token_path = tmp_path / "h1.token"
    wrote = grid(
        "allocator", "token", "write", str(token_path), "--host-id", "h1", "--state-dir", folder
    )
    assert wrote.returncode == 0, wrote.stderr
    assert stat.S_IMODE(token_path.stat().st_mode) == 0o600
    # One file: the token and the reply key (issue 22), neither of them printed.
    node_token, reply_key = parse_credential(token_path.read_text())
    assert node_token and reply_key and not reply_key_path(token_path).exists()
    assert node_token not in wrote.stdout + wrote.stderr and reply_key not in wrote.stdout
    url = json.loads((state_dir / "config.json").read_text())["port"]
    fake = FakeNode("h1", capacity_mb=16384)
    node = HttpNode(fake, f"http://127.0.0.1:{url}", node_token, reply_key)
    node.register()
    big = grid(
        "allocator",
        "model",
        "set",
        "big.gguf",
        "--memory-mb",
        "65536",
        "--min-replicas",
        "1",
        "--max-replicas",
        "2",
        "--runtime",
        "llama.cpp",
        "--runtime-memory-mb",
        "llama.cpp=65536",
        "--workload-score",
        "coding=1",
        "--workload-score",
        "research=.8",
        "--priority",
        "5",
        "--max-colocated-models",
        "1",
        "--colocation-exclude",
        "other.gguf",
        "--min-failure-domains",
        "1",
        "--data-tier",
        "internal",
        "--target-utilization",
        "0.5",
        "--replica-concurrency",
        "2",
        "--expected-service-time",
        "3",
        "--latency-slo-ms",
        "900",
        "--load-estimate",
        "90",
        "--warm-estimate",
        "30",
        "--min-residency",
        "60",
        "--scale-down-cooldown",
        "120",
        "--artifact-sha256",
        "A" * 64,
        "--artifact-source",
        "hf://owner/repo/big.gguf",
        "--artifact-size-mb",
        "40000",
        "--state-dir",
        folder,
    )
    assert big.returncode == 0, big.stderr
    assert grid("allocator", "tick", "--state-dir", folder).returncode == 0
    doc = json.loads(grid("allocator", "status", "--json", "--state-dir", folder).stdout)
    (profile,) = doc["profiles"]
    assert profile["artifact_sha256"] == "a" * 64  # canonical lowercase
    assert profile["workload_scores"] == {"coding": 1.0, "research": 0.8}
    assert (profile["priority"], profile["max_colocated_models"], profile["latency_slo_ms"]) == (
        5,
        1,
        900.0,
    )
    (unmet,) = doc["unmet"]
    assert unmet["model_id"] == "big.gguf" and unmet["missing_replicas"] == 1
    assert unmet["binding"] and unmet["would_fit_if"]
    constraint = unmet["binding"][0]["constraint"]
    table = grid("allocator", "status", "--state-dir", folder)
    assert table.returncode == 0, table.stderr
    assert "Unmet replicas" in table.stdout and "big.gguf" in table.stdout
    assert constraint in table.stdout
    assert unmet["would_fit_if"].split()[0] in table.stdout
    node.close()


def test_capability_sources_and_refusals(state_dir: Path, tmp_path: Path) -> None:
    folder = str(state_dir)
    wrong = grid(
        "allocator",
        "mode",
        "observe",
        "--state-dir",
        folder,
        env={"GRID_ALLOCATOR_CONTROL_TOKEN": "wrong-capability"},
    )
    assert wrong.returncode == 2 and "invalid_operator_token" in wrong.stderr
    assert "wrong-capability" not in wrong.stderr
    via_file = grid(
        "allocator",
        "mode",
        "observe",
        "--token-file",
        str(state_dir / "config.json"),
        "--grid",
        "http://127.0.0.1:" + str(json.loads((state_dir / "config.json").read_text())["port"]),
        "--state-dir",
        str(tmp_path / "elsewhere"),
    )
    assert via_file.returncode == 0 and "recommend -> observe" in via_file.stdout
    incomplete = grid(
        "allocator",
        "model",
        "set",
        "x",
        "--memory-mb",
        "1",
        "--artifact-source",
        "hf://o/r/x.gguf",
        "--state-dir",
        folder,
    )
    assert incomplete.returncode == 2 and "artifact_source_incomplete" in incomplete.stderr
    removed = grid("allocator", "model", "rm", "ghost", "--state-dir", folder)
    assert removed.returncode == 2 and "unknown_model" in removed.stderr
    assert (
        grid(
            "allocator", "model", "set", "ghost", "--memory-mb", "1", "--state-dir", folder
        ).returncode
        == 0
    )
    assert grid("allocator", "model", "remove", "ghost", "--state-dir", folder).returncode == 0
    doc = json.loads(grid("allocator", "status", "--json", "--state-dir", folder).stdout)
    assert [t["model_id"] for t in doc["tombstones"]] == ["ghost"] and doc["mode"] == "observe"
