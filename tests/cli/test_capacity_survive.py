"""`grid capacity --survive 1`: N−1 sizing on the shipped office fleet and GPU-server template.

Oracle: the real planner on every single-host failure of the proposed fleet, planned here
without the code under test; and one host fewer must not survive (the count is minimal).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.snapshot import load_snapshot
from grid.lab.capacity_templates import load_templates
from grid.lab.whatif import add_hosts, remove_hosts
from grid.planner.plan import make_plan

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
OFFICE = REPO / "models" / "fleets" / "office.json"
SERVER = REPO / "models" / "templates" / "gpu-server.json"


def _unmet_after_failures(count: int) -> dict[str, int]:
    """host -> replicas unmet when it fails, on office + `count` GPU servers (models pinned to
    the failed host left out: nothing added can bring a pin back)."""
    snap = load_snapshot(OFFICE, now=1_785_300_000.0)
    fleet = add_hosts(snap, load_templates([SERVER])[0], count)
    out = {}
    for host in fleet.hosts:
        failed = remove_hosts(fleet, [host.host_id])
        pinned = {m.model_id for m in failed.models if host.host_id in m.pinned_hosts}
        plan = make_plan(failed, engine="cpsat", time_limit_s=5, deterministic=True)
        out[host.host_id] = sum(
            u.missing_replicas for u in plan.unsatisfied if u.model_id not in pinned
        )
    return out


def test_survive_one_failure_is_verified_and_minimal() -> None:
    args = ["capacity", str(OFFICE), "--add", str(SERVER), "--survive", "1", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    survive = doc["survive"]
    assert survive["status"] == "SURVIVES" and survive["exhaustive"]
    count = survive["added"]["gpu-server"]
    assert count > doc["added"]["gpu-server"]  # the demand-only answer does not survive
    assert all(v == 0 for v in _unmet_after_failures(count).values())
    assert any(v > 0 for v in _unmet_after_failures(count - 1).values())
    assert {p["model_id"] for p in survive["pinned_not_survivable"]} == {"embed-nomic"}
