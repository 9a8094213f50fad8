"""Issue 15, defect 4: a node whose state folder becomes unwritable keeps heartbeating, reports
itself unhealthy with the reason, and the controller stops counting its replicas as ready.

The folder is made truly unwritable (a tmpfs remounted read-only: root ignores permission
bits), so the test needs mount privileges and is skipped where they are missing."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from grid.fleet.wire import WireAllocator
from grid.runtime.controller.status import status_document
from tests.node.agent_helpers import FakeControllerClient, command, make_agent, node_config
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_engine import FakeEngineSupervisor
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit


def _mount(folder: Path, *options: str) -> bool:
    args = ["mount", "-t", "tmpfs", "-o", ",".join(["size=16m", *options]), "tmpfs", str(folder)]
    return subprocess.run(args, capture_output=True, check=False).returncode == 0


@pytest.fixture
def state_mount(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "state"
    folder.mkdir()
    if not _mount(folder):
        pytest.skip("needs mount privileges to make a folder truly read-only")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_an_unwritable_state_folder_keeps_heartbeats_and_reports_unhealthy(
    tmp_path: Path, state_mount: Path
) -> None:
    client = FakeControllerClient()
    supervisor = FakeEngineSupervisor()
    agent = make_agent(tmp_path, config=node_config(tmp_path), supervisor=supervisor, client=client)
    agent.start_worker()
    try:
        load = command("load")
        warm = command("warm", memory_mb=300, dependencies=[load["action_id"]])
        client.outbox = [load, warm]
        agent.cycle()
        assert agent.wait_idle(10.0)
        agent.cycle()
        assert client.last_residency("m1")["state"] == "ready"
        remount = ["mount", "-o", "remount,ro", str(state_mount)]
        assert subprocess.run(remount, capture_output=True, check=False).returncode == 0
        sent = len(client.bodies)
        for _ in range(3):
            agent.cycle()  # never raises, never goes silent
        bodies = client.bodies[sent:]
        assert len(bodies) >= 3
        last = bodies[-1]["allocator"]
        assert last["state"] == "unhealthy"
        assert any("state folder" in p and "cannot be written" in p for p in last["problems"])
        # Commands are not taken while nothing can be made durable.
        assert all(b["request_commands"] is False for b in bodies[1:])
    finally:
        agent.worker.stop()
        subprocess.run(["mount", "-o", "remount,rw", str(state_mount)], check=False)


class UnwritableNode(FakeNode):
    problems: tuple[str, ...] = ()

    def envelope(self) -> WireAllocator:
        return super().envelope().model_copy(update={"problems": list(self.problems)})


def test_the_controller_stops_counting_an_unhealthy_nodes_replica(tmp_path: Path) -> None:
    one, two = UnwritableNode("h1"), UnwritableNode("h2")
    fleet = Fleet(tmp_path, [one, two])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    (ready,) = fleet.ready_hosts("m")
    sick = fleet.nodes[ready]
    assert isinstance(sick, UnwritableNode)
    sick.state = "unhealthy"
    sick.problems = ("the state folder cannot be written (Read-only file system)",)
    fleet.settle(6)
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
    row = next(h for h in doc["hosts"] if h["host_id"] == ready)
    assert row["state"] == "unhealthy"
    assert any("cannot be written" in p for p in row["problems"])
    # Its replica is not counted: a replacement is made ready on the healthy host.
    other = "h2" if ready == "h1" else "h1"
    assert other in fleet.ready_hosts("m")
