"""Issue 15, defect 1: controller state loss. Command ids are unique across controller epochs; a
controller without trustworthy state learns the highest term the nodes report in heartbeats and
takes a higher one; status warns while the fleet and the controller disagree. Issue 22: only a
term the node can prove (the controller's own attestation, kept from the command that moved the
fence) is learned; a node's word alone moves nothing and names the host. (The node side, never
replaying a receipt of another epoch, is in tests/node/test_fault_receipts.py.)"""

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
    """The fake node, reporting its authority fence (and the proof it kept) in every heartbeat
    as a real node does."""

    def envelope(self) -> WireAllocator:
        return (
            super()
            .envelope()
            .model_copy(
                update={
                    "highest_term": self.fence.highest_term,
                    "controller_id": self.fence.controller_id,
                    "term_proof": self.term_proof or None,
                }
            )
        )


def _warnings(fleet: Fleet) -> dict[str, Any]:
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
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
    # Pretend the old controller went through many terms: the nodes remember term 23, with the
    # proof the old controller handed them (its attestation key lives in config.json).
    for node in nodes:
        node.fence.highest_term = 23
        node.term_proof = fleet.attestor.term_proof(23, node.fence.controller_id)
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


@pytest.mark.parametrize("proof", [None, "forged-proof", "proof-of-another-term"])
def test_a_term_without_a_valid_proof_moves_nothing_and_names_the_host(
    tmp_path: Path, proof: str | None
) -> None:
    """Issue 22 finding 1: one heartbeat claiming term 10^15 made the controller jump to
    10^15 + 1, and every real node refused it from then on (`term_jump_too_large`)."""
    honest, rogue = ReportingNode("h1"), ReportingNode("evil")
    fleet = Fleet(tmp_path, [honest, rogue])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    before = fleet.ctl.keeper.held
    assert before is not None
    rogue.fence.highest_term = 10**15
    rogue.fence.controller_id = "x"
    rogue.term_proof = {
        None: "",
        "forged-proof": "A" * 43,
        "proof-of-another-term": fleet.attestor.term_proof(before.term, "x"),
    }[proof]
    fleet.step()
    fleet.now += 60  # past lease renewals: the controller keeps its own term
    fleet.settle(3)
    lease = fleet.ctl.keeper.held
    assert lease is not None and lease.term == before.term
    assert fleet.ctl.max_term < 10**15
    warnings = _warnings(fleet)
    assert "fleet_term_ahead" not in warnings
    assert (
        "host evil" in warnings["suspicious_node"]
        and "term_unproven" in warnings["suspicious_node"]
    )
    assert "h1" not in warnings["suspicious_node"]
    # Healing goes on: the honest node's replica is lost and replaced under the same term.
    honest.residencies.clear()
    fleet.settle(6)
    assert fleet.ready_hosts("m") and not honest.refused
