"""`grid test demo` on the logical fleet with real llama.cpp: every step of the focused flow.

Baseline SmolLM2 READY and answering; three users' genuine coding requests as `auto` get
honest 503s; after the evidence gate the allocator itself loads and warms the coding candidate
(gemma-3-270m, workload score coding=1) with no request naming it and no injected demand; a
named call then returns real output; the report lists the residency transitions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.lab.logical_fleet import LogicalFleet
from grid.node.agent.config import CatalogEntry
from tests.service.harness import free_port

pytestmark = pytest.mark.engine


def test_demo_loads_the_coding_candidate_from_auto_requests_alone(
    tmp_path: Path, llama_server: Path, smollm2_entry: CatalogEntry, gemma_entry: CatalogEntry
) -> None:
    run_dir = tmp_path / "demo"
    try:
        result = CliRunner().invoke(
            app,
            [
                "test",
                "demo",
                "--run-dir",
                str(run_dir),
                "--port",
                str(free_port()),
                "--engine-port-base",
                "39800",
                "--timeout-seconds",
                "90",
                "--json",
            ],
            catch_exceptions=False,
        )
    finally:
        LogicalFleet(run_dir).stop(timeout_s=30)  # also when the demo failed half-way
    # stdout holds exactly the JSON report (warnings and logs go to stderr)
    assert result.stdout.lstrip().startswith("{"), result.output[-3000:]
    report: dict[str, Any] = json.loads(result.stdout)
    steps = {s["step"]: s for s in report["steps"]}
    dump = json.dumps(report, indent=1)[-4000:]
    assert result.exit_code == 0 and report["ok"], dump

    baseline = steps["baseline_ready_and_answering"]
    assert baseline["status"] == 200 and baseline["text"].strip()

    replies = steps["auto_coding_requests_get_honest_503s"]["replies"]
    assert [r["user"] for r in replies] == ["user-1", "user-2", "user-3"]
    for reply in replies:
        assert (reply["status"], reply["code"]) == (503, "workload_preparing")
        assert reply["preparing"]["workload"] == "coding"
        # Before a plan has a portfolio it says so; once one has, it names the candidate it
        # prepares, still below the evidence gate (which of the two depends on tick timing).
        preparing = reply["preparing"]
        if preparing["model_id"] is None:
            assert preparing["state"] == "awaiting-plan"
            assert preparing["reason"].startswith("awaiting_plan")
        else:
            assert preparing["model_id"] == "gemma-3-270m"
            assert preparing["reason"].startswith("below_evidence_gate")

    loaded = steps["allocator_loads_the_coding_candidate"]
    assert loaded["ready_hosts"]
    assert {c["kind"] for c in loaded["commands"]} <= {"load", "warm"}
    assert all(c["status"] == "succeeded" for c in loaded["commands"])

    named = steps["named_call_returns_real_output"]
    assert named["status"] == 200 and named["text"].strip()
    served = steps["auto_coding_request_is_served_by_the_candidate"]
    assert (served["status"], served["served_model"]) == (200, "gemma-3-270m")

    personas = steps["personas_served_by_both_models"]
    rows = personas["requests"]
    assert {r["model_id"] for r in rows} == {"smollm2-135m", "gemma-3-270m"}
    assert len({r["user"] for r in rows}) == 3
    for row in rows:
        assert row["status"] == 200 and row["text"].strip() and row["response_id"]
        assert row["usage"]["completion_tokens"] > 0 and row["latency_s"] > 0
    # Per-node performance samples: the proxy's measurements reached the planning snapshot.
    for model_id in ("smollm2-135m", "gemma-3-270m"):
        assert all(rate > 0 for rate in personas["performance_samples"][model_id].values())

    assert report["mapping"] == {"coding": "gemma-3-270m"}
    # The auto request served by the candidate is outcome evidence keyed by the serving
    # residency's artifact revision (the node reports it; the router carries it).
    evidence = {(o["model_id"], o["workload"]): o for o in report["outcomes"]}
    assert evidence[("gemma-3-270m", "coding")]["artifact_sha256"] == gemma_entry.sha256
    assert evidence[("gemma-3-270m", "coding")]["requests"] >= 1
    gemma = [t for t in report["transitions"] if t["model_id"] == "gemma-3-270m"]
    assert gemma[0]["before"] is None and gemma[-1]["after"] == "ready"
    # The candidate's first residency appeared only after the three 503s were answered: the
    # transitions are in time order and SmolLM2 was READY first.
    smol_ready = next(
        t["at_s"]
        for t in report["transitions"]
        if t["model_id"] == "smollm2-135m" and t["after"] == "ready"
    )
    assert gemma[0]["at_s"] > smol_ready
    assert report["stopped"]["leftover"] == []
