"""`grid test start --machines 2` -> a real model READY -> `grid test stop` leaves no process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid.cli import test_cmd
from grid.cli.main import GuardedGroup
from grid.lab.logical_fleet import CONTROLLER_TUNING, LogicalFleet
from grid.node.agent.config import CatalogEntry
from grid.node.agent.process import pid_record
from grid.node.engines.proc import is_alive
from tests.e2e.fleet_helpers import chat, completion_text
from tests.service.harness import free_port

pytestmark = pytest.mark.engine

app = typer.Typer(cls=GuardedGroup, no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(test_cmd.test_app, name="test")


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "run"
    try:
        yield folder
    finally:
        LogicalFleet(folder).stop(timeout_s=30)  # also when the test failed


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["test", *args], catch_exceptions=False)


def _fleet_pids(run_dir: Path) -> list[int]:
    pids: list[int] = []
    server = json.loads((run_dir / "controller" / "server.pid").read_text(encoding="utf-8"))
    pids.append(int(server["pid"]))
    for node in sorted((run_dir / "nodes").iterdir()):
        record = pid_record(node)
        assert record is not None
        pids.append(int(record["pid"]))
        engines = json.loads((node / "engines" / "engines.json").read_text(encoding="utf-8"))
        pids += [int(e["pid"]) for e in engines["engines"].values()]
    return pids


def test_grid_test_start_serves_a_real_model_and_stop_leaves_nothing(
    run_dir: Path, llama_server: Path, smollm2_entry: CatalogEntry
) -> None:
    port, engines = str(free_port()), "39500"
    start = [
        "start",
        "--machines",
        "2",
        "--run-dir",
        str(run_dir),
        "--port",
        port,
        "--engine-port-base",
        engines,
        "--heartbeat-seconds",
        "0.5",
        "--capacities-gib",
        "1,1",
        "--wait-seconds",
        "90",
    ]
    result = invoke(*start)
    assert result.exit_code == 0, result.output
    assert "smollm2-135m is READY on logical-0" in result.output
    config = json.loads((run_dir / "controller" / "config.json").read_text(encoding="utf-8"))
    assert config["port"] == int(port) and config["controller"] == CONTROLLER_TUNING

    doc = json.loads(invoke("status", "--run-dir", str(run_dir), "--json").output)
    nodes = {n["host_id"]: n for n in doc["nodes"]}
    assert sorted(nodes) == ["logical-01", "logical-02"] and all(
        n["running"] for n in nodes.values()
    )
    hosts = {h["host_id"]: h for h in doc["hosts"]}
    assert sum(h["capacity_mb"] for h in hosts.values()) == 2048  # the shares, not 2x the machine
    assert {h["failure_domain"] for h in hosts.values()} == {
        "logical-domain-01",
        "logical-domain-02",
    }
    ready = [
        (n["host_id"], r) for n in nodes.values() for r in n["residencies"] if r["state"] == "ready"
    ]
    assert len(ready) == 1  # the baseline profile asks for one replica
    host_id, residency = ready[0]
    low = 39500 if host_id == "logical-01" else 39510
    assert low <= residency["port"] <= low + 9  # each node its own engine port range
    key = (run_dir / "nodes" / host_id / "engines" / "engine.keys").read_text().strip()
    reply = chat(residency["port"], key, "smollm2-135m")
    assert reply.status_code == 200 and completion_text(reply).strip()

    again = invoke(*start)
    assert again.exit_code == 0 and "Already running" in again.output  # idempotent
    pids = _fleet_pids(run_dir)
    assert len(pids) == 4 and all(is_alive(p) for p in pids)

    watched = invoke("watch", "--run-dir", str(run_dir), "--for-seconds", "0.5")
    assert f"{host_id}/smollm2-135m: ready" in watched.output
    assert "warm smollm2-135m@" in watched.output and ": succeeded" in watched.output

    stopped = invoke("stop", "--run-dir", str(run_dir))
    assert stopped.exit_code == 0, stopped.output
    assert "no process is left" in stopped.output
    assert "leftover" not in stopped.output  # each agent stopped its own child gracefully
    assert [p for p in pids if is_alive(p)] == []
