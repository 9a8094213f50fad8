"""`grid down` stops the local managed node agent before the controller it serves.

A real controller (started as `grid up` starts it) and a real node agent process (no model is
placed, so no engine starts).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid.api.process import start_server, stop_server
from grid.api.settings import Settings
from grid.cli import server_cmd
from grid.cli.main import GuardedGroup
from grid.fleet.errors import GridError
from grid.node.agent.config import NodeConfig, save_config
from grid.node.agent.credential import credential_text
from grid.node.agent.process import running_agent, start_agent, stop_agent
from grid.node.agent.status import read_status
from grid.node.engines.proc import is_alive
from grid.node.engines.state import atomic_write_text
from grid.wire import AllocatorClient
from tests.e2e.fleet_helpers import wait_for
from tests.service.harness import free_port

pytestmark = pytest.mark.service

app = typer.Typer(cls=GuardedGroup, no_args_is_help=True, pretty_exceptions_enable=False)
app.command("up")(server_cmd.up)
app.command("down")(server_cmd.down)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[tuple[Path, Settings, int]]:
    folder = tmp_path / "allocator"
    settings, pid, _started = start_server(folder, free_port())
    try:
        yield folder.resolve(), settings, pid
    finally:
        with contextlib.suppress(GridError):
            stop_server(folder)


@pytest.fixture
def node_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "node"
    try:
        yield folder
    finally:
        with contextlib.suppress(GridError):
            stop_agent(folder, force=True, timeout_s=20)


def _start_node(node_dir: Path, settings: Settings, grid_url: str) -> int:
    node_dir.mkdir(mode=0o700)
    with AllocatorClient(settings.url, operator_token=settings.operator_token) as admin:
        minted = admin.node_credential("host-local")
    atomic_write_text(node_dir / "node.token", credential_text(minted.token, minted.reply_key))
    config = NodeConfig(
        grid_url=grid_url,
        host_id="host-local",
        token_file=str(node_dir / "node.token"),
        capacity_mb=1024,
        external_memory="none",
        telemetry="logical",
        heartbeat_interval_s=0.2,
        engine_port_range=(39960, 39969),
    )
    save_config(node_dir, config)
    return start_agent(node_dir, token=None).pid


def _host_state(settings: Settings) -> str | None:
    with AllocatorClient(settings.url) as client:
        hosts = client.status(history=0).model_dump(mode="json")["hosts"]
    return hosts[0]["state"] if hosts else None


def _down(state_dir: Path, node_dir: Path) -> Any:
    return CliRunner().invoke(
        app,
        ["down", "--state-dir", str(state_dir), "--node-dir", str(node_dir)],
        catch_exceptions=False,
    )


def test_down_stops_the_local_node_first_so_its_last_heartbeat_is_heard(
    controller: tuple[Path, Settings, int], node_dir: Path
) -> None:
    state_dir, settings, server_pid = controller
    agent_pid = _start_node(node_dir, settings, settings.url)
    wait_for(lambda: _host_state(settings) == "accepting", 20, "the node to register")

    result = _down(state_dir, node_dir)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines == [
        "Stopped the node agent of host host-local and its model processes.",
        "Stopped the controller.",
    ]
    assert not is_alive(agent_pid) and not is_alive(server_pid)
    # The agent's final fence heartbeat reached a live controller: stopped in that order.
    last = read_status(node_dir)
    assert last is not None
    assert last.lifecycle == "draining" and last.last_error == ""


def test_down_leaves_an_agent_that_serves_another_controller(
    controller: tuple[Path, Settings, int], node_dir: Path
) -> None:
    state_dir, settings, server_pid = controller
    elsewhere = f"http://127.0.0.1:{free_port()}"  # some other controller's address
    agent_pid = _start_node(node_dir, settings, elsewhere)

    result = _down(state_dir, node_dir)

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["Stopped the controller."]
    assert not is_alive(server_pid)
    assert running_agent(node_dir) is not None and is_alive(agent_pid)


@pytest.mark.parametrize(
    ("url", "serves"),
    [
        ("http://127.0.0.1:22101", True),
        ("http://localhost:22101/", True),
        ("http://[::1]:22101", True),
        ("http://127.0.0.1:22102", False),  # another port: another controller
        ("https://127.0.0.1:22101", False),  # the local controller speaks plain loopback HTTP
        ("http://grid.example:22101", False),  # a remote Grid
        ("http://127.0.0.1:notaport", False),
    ],
)
def test_which_node_urls_name_the_local_controller(url: str, serves: bool) -> None:
    settings = Settings(operator_token="t", node_signing_key="k", port=22101)
    assert server_cmd.serves_controller(url, settings) is serves
