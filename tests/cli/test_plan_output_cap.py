"""`grid plan`'s Rich view lists at most LIST_HOSTS_MAX changed hosts (issue 12: 10,000 new
hosts were 22,000 lines and 3 s of layout inside the time limit); --all-hosts lists every one.
The oracle is the plan's JSON document read independently (tests/cli/test_plan_output.py).
The view's cost is part of the reserve the planner keeps after the solve."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grid.cli import render
from grid.cli.main import app
from grid.cli.plan_cmd import output_s
from grid.fleet.models import LIVE_STATES
from grid.planner.deadline import post_solve_reserve_s
from tests.cli.test_plan_output import _shown_hosts

pytestmark = [pytest.mark.unit]

REPO = Path(__file__).resolve().parents[2]
FLEET64 = REPO / "models" / "fleets" / "fleet-64.json"
ARGS = ["--engine", "heuristic", "--time-limit", "20"]


def _plan(*extra: str) -> str:
    result = CliRunner().invoke(app, ["plan", str(FLEET64), *ARGS, *extra], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.stdout


def _listed(snapshot: dict[str, Any], plan: dict[str, Any]) -> set[str]:
    """Hosts the view lists: a new replica, a managed residency in a live state (failed ones
    included) that the plan does not keep, or a host neither ready nor throttled (it refuses
    new work: paused, draining, unhealthy, ...)."""
    listed = {a["host_id"] for a in plan["assignments"] if not a["existing"]}
    placed = {(a["host_id"], a["model_id"]) for a in plan["assignments"]}
    live = {state.value for state in LIVE_STATES}
    for host in snapshot["hosts"]:
        if host.get("state", "ready") not in ("ready", "throttled"):
            listed.add(host["host_id"])
        for r in host.get("residencies", []):
            managed = r.get("managed", True) and r.get("ownership") in (None, "managed")
            gone = (host["host_id"], r["model_id"]) not in placed
            if r.get("state", "ready") in live and managed and gone:
                listed.add(host["host_id"])
    return listed


def test_a_plan_with_more_changed_hosts_than_the_cap_lists_the_first_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = json.loads(FLEET64.read_text())
    ids = sorted(h["host_id"] for h in snapshot["hosts"])
    listed = _listed(snapshot, json.loads(_plan("--json")))
    assert _shown_hosts(_plan(), ids) == listed  # under the cap: every one of them
    cap = 5
    assert len(listed) > cap
    monkeypatch.setattr(render, "LIST_HOSTS_MAX", cap)
    text = _plan()
    assert _shown_hosts(text, ids) == set(sorted(listed)[:cap])  # the first, by host ID
    cut = re.search(r"(\d+) more hosts? with changes or refusals", text)
    assert cut is not None and int(cut.group(1)) == len(listed) - cap
    folded = re.search(r"(\d+) more hosts? unchanged", text)
    assert folded is not None and int(folded.group(1)) == len(ids) - len(listed)
    assert _shown_hosts(_plan("--all-hosts"), ids) == set(ids)


def test_the_rich_view_is_kept_out_of_the_solve_with_its_own_cost() -> None:
    # hand-worked from the documented figures: JSON 0.05 s + 30 us per host, the Rich view
    # 0.1 ms per host more (0.4 ms with --all-hosts), --unmet-only prints no hosts table
    assert output_s(10_000, True, False, False) == pytest.approx(0.05 + 0.3)
    assert output_s(10_000, False, True, False) == pytest.approx(0.05 + 0.3)
    assert output_s(10_000, False, False, False) == pytest.approx(0.05 + 0.3 + 1.0)
    assert output_s(10_000, False, False, True) == pytest.approx(0.05 + 0.3 + 4.0)
    # the planner's reserve takes the caller's figure instead of the JSON document's
    assert post_solve_reserve_s(0, output_s=2.0) == pytest.approx(0.12 + 0.02 + 2.0)
