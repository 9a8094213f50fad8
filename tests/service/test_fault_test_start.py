"""Issue 15, defect 9: `grid test start` never reports READY while the controller is in
recommend mode with no profile (its state was quarantined behind a running fleet); it configures
the controller again instead. A real logical fleet of one machine with a real llama.cpp child."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid.api.process import start_server
from grid.cli import test_cmd
from grid.cli.main import GuardedGroup
from grid.lab.logical_fleet import LogicalFleet
from grid.node.agent.config import CatalogEntry
from tests.e2e.conftest import llama_server, smollm2_entry  # noqa: F401 (fixtures)
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
        LogicalFleet(folder).stop(timeout_s=30)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["test", *args], catch_exceptions=False)


def test_start_after_a_quarantine_configures_again_and_never_claims_ready_before(
    run_dir: Path,
    llama_server: Path,  # noqa: F811
    smollm2_entry: CatalogEntry,  # noqa: F811
) -> None:
    start = ["start", "--machines", "1", "--run-dir", str(run_dir), "--port", str(free_port()),
             "--engine-port-base", "39560", "--heartbeat-seconds", "0.5",
             "--capacities-gib", "1", "--wait-seconds", "90"]  # fmt: skip
    first = invoke(*start)
    assert first.exit_code == 0 and "is READY on logical-01" in first.output, first.output
    controller = run_dir / "controller"
    pid = json.loads((controller / "server.pid").read_text(encoding="utf-8"))["pid"]
    os.kill(pid, signal.SIGKILL)  # the controller dies; its state is corrupt when it returns
    (controller / "state.json").write_text("{not json", encoding="utf-8")
    start_server(controller)  # e.g. `grid up`: a clean controller in recommend mode
    fleet = LogicalFleet(run_dir)
    doc = fleet.controller_status()
    assert doc is not None and doc["mode"] == "recommend" and doc["profiles"] == []
    # The node still holds its warm child, but the controller does not manage it: not READY.
    assert fleet.ready_hosts("smollm2-135m") == []
    again = invoke(*start)
    assert again.exit_code == 0, again.output
    doc = fleet.controller_status()
    assert doc is not None and doc["mode"] == "automatic"
    assert [p["model_id"] for p in doc["profiles"]] == ["smollm2-135m"]
    if "is READY" in again.output:
        assert fleet.ready_hosts("smollm2-135m") == ["logical-01"]
