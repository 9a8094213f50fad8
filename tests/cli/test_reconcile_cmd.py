"""`grid reconcile` on the hand-written example snapshots: the same decisions as the unit tests.

The command function is mounted on a tiny Typer app here (the lead wires it into `grid`).
Each example is planned by the real planner; the assertions name kinds, codes and dependencies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from grid.cli.reconcile_cmd import reconcile

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[2] / "models" / "reconcile"
NOW = 1_785_300_000.0
runner = CliRunner()
app = typer.Typer(add_completion=False)
app.command()(reconcile)


def run_json(name: str, *extra: str, engine: str = "heuristic") -> dict[str, Any]:
    result = runner.invoke(
        app, [str(EXAMPLES / name), "--json", "--engine", engine, *extra], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)  # exactly one JSON document
    return doc


def moves(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(a["kind"], a["host_id"], a["model_id"]) for a in doc["actions"]]


def codes(doc: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    return {(d["kind"], d["host_id"], d["model_id"]): d["code"] for d in doc["deferred"]}


def test_json_document_follows_the_contract() -> None:
    doc = run_json("uncached-load-warm.json")
    assert set(doc) >= {"actions", "deferred", "plan"}
    for action in doc["actions"]:
        assert set(action) >= {
            "action_id",
            "kind",
            "host_id",
            "model_id",
            "memory_mb",
            "dependencies",
            "reason",
            "not_before",
        }
    assert doc["plan"]["schema_version"] == 1 and doc["plan"]["assignments"]


def test_uncached_target_loads_then_warms() -> None:
    doc = run_json("uncached-load-warm.json")
    assert moves(doc) == [("load", "gpu-01", "coder"), ("warm", "gpu-01", "coder")]
    load, warm = doc["actions"]
    assert warm["dependencies"] == [load["action_id"]]
    assert load["not_before"] == NOW and not load["executable"]


def test_last_ready_replica_waits_for_its_replacement() -> None:
    doc = run_json("replacement-warming.json")
    assert moves(doc) == [("warm", "gpu-02", "coder")]
    assert codes(doc) == {("drain", "gpu-01", "coder"): "replacement_not_ready"}


def test_ready_replacement_on_a_paused_host_does_not_count() -> None:
    doc = run_json("paused-replacement.json")
    assert ("warm", "gpu-03", "coder") in moves(doc)
    assert ("drain", "gpu-02", "coder") in moves(doc)  # the paused copy serves nobody
    assert codes(doc)[("drain", "gpu-01", "coder")] == "replacement_not_ready"


def test_busy_draining_residency_defers_unload() -> None:
    doc = run_json("draining-busy.json")
    assert moves(doc) == [("unload", "gpu-01", "idle")]
    assert codes(doc) == {("unload", "gpu-01", "batch"): "requests_in_flight"}


def test_future_loaded_at_counts_as_age_zero() -> None:
    doc = run_json("future-loaded-at.json")
    assert doc["actions"] == []
    (deferral,) = doc["deferred"]
    assert deferral["code"] == "minimum_residency"
    assert deferral["retry_at"] == NOW + 300.0


def test_failed_load_waits_for_its_backoff() -> None:
    doc = run_json("failed-retry.json")
    assert doc["actions"] == []
    deferred = {d["kind"]: d for d in doc["deferred"]}
    assert deferred["load"]["code"] == "backoff" and deferred["load"]["retry_at"] == NOW + 10.0
    assert deferred["warm"]["code"] == "dependency_deferred"


def test_tombstone_drains_the_returning_host() -> None:
    doc = run_json("tombstone-returning-host.json")
    assert moves(doc) == [("drain", "laptop-7", "legacy")]


def test_pending_drain_with_a_failed_replacement_withdraws_the_batch() -> None:
    doc = run_json("pending-drain-withdrawn.json", "--mode", "automatic")
    withdrawn = {w["action_id"]: w for w in doc["withdrawn"]}
    assert set(withdrawn) == {"drain-gpu01-coder", "unload-gpu04-coder"}
    assert withdrawn["drain-gpu01-coder"]["delivered"] is True
    assert {w["code"] for w in withdrawn.values()} == {"unsafe_destructive_batch"}
    assert doc["blocked_models"] == ["coder"]
    assert codes(doc) == {
        ("drain", "gpu-01", "coder"): "replacement_not_ready",
        ("unload", "gpu-04", "coder"): "destructive_batch_withdrawn",
        ("unload", "gpu-02", "coder"): "destructive_blocked",  # the failed copy waits too
    }
    assert moves(doc) == [("warm", "gpu-03", "coder")]
    assert all(a["executable"] for a in doc["actions"])


def test_observe_mode_emits_no_actions() -> None:
    doc = run_json("uncached-load-warm.json", "--mode", "observe")
    assert doc["actions"] == [] and doc["mode"] == "observe"
    assert set(codes(doc).values()) == {"observe_mode"}
    assert len(doc["deferred"]) == 2


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_cpsat_and_heuristic_plans_lead_to_the_same_decisions(name: str) -> None:
    fast, solved = run_json(name), run_json(name, engine="cpsat")
    assert moves(fast) == moves(solved)
    assert codes(fast) == codes(solved)


def test_rich_view_lists_actions_and_deferral_codes() -> None:
    result = runner.invoke(
        app,
        [str(EXAMPLES / "replacement-warming.json"), "--engine", "heuristic"],
        env={"COLUMNS": "220"},
    )
    assert result.exit_code == 0, result.output
    assert "warm" in result.stdout and "replacement_not_ready" in result.stdout
    assert "recommended (not executed)" in result.stdout


def test_unknown_mode_is_a_refusal() -> None:
    result = runner.invoke(app, [str(EXAMPLES / "uncached-load-warm.json"), "--mode", "yolo"])
    assert result.exit_code == 2
    assert "unknown_mode" in result.stderr and result.stdout == ""


def test_missing_file_is_a_refusal() -> None:
    result = runner.invoke(app, ["/nonexistent/fleet.json", "--json"])
    assert result.exit_code == 2 and "file_not_found" in result.stderr


def test_bad_history_entry_names_its_path(tmp_path: Path) -> None:
    doc = json.loads((EXAMPLES / "failed-retry.json").read_text())
    doc["history"][0]["kind"] = "teleport"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    result = runner.invoke(app, [str(bad), "--json", "--engine", "heuristic"])
    assert result.exit_code == 2
    assert "invalid_history" in result.stderr and "history[0].kind" in result.stderr


@pytest.mark.parametrize("engine", ["heuristic", "cpsat"])
def test_repack_moves_the_incumbent_before_freeing_the_gpu_host(engine: str) -> None:
    doc = run_json("repack.json", "--mode", "automatic", engine=engine)
    assert ("warm", "spare", "flex") in moves(doc)
    assert not any(kind == "drain" for kind, _h, _m in moves(doc))
    deferred = codes(doc)
    assert deferred[("drain", "gpu-1", "flex")] == "replacement_not_ready"
    assert deferred[("warm", "gpu-1", "vision")] == "repack_staged"
    [move] = doc["plan"]["preemptions"]
    assert move["relocated_to"] == "spare"


PLANS = EXAMPLES / "plans"


def test_stale_plan_preemption_never_drains_a_manual_hosts_residency() -> None:
    # Regression (issue 8, defect 1): the stored plan was made while desk-1 was still managed
    # and names its residency as a preemption victim; desk-1 is manual now. Cleanup refused the
    # same residency, preemption drained it.
    doc = run_json(
        "manual-host-preemption.json",
        "--mode",
        "automatic",
        "--plan",
        str(PLANS / "manual-host-preemption.plan.json"),
    )
    assert doc["plan"]["preemptions"][0]["host_id"] == "desk-1"  # the stored plan, not a new one
    assert not any(host == "desk-1" for _kind, host, _model in moves(doc))
    assert codes(doc)[("drain", "desk-1", "batch")] == "host_manual"


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (None, "plan_not_found"),
        ("{not json", "plan_not_json"),
        ("[1, 2]", "plan_invalid"),
        ('{"schema_version": 1, "assignments": [{"model_id": "m"}]}', "plan_invalid"),
        (
            '{"schema_version": 7, "solver": {"engine": "x", "status": "y", "wall_ms": 0}}',
            "plan_invalid",
        ),
    ],
)
def test_bad_plan_file_is_a_clear_refusal(tmp_path: Path, content: str | None, code: str) -> None:
    path = tmp_path / "plan.json"
    if content is not None:
        path.write_text(content)
    snapshot = EXAMPLES / "uncached-load-warm.json"
    result = runner.invoke(app, [str(snapshot), "--json", "--plan", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert f"[{code}]" in result.stderr
    assert "To fix:" in result.stderr
    assert f"Next: grid plan {snapshot} --json > {path}" in result.stderr
    assert "Traceback" not in result.stderr


def test_stored_plan_round_trips_through_the_cli(tmp_path: Path) -> None:
    fresh = run_json("replacement-warming.json")
    stored = tmp_path / "plan.json"
    stored.write_text(json.dumps(fresh["plan"]))
    replayed = run_json("replacement-warming.json", "--plan", str(stored))
    assert moves(replayed) == moves(fresh) and codes(replayed) == codes(fresh)
