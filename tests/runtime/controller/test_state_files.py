"""Issue 22 finding 6 and the smaller items on the controller's side: every state file is
depth-checked like state.json (a hostile nesting is an unreadable file, never a RecursionError),
a lease file that cannot be read is replaced with a warning instead of blocking the lease, a
lease file that cannot be written is said to be that (503), not another holder (409), the
`lease_unavailable` warning goes once the file is writable again, and a host silent past its
route lease is not listed READY."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.api.routes_enroll import _load as load_enrollments
from grid.api.settings import load_or_create_settings, load_settings
from grid.fleet.errors import GridError
from grid.fleet.files import MAX_JSON_DEPTH, json_depth, loads_bounded
from grid.node.agent.config import load_config
from grid.node.agent.state import AgentStateStore, read_override
from grid.runtime.controller.lease import LeaseFile
from grid.runtime.controller.status import status_document
from tests.runtime.controller.harness import FAST, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

NESTED = "[" * 100_000 + "]" * 100_000
OBJECTS = '{"a":' * 5_000 + "1" + "}" * 5_000


@pytest.mark.parametrize(
    ("text", "depth"),
    [("{}", 1), ('{"a": [1, {"b": 2}]}', 3), ('"[[[["', 0), ('["]]]]", [[]]]', 3), ("1", 0)],
)
def test_json_depth_is_counted_outside_strings(text: str, depth: int) -> None:
    assert json_depth(text) == depth


@pytest.mark.parametrize("text", [NESTED, OBJECTS])
def test_a_hostile_nesting_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match=f"deeper than {MAX_JSON_DEPTH}"):
        loads_bounded(text)


def test_a_nested_lease_file_is_replaced_and_the_controller_takes_its_lease(
    tmp_path: Path,
) -> None:
    """Before: the controller never took its lease, showed no warning, `mode automatic` 500."""
    fleet = Fleet(tmp_path, [FakeNode("h1")])
    (tmp_path / "state.json.lease").write_text(NESTED, encoding="utf-8")
    lease = LeaseFile(tmp_path / "state.json.lease", controller_id="x")
    assert lease.read() is None and "deeper than" in lease.unreadable
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    held = fleet.ctl.keeper.held
    assert held is not None and held.term >= 1
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
    warnings = {w["code"]: w["message"] for w in doc["warnings"]}
    assert "deeper than" in warnings["lease_file_unreadable"]
    assert json.loads((tmp_path / "state.json.lease").read_text())["term"] == held.term
    fleet.register_all()
    fleet.settle(3)
    assert fleet.ready_hosts("m") == ["h1"]


@pytest.mark.parametrize("content", [NESTED, '{"controller_id": 1, "term": "x"}', "[]"])
def test_a_malformed_lease_file_counts_as_expired(tmp_path: Path, content: str) -> None:
    path = tmp_path / "state.json.lease"
    path.write_text(content, encoding="utf-8")
    lease = LeaseFile(path, controller_id="me")
    assert lease.read() is None and lease.unreadable
    assert lease.acquire(1000.0, floor_term=4).granted and lease.held is not None
    assert lease.held.term == 5  # never below the controller's own term


def test_an_unwritable_lease_file_is_named_not_another_holder(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the lease folder should be")
    fleet = Fleet(tmp_path, [FakeNode("h1")])
    good = fleet.ctl.keeper.lease
    assert good is not None
    fleet.ctl.keeper.lease = LeaseFile(tmp_path / "blocker" / "state.json.lease", controller_id="c")
    with pytest.raises(GridError) as refused:
        fleet.ctl.set_mode("automatic", fleet.now)
    assert refused.value.code == "lease_unavailable"  # a 503, not `lease_held` (409)
    assert "cannot be written" in refused.value.message
    assert "lease_unavailable" in {
        w["code"] for w in status_document(fleet.ctl, fleet.now).model_dump(mode="json")["warnings"]
    }
    # The folder is fixed: the warning goes with the next lease, none is left stale.
    fleet.ctl.keeper.lease = good
    fleet.ctl.set_mode("automatic", fleet.now)
    codes = {
        w["code"] for w in status_document(fleet.ctl, fleet.now).model_dump(mode="json")["warnings"]
    }
    assert not codes & {"lease_unavailable", "lease_held", "no_lease"}


def test_a_host_silent_past_its_route_lease_is_not_listed_ready(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2")])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()

    def shown() -> dict[str, tuple[str, list[str]]]:
        doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
        return {
            h["host_id"]: (h["state"], [r["state"] for r in h["residencies"]]) for h in doc["hosts"]
        }

    assert shown() == {"h1": ("accepting", ["ready"]), "h2": ("accepting", ["ready"])}
    # h2 goes silent; h1 keeps heartbeating past h2's route lease.
    for _ in range(int(FAST.node_ttl_s // 5) + 2):
        fleet.now += 5.0
        fleet.update(fleet.nodes["h1"], fleet.nodes["h1"].heartbeat())
    assert shown() == {"h1": ("accepting", ["ready"]), "h2": ("stale", ["stale"])}
    fleet.update(fleet.nodes["h2"], fleet.nodes["h2"].heartbeat())  # it is back
    assert shown()["h2"] == ("accepting", ["ready"])


def test_every_node_and_controller_state_file_refuses_a_nesting(tmp_path: Path) -> None:
    """agent.json, node.json, override.json, config.json, enrollments.json: a clear refusal
    (or, for the operator's override, a quarantine), never a RecursionError."""
    node = tmp_path / "node"
    node.mkdir()
    (node / "agent.json").write_text(NESTED)
    with pytest.raises(GridError) as agent:
        AgentStateStore(node).load("h1")
    assert agent.value.code == "agent_state_corrupt"
    (node / "node.json").write_text(NESTED)
    with pytest.raises(GridError) as config:
        load_config(node)
    assert config.value.code == "invalid_node_config"
    (node / "override.json").write_text(NESTED)
    fence = read_override(node)
    assert fence is not None and fence.kind.value == "quarantine"  # fails closed
    controller = tmp_path / "ctl"
    load_or_create_settings(controller, port=1)
    (controller / "config.json").write_text(OBJECTS)
    (controller / "config.json").chmod(0o600)
    with pytest.raises(GridError) as settings:
        load_settings(controller)
    assert settings.value.code == "invalid_controller_config"
    book = controller / "enrollments.json"
    book.write_text(NESTED)
    with pytest.raises(GridError) as enrollments:
        load_enrollments(book)
    assert enrollments.value.code == "enrollment_book_unreadable"
