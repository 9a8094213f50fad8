"""Issue 15, defect 1: controller state loss. Command ids are unique across controller epochs; a
controller without trustworthy state learns the highest term the nodes report in heartbeats and
takes a higher one; status warns while the fleet and the controller disagree. (The node side,
never replaying a receipt of another epoch, is in tests/node/test_fault_receipts.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grid.fleet.wire import WireAllocator
from grid.runtime.controller.status import status_document
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


class ReportingNode(FakeNode):
    """The fake node, reporting its authority fence in every heartbeat as a real node does."""

    def envelope(self) -> WireAllocator:
        return (
            super()
            .envelope()
            .model_copy(
                update={
                    "highest_term": self.fence.highest_term,
                    "controller_id": self.fence.controller_id,
                }
            )
        )


def _warnings(fleet: Fleet) -> dict[str, Any]:
    doc = status_document(fleet.ctl, fleet.now)
    return {w["code"]: w["message"] for w in doc["warnings"]}


def _lose_state(fleet: Fleet, folder: Path, controller_id: str) -> None:
    """state.json quarantined and the lease file lost, as in the issue's report."""
    (folder / "state.json").rename(folder / "state.json.corrupt-1")
    (folder / "state.json.lease").unlink()
    fleet.start(controller_id)
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)


def test_a_controller_after_state_loss_takes_a_term_above_the_fleets(tmp_path: Path) -> None:
    nodes = [ReportingNode("h1"), ReportingNode("h2")]
    fleet = Fleet(tmp_path, list(nodes))
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    (ready,) = fleet.ready_hosts("m")
    first_ids = {c["action_id"] for c in fleet.delivered}
    old_term = max(c["controller_term"] for c in fleet.delivered)
    # Pretend the old controller went through many terms: the nodes remember term 23.
    for node in nodes:
        node.fence.highest_term = 23
    # The replica is lost while the controller is gone, so the same work is needed again.
    fleet.nodes[ready].residencies.clear()
    fleet.nodes[ready].cached.clear()
    _lose_state(fleet, tmp_path, "ctl-b")
    fleet.step(execute=False)  # the heartbeats carry term 23
    assert "fleet_term_ahead" in _warnings(fleet)
    fleet.ctl.set_mode("automatic", fleet.now)
    before = len(fleet.delivered)
    fleet.settle(8)
    second = fleet.delivered[before:]
    assert second, "the new controller delivered nothing"
    assert min(c["controller_term"] for c in second) > 23 > old_term
    assert not first_ids & {c["action_id"] for c in second}  # no id of the old epoch again
    assert all(not n.refused for n in nodes), [n.refused for n in nodes]
    assert len(fleet.ready_hosts("m")) == 1
    assert "fleet_term_ahead" not in _warnings(fleet)


def test_command_ids_differ_across_controller_epochs(tmp_path: Path) -> None:
    ids: list[set[str]] = []
    for run in ("a", "b"):
        folder = tmp_path / run
        folder.mkdir()
        fleet = Fleet(folder, [FakeNode("h1")])
        fleet.register_all()
        fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
        fleet.ctl.set_mode("automatic", fleet.now)
        fleet.settle(3)
        assert fleet.ready_hosts("m") == ["h1"]
        ids.append({c["action_id"] for c in fleet.delivered})
    assert len(ids[0]) == 2 and len(ids[1]) == 2
    assert not ids[0] & ids[1]
