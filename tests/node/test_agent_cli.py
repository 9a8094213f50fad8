"""`grid allocator node start|status|stop|drain|pause|quarantine|resume` with a real controller
and a real agent process (no model is placed, so no engine starts)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid.cli.main import GuardedGroup
from grid.cli.node_cmd import node_app
from grid.cli.node_start import credential_host
from grid.node.agent.process import pid_record, stop_agent
from grid.node.engines.proc import is_alive
from tests.service.harness import ControllerProcess, credential_file, mint

pytestmark = pytest.mark.service

app = typer.Typer(cls=GuardedGroup, no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(node_app, name="node")


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerProcess]:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def node_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "node"
    try:
        yield folder
    finally:
        stop_agent(folder, force=True, timeout_s=20)


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["node", *args], env=env, catch_exceptions=False)


def wait_host_state(server: ControllerProcess, state: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    seen = None
    while time.monotonic() < deadline:
        with server.public() as client:
            hosts = client.status(history=0)["hosts"]
        seen = hosts[0]["state"] if hosts else None
        if seen == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"host state is {seen}, not {state}")


def test_start_registers_keeps_the_credential_out_of_sight_and_stop_ends_it(
    controller: ControllerProcess, node_dir: Path
) -> None:
    token = mint(controller, "host-cli")
    assert credential_host(token) == "host-cli"
    args = ["start", "--node-dir", str(node_dir), "--grid", controller.url]
    args += [
        "--engine-ports",
        "39950-39959",
        "--heartbeat-seconds",
        "0.2",
        "--telemetry",
        "logical",
    ]
    credential = credential_file(token)  # "$(cat node.token)": the token and its reply key
    started = invoke(*args, env={"GRID_ALLOCATOR_NODE_TOKEN": credential})
    assert started.exit_code == 0, started.output
    assert "host-cli" in started.output and token not in started.output
    record = pid_record(node_dir)
    assert record is not None
    pid = int(record["pid"])
    for part in ("cmdline", "environ"):
        assert token.encode() not in Path(f"/proc/{pid}/{part}").read_bytes()
    assert token not in (node_dir / "node.json").read_text()
    wait_host_state(controller, "accepting")

    again = invoke(*args, env={"GRID_ALLOCATOR_NODE_TOKEN": credential})
    assert "Already running" in again.output and pid_record(node_dir) == record

    doc = json.loads(invoke("status", "--node-dir", str(node_dir), "--json").output)
    assert doc["running"] and doc["pid"] == pid
    assert doc["agent"]["registered"] and doc["agent"]["host_id"] == "host-cli"

    stopped = invoke("stop", "--node-dir", str(node_dir))
    assert stopped.exit_code == 0 and "Stopped the node agent" in stopped.output
    assert not is_alive(pid)
    assert not json.loads(invoke("status", "--node-dir", str(node_dir), "--json").output)["running"]
    wait_host_state(controller, "draining")  # its last word to the controller was the fence


def test_overrides_fence_the_running_host_and_survive_a_restart(
    controller: ControllerProcess, node_dir: Path
) -> None:
    token_file = node_dir.parent / "node.token"
    token_file.write_text(credential_file(mint(controller, "host-ovr")))
    token_file.chmod(0o600)
    args = ["start", "--node-dir", str(node_dir), "--grid", controller.url]
    args += [
        "--token-file",
        str(token_file),
        "--heartbeat-seconds",
        "0.2",
        "--telemetry",
        "logical",
    ]
    assert invoke(*args).exit_code == 0
    wait_host_state(controller, "accepting")

    out = invoke("pause", "--node-dir", str(node_dir), "--reason", "battery use").output
    assert "Local override: pause" in out
    wait_host_state(controller, "paused")
    stop_agent(node_dir, timeout_s=20)
    assert invoke(*args).exit_code == 0  # a new agent process: the override is durable
    time.sleep(1.0)
    wait_host_state(controller, "paused")
    status = json.loads(invoke("status", "--node-dir", str(node_dir), "--json").output)
    assert status["override"]["reason"] == "battery use"

    assert "cleared" in invoke("resume", "--node-dir", str(node_dir)).output
    wait_host_state(controller, "accepting", timeout_s=20)
    invoke("quarantine", "--node-dir", str(node_dir), "--for-seconds", "2")
    wait_host_state(controller, "quarantined")
    wait_host_state(controller, "accepting", timeout_s=20)  # it expired by itself


def test_start_without_a_credential_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["node", "start", "--node-dir", str(tmp_path / "n"), "--grid", "http://127.0.0.1:9"],
        env={"GRID_ALLOCATOR_NODE_TOKEN": ""},
    )
    assert result.exit_code == 2
    assert "no_node_credential" in result.output
