"""`grid plan` output for large and small fleets (issue 14, item 12): folded unchanged hosts,
`--unmet-only`, plurals. The oracle is the plan's own JSON document read independently."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grid.cli.main import app

pytestmark = [pytest.mark.unit]

REPO = Path(__file__).resolve().parents[2]
FLEET64 = REPO / "models" / "fleets" / "fleet-64.json"
runner = CliRunner()
ARGS = ["--engine", "heuristic", "--time-limit", "20"]


def _plan(path: Path, *extra: str) -> str:
    result = runner.invoke(app, ["plan", str(path), *ARGS, *extra], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def _changed_hosts(snapshot: dict[str, Any], plan: dict[str, Any]) -> set[str]:
    changed = {a["host_id"] for a in plan["assignments"] if not a["existing"]}
    placed = {(a["host_id"], a["model_id"]) for a in plan["assignments"]}
    for host in snapshot["hosts"]:
        for r in host.get("residencies", []):
            live = r.get("state", "ready") in ("loading", "warming", "ready", "draining")
            managed = r.get("managed", True) and r.get("ownership") in (None, "managed")
            if live and managed and (host["host_id"], r["model_id"]) not in placed:
                changed.add(host["host_id"])
    return changed


def _shown_hosts(text: str, ids: list[str]) -> set[str]:
    return {h for h in ids if re.search(rf"^\s+{re.escape(h)}\s", text, re.M)}


def test_large_plan_folds_unchanged_hosts_and_all_hosts_lists_them() -> None:
    snapshot = json.loads(FLEET64.read_text())
    ids = [h["host_id"] for h in snapshot["hosts"]]
    plan = json.loads(_plan(FLEET64, "--json"))
    text = _plan(FLEET64)
    shown = _shown_hosts(text, ids)
    assert _changed_hosts(snapshot, plan) <= shown
    folded = re.search(r"(\d+) more hosts? unchanged", text)
    assert folded is not None and int(folded.group(1)) == len(ids) - len(shown) > 0
    assert _shown_hosts(_plan(FLEET64, "--all-hosts"), ids) == set(ids)


def test_unmet_only_lists_every_unmet_model_and_no_hosts_table() -> None:
    plan = json.loads(_plan(FLEET64, "--json"))
    assert plan["unsatisfied"]
    text = _plan(FLEET64, "--unmet-only")
    assert "Hosts" not in text and "Unmet replicas" in text and "Solver:" in text
    for u in plan["unsatisfied"]:
        assert u["model_id"] in text
    missing = sum(u["missing_replicas"] for u in plan["unsatisfied"])
    assert f"{missing} unmet" in text


def test_plurals_in_a_one_replica_plan(tmp_path: Path) -> None:
    fleet = {
        "schema_version": 1,
        "hosts": [{"host_id": "h1", "capacity_mb": 4096}],
        "models": [{"model_id": "m1", "memory_mb": 1024, "min_replicas": 1}],
    }
    path = tmp_path / "one.json"
    path.write_text(json.dumps(fleet))
    text = _plan(path)
    assert "Plan: 1 replica (0 existing, 1 new), 0 unmet, 0 preemptions" in text
    assert "1 replicas" not in text and "(s)" not in text


def test_a_fleet_without_hosts_prints_no_empty_box(tmp_path: Path) -> None:
    path = tmp_path / "models-only.json"
    fleet = {"schema_version": 1, "models": [{"model_id": "m", "memory_mb": 10, "min_replicas": 1}]}
    path.write_text(json.dumps(fleet))
    text = _plan(path)
    assert "Hosts: none in the snapshot" in text
    assert "┏" not in text and "───" not in text.split("Unmet replicas")[0]
