"""A loaded logical node marked user-active: make-before-break evacuation to the spare node."""

from __future__ import annotations

import pytest

from grid.node.agent.config import CatalogEntry
from grid.node.agent.telemetry import write_knobs
from grid.node.engines.proc import is_alive
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import chat, completion_text, host_row, wait_for
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.engine


def test_user_activity_evacuates_the_replica_before_it_is_drained(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    model = smollm2_entry.model_id
    first = make_node("host-a", [smollm2_entry])
    first.start()
    with controller.admin() as admin:
        admin.put_model(
            model,
            {
                "memory_mb": 256,
                "min_replicas": 1,
                "max_replicas": 1,
                "artifact_sha256": smollm2_entry.sha256,
                "min_residency_s": 0,
                "scale_down_cooldown_s": 0,
            },
        )
        admin.set_mode("automatic")

        def state(host_id: str) -> str | None:
            row = host_row(admin.status(history=0).model_dump(mode="json"), host_id, model)
            return row["state"] if row else None

        wait_for(lambda: state("host-a") == "ready", 60, "the replica on host-a")
        spare = make_node("host-b", [smollm2_entry])
        spare.start()
        wait_for(
            lambda: any(
                h["host_id"] == "host-b"
                for h in admin.status(history=0).model_dump(mode="json")["hosts"]
            ),
            30,
            "the spare to register",
        )
        old = first.residency(model)
        assert old is not None

        write_knobs(first.folder, {"user_active": True})  # someone sits down at host-a
        wait_for(lambda: state("host-a") == "cached", 90, "host-a to be evacuated")
        assert state("host-b") == "ready"
        status = admin.status(history=50).model_dump(mode="json")
    assert not is_alive(old["pid"])
    hosts = {h["host_id"]: h for h in status["hosts"]}
    assert hosts["host-a"]["state"] == "paused"
    records = {(r["kind"], r["host_id"]): r for r in status["history"]}
    warm_b, drain_a = records[("warm", "host-b")], records[("drain", "host-a")]
    assert warm_b["status"] == drain_a["status"] == "succeeded"
    # Make before break: the replacement was serving before the old replica left service.
    assert warm_b["finished_at"] <= drain_a["delivered_at"]
    new = spare.residency(model)
    assert new is not None
    reply = chat(new["port"], spare.engine_key(), model)
    assert reply.status_code == 200 and completion_text(reply).strip()
