"""Desired-replica reasons in `grid plan` and `grid allocator status`, `Next: grid capacity`
after unmet replicas, and `grid allocator snapshot` (the live fleet as a what-if file).

Oracle: the counts worked by hand from the snapshot's numbers (targets.py's rule: offered
concurrency × (1 + demand headroom) + queue, over replica_concurrency × target_utilization)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from tests.service.harness import ControllerProcess, HttpNode, converge, mint
from tests.support.fake_node import FakeNode

runner = CliRunner()

SNAPSHOT = {
    "schema_version": 1,
    "hosts": [{"host_id": "only", "capacity_mb": 4096, "runtimes": ["llama.cpp"]}],
    "models": [
        {"model_id": "busy", "memory_mb": 1024, "min_replicas": 0, "max_replicas": 3,
         "replica_concurrency": 1.0, "target_utilization": 0.5},
        {"model_id": "idle", "memory_mb": 512, "min_replicas": 1, "max_replicas": 1},
    ],
    "demand": {"busy": {"offered_concurrency": 1.0, "rpm": 30, "queue_depth": 0.2}},
}  # fmt: skip


@pytest.mark.unit
def test_plan_shows_why_and_the_next_capacity_command(tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(SNAPSHOT), encoding="utf-8")
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # 1.0 × 1.2 + 0.2 = 1.40 over 1.0 × 0.5 = 0.50 → ⌈2.8⌉ = 3; one host holds one replica.
    assert "= 1.40 over 0.50 per replica → 3; bounds 0–3 → 3" in result.output
    assert "1 model at min_replicas with no demand" in result.output
    assert f"Next: grid capacity {path} --add models/templates/gpu-server.json" in result.output


@pytest.mark.service
def test_status_reasons_and_the_live_fleet_as_a_snapshot(tmp_path: Path) -> None:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    node = HttpNode(FakeNode("solo", capacity_mb=4096), server.url, mint(server, "solo"))
    try:
        node.register()
        with server.admin() as admin:
            admin.put_model("pair", {"memory_mb": 512, "min_replicas": 2, "max_replicas": 2})
            admin.set_mode("automatic")
        converge([node], rounds=4)
        base = ["--grid", server.url]
        status = runner.invoke(app, ["allocator", "status", "--json", *base])
        assert status.exit_code == 0, status.output
        reasons = json.loads(status.output)["desired_reasons"]
        assert reasons["pair"]["desired"] == 2 and "bounds 2–2 → 2" in reasons["pair"]["why"]
        text = runner.invoke(app, ["allocator", "status", *base], env={"COLUMNS": "200"})
        assert "Desired replicas" in text.output
        assert "Next: grid allocator snapshot -o fleet.json && grid capacity" in text.output
        out = tmp_path / "live.json"
        snap = runner.invoke(app, ["allocator", "snapshot", "-o", str(out), *base])
        assert snap.exit_code == 0, snap.output
        planned = runner.invoke(app, ["plan", str(out), "--json"])
        assert planned.exit_code == 0, planned.output
        plan = json.loads(planned.stdout)
        # Two replicas wanted, one host: one placed (at most one per host), one unmet.
        assert plan["desired_replicas"]["pair"] == 2
        assert sum(u["missing_replicas"] for u in plan["unsatisfied"]) == 1
    finally:
        node.close()
        server.stop()


@pytest.mark.unit
def test_a_memory_binding_shows_the_headroom_term(tmp_path: Path) -> None:
    snapshot = {
        "schema_version": 1,
        "policy": {"memory_headroom_fraction": 0.05},
        "hosts": [{"host_id": "mac", "capacity_mb": 16384, "reserved_mb": 4096,
                   "runtimes": ["llama.cpp"],
                   "residencies": [{"model_id": "other", "memory_mb": 4096, "state": "ready",
                                    "managed": False}]}],
        "models": [{"model_id": "big", "memory_mb": 10240, "min_replicas": 1,
                    "max_replicas": 1}],
    }  # fmt: skip
    path = tmp_path / "mem.json"
    path.write_text(json.dumps(snapshot), encoding="utf-8")
    result = runner.invoke(app, ["plan", str(path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    # 16384 − 4096 reserved = 12288 allocatable; headroom ⌈0.05 × 12288⌉ = 615; 12288 − 4096
    # live − 615 = 7577 free for a new load.
    assert (
        "ledger mac: allocatable 12288 MB − live 4096 MB − headroom 615 MB (5% of allocatable) "
        "= 7577 MB free for a new load"
    ) in result.output
