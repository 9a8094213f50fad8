"""The status document shows a READY row without a corroborating child route as warming
(invariant 4: the row alone is inventory); the route makes it ready."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit


def _rows(doc: dict[str, Any], model_id: str) -> dict[str, str]:
    return {
        h["host_id"]: r["state"]
        for h in doc["hosts"]
        for r in h["residencies"]
        if r["model_id"] == model_id
    }


def test_ready_row_without_a_child_route_reads_warming(tmp_path: Path) -> None:
    node = FakeNode("h1")
    node.unrouted.add("m")  # the child answers READY, but no route reaches it
    fleet = Fleet(tmp_path, [node])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    assert node.residencies["m"]["state"] == "ready"  # what the node reports
    assert _rows(fleet.ctl.status(fleet.now).model_dump(mode="json"), "m") == {"h1": "warming"}
    node.unrouted.clear()
    fleet.step()
    assert _rows(fleet.ctl.status(fleet.now).model_dump(mode="json"), "m") == {"h1": "ready"}


def test_a_row_grid_does_not_own_needs_no_grid_route(tmp_path: Path) -> None:
    node = FakeNode("h1")
    node.residencies["ext"] = {
        "model_id": "ext",
        "memory_mb": 2048,
        "state": "ready",
        "managed": False,
    }
    node.unrouted.add("ext")
    fleet = Fleet(tmp_path, [node])
    fleet.register_all()
    assert _rows(fleet.ctl.status(fleet.now).model_dump(mode="json"), "ext") == {"h1": "ready"}
