"""`grid allocator status` shows the workload side: admission rows, candidates, learned edges."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from grid.cli.allocator_cmd import render_status
from grid.demand import Observation
from grid.fleet.operator import StatusDocument
from grid.router.affinity import hash_affinity_key
from tests.runtime.controller.harness import T0, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit


def test_status_renders_admission_candidates_and_learned_edges(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [FakeNode("h1")])
    ctl = fleet.ctl
    ctl.put_profile("coder", profile(memory_mb=2048, workload_scores={"coding": 1.0}), T0)
    fleet.register_all()
    key = hash_affinity_key("session-1")
    assert key is not None
    t = T0
    for _ in range(5):  # research then coding, five times: research -> coding is learned
        for word in ("research", "coding"):
            obs = Observation(model_id="auto", workload=word, service_time_s=5.0, timestamp=t + 5)
            ctl.observe_request(obs, t + 5, affinity_digest=key.digest)
            t += 6
    fleet.now = t
    assert ctl.tick(t).ok
    doc = ctl.status(t).model_dump(mode="json")  # as the CLI receives it
    section = doc["workloads"]
    assert section["portfolio"]["mapping"] == {"coding": "coder"}
    assert section["edges"] == [
        {"source": "research", "target": "coding", "count": 5, "departures": 5, "confidence": 1.0}
    ]
    console = Console(width=240, record=True)
    console.print(render_status(StatusDocument.model_validate(doc)))
    text = console.export_text()
    assert "Workload admission" in text and "Portfolio candidates" in text
    assert "Learned workflows" in text
    coding_rows = [line for line in text.splitlines() if line.strip().startswith("coding")]
    assert any("coder" in line for line in coding_rows)
    edge = next(line for line in text.splitlines() if "research" in line and "1.00" in line)
    assert "coding" in edge
