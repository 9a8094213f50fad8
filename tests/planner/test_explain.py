"""explain_unsatisfied: codes, binding constraints with hosts and amounts, and would_fit_if.

Fleets are hand-written so that every expected amount follows from the numbers in the test
(headroom is zero unless a test says otherwise). Placements come from the CP-SAT engine.
"""

from __future__ import annotations

import pytest

from grid.fleet.models import FleetSnapshot, Preemption, Unsatisfied
from grid.planner import explain_bindings
from grid.planner.cpsat.solve import solve_lexicographic
from grid.planner.explain import explain_unsatisfied
from grid.planner.levels import placed_counts
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from tests.planner.cpsat_support import random_fleet
from tests.planner.fleets import host, model, resident, snapshot, want

pytestmark = pytest.mark.unit

Key = tuple[str, str]
NO_HEADROOM = {"memory_headroom_fraction": 0.0}


def _explain(
    snap: FleetSnapshot, preemptions: list[Preemption] | None = None
) -> tuple[PlacementProblem, set[Key], list[Unsatisfied]]:
    problem = build_problem(snap)
    result = solve_lexicographic(problem, hints=[set()], time_limit_s=20, deterministic=True)
    assert result.placed is not None
    return problem, result.placed, explain_unsatisfied(problem, result.placed, preemptions or [])


def _only(entries: list[Unsatisfied], model_id: str) -> Unsatisfied:
    mine = [u for u in entries if u.model_id == model_id]
    assert len(mine) == 1, mine
    return mine[0]


def test_memory_binding_names_the_host_and_the_amounts() -> None:
    snap = snapshot(
        [host("gpu-01", 10000)],
        [model("chat", 4000, priority=100), model("coder", 8000)],
        {"chat": want(1), "coder": want(1)},
        NO_HEADROOM,
    )
    _problem, placed, entries = _explain(snap)
    assert placed == {("chat", "gpu-01")}, "the higher priority keeps the host"
    entry = _only(entries, "coder")
    assert entry.code == "insufficient_capacity"
    assert entry.missing_replicas == 1
    memory = [b for b in entry.binding if b.constraint == "memory"]
    assert [(b.host_id, b.detail) for b in memory] == [("gpu-01", "needs 8000 MB, 6000 MB free")]
    assert any(b.constraint == "higher_priority" and "chat" in b.detail for b in entry.binding)
    assert entry.would_fit_if == "gpu-01 had 2000 MB more free memory"
    assert "gpu-01" in entry.message


def test_live_memory_binding_counts_a_draining_process() -> None:
    snap = snapshot(
        [host("h", 10000, residencies=[resident("old", 7000, state="draining")])],
        [model("new", 4000), model("old", 7000, max_replicas=0)],
        {"new": want(1)},
        NO_HEADROOM,
    )
    _problem, placed, entries = _explain(snap)
    assert placed == set()
    entry = _only(entries, "new")
    assert [(b.constraint, b.host_id) for b in entry.binding] == [("live_memory", "h")]
    assert "needs 4000 MB" in entry.binding[0].detail and "3000 MB" in entry.binding[0].detail
    assert entry.would_fit_if == "h had 1000 MB more memory free right now"


def test_a_pin_to_a_missing_host_is_reported_and_never_substituted() -> None:
    snap = snapshot(
        [host("gpu-01", 64000)],
        [model("coder", 4000, pinned_hosts=["gpu-09"])],
    )
    _problem, placed, entries = _explain(snap)
    assert placed == set(), "gpu-01 has room but the replica belongs to gpu-09"
    entry = _only(entries, "coder")
    assert (entry.code, entry.host_id, entry.missing_replicas) == (
        "pinned_host_unavailable",
        "gpu-09",
        1,
    )
    assert "gpu-09" in entry.would_fit_if


def test_a_pin_to_a_draining_host_is_unavailable_with_the_reason() -> None:
    snap = snapshot(
        [host("gpu-01", 64000, state="draining"), host("gpu-02", 64000)],
        [model("coder", 4000, pinned_hosts=["gpu-01"])],
    )
    _problem, placed, entries = _explain(snap)
    assert placed == set()
    entry = _only(entries, "coder")
    assert (entry.code, entry.host_id) == ("pinned_host_unavailable", "gpu-01")
    assert [b.constraint for b in entry.binding] == ["host_not_admitting"]
    assert "accepting work" in entry.would_fit_if


def test_a_full_pinned_host_is_insufficient_with_its_binding() -> None:
    # both models are pinned to one 6,000 MB host; the higher priority wins it
    snap = snapshot(
        [host("h", 6000)],
        [
            model("vip", 4000, priority=100, pinned_hosts=["h"]),
            model("low", 4000, pinned_hosts=["h"]),
        ],
        policy=NO_HEADROOM,
    )
    _problem, placed, entries = _explain(snap)
    assert placed == {("vip", "h")}
    entry = _only(entries, "low")
    assert (entry.code, entry.host_id, entry.missing_replicas) == (
        "pinned_host_insufficient",
        "h",
        1,
    )
    assert ("memory", "h") in [(b.constraint, b.host_id) for b in entry.binding]
    assert entry.would_fit_if == "h had 2000 MB more free memory"


def test_a_missing_tag_gives_a_would_fit_if_naming_the_tag() -> None:
    snap = snapshot(
        [host("cpu-01", 64000, tags=["cpu"]), host("cpu-02", 64000)],
        [model("vision", 4000, required_tags=["gpu"])],
        {"vision": want(1)},
    )
    _problem, _placed, entries = _explain(snap)
    entry = _only(entries, "vision")
    assert entry.code == "no_eligible_host"
    assert [b.constraint for b in entry.binding] == ["missing_tag"]
    assert "cpu-01, cpu-02" in entry.binding[0].detail and "'gpu'" in entry.binding[0].detail
    assert "tag 'gpu'" in entry.would_fit_if


def test_a_missing_runtime_gives_a_would_fit_if_naming_the_runtime() -> None:
    snap = snapshot(
        [host("mac-01", 64000)], [model("fast", 4000, runtimes=["vllm"])], {"fast": want(1)}
    )
    _problem, _placed, entries = _explain(snap)
    entry = _only(entries, "fast")
    assert entry.code == "no_eligible_host"
    assert entry.would_fit_if == "mac-01 offered runtime 'vllm'"


def test_the_host_needing_the_smallest_change_is_suggested() -> None:
    # a needs 8,000 MB: h1 keeps 5,000 MB free beside p1, h2 keeps 7,000 MB free beside p2
    snap = snapshot(
        [host("h1", 10000), host("h2", 10000)],
        [
            model("p1", 5000, priority=9, allowed_hosts=["h1"]),
            model("p2", 3000, priority=9, allowed_hosts=["h2"]),
            model("a", 8000),
        ],
        {"p1": want(1), "p2": want(1), "a": want(1)},
        NO_HEADROOM,
    )
    _problem, placed, entries = _explain(snap)
    assert placed == {("p1", "h1"), ("p2", "h2")}
    entry = _only(entries, "a")
    assert entry.would_fit_if == "h2 had 1000 MB more free memory"


def test_headroom_enlarges_the_memory_a_host_would_need() -> None:
    # 10% headroom: h keeps 10,000 − 4,000 − 1,000 = 5,000 MB for new work; a needs 8,000.
    # The desired ledger lacks 2,000 MB; the live one 3,000, i.e. 3,334 MB of raw capacity.
    snap = snapshot(
        [host("h", 10000)],
        [model("p", 4000, priority=9), model("a", 8000)],
        {"p": want(1), "a": want(1)},
        {"memory_headroom_fraction": 0.1},
    )
    _problem, placed, entries = _explain(snap)
    assert placed == {("p", "h")}
    assert _only(entries, "a").would_fit_if == "h had 3334 MB more free memory"


def test_slots_binding_and_would_fit_if() -> None:
    snap = snapshot(
        [host("mac-02", 64000, max_models=1)],
        [model("chat", 4000, priority=5), model("notes", 4000)],
        {"chat": want(1), "notes": want(1)},
    )
    _problem, _placed, entries = _explain(snap)
    entry = _only(entries, "notes")
    assert ("slots", "mac-02") in [(b.constraint, b.host_id) for b in entry.binding]
    assert entry.would_fit_if == "mac-02 allowed one more model"


def test_a_staged_preemption_is_reported_as_such() -> None:
    snap = snapshot(
        [host("h", 8000, residencies=[resident("batch", 6000)])],
        [model("batch", 6000), model("coder", 6000, priority=100)],
        {"batch": want(1), "coder": want(1)},
        NO_HEADROOM,
    )
    problem = build_problem(snap)
    staged = [Preemption(victim_model_id="batch", host_id="h", beneficiary_model_id="coder")]
    entries = explain_unsatisfied(problem, set(), staged)
    entry = _only(entries, "coder")
    assert (entry.code, entry.host_id, entry.missing_replicas) == ("preemption_staged", "h", 1)
    assert "batch" in entry.message


def test_failure_domain_shortfall_when_one_domain_has_every_eligible_host() -> None:
    snap = snapshot(
        [
            host("h1", failure_domain="rack-a", tags=["gpu"]),
            host("h2", failure_domain="rack-a", tags=["gpu"]),
            host("h3", failure_domain="rack-b"),
        ],
        [model("a", max_replicas=2, min_failure_domains=2, required_tags=["gpu"])],
        {"a": want(2)},
    )
    _problem, placed, entries = _explain(snap)
    assert len(placed) == 2
    entry = _only(entries, "a")
    assert (entry.code, entry.missing_replicas) == ("failure_domain_shortfall", 0)
    assert entry.binding[0].constraint == "failure_domain"
    assert "only 1 failure domain" in entry.binding[0].detail


def test_too_few_eligible_hosts_for_the_replicas_asked() -> None:
    snap = snapshot(
        [host("h1", 64000), host("h2", 64000)], [model("a", max_replicas=3)], {"a": want(3)}
    )
    _problem, placed, entries = _explain(snap)
    assert len(placed) == 2
    entry = _only(entries, "a")
    assert (entry.code, entry.missing_replicas) == ("insufficient_capacity", 1)
    assert entry.binding[0].constraint == "eligible_hosts"


def test_without_cpsat_budget_the_static_ledger_still_binds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(explain_bindings, "CPSAT_MODELS", 0)
    snap = snapshot(
        [host("gpu-01", 10000)],
        [model("chat", 4000, priority=100), model("coder", 8000)],
        {"chat": want(1), "coder": want(1)},
        NO_HEADROOM,
    )
    _problem, _placed, entries = _explain(snap)
    entry = _only(entries, "coder")
    assert [(b.constraint, b.host_id, b.detail) for b in entry.binding] == [
        ("memory", "gpu-01", "needs 8000 MB, 6000 MB free"),
        (
            "live_memory",
            "gpu-01",
            "needs 8000 MB free now, 6000 MB free after live models and headroom",
        ),
    ]


@pytest.mark.parametrize("seed", range(20))
def test_missing_replicas_add_up_to_the_shortfall(seed: int) -> None:
    snap = random_fleet(seed, 6, 8)
    problem, placed, entries = _explain(snap)
    counts = placed_counts(problem, placed)
    for profile in problem.models:
        model_id = profile.model_id
        shortfall = max(0, problem.targets[model_id].desired - counts[model_id])
        mine = [u for u in entries if u.model_id == model_id]
        missing = sum(u.missing_replicas for u in mine if u.code != "failure_domain_shortfall")
        assert missing == shortfall, (model_id, mine)
        placed_hosts = {h for m, h in placed if m == model_id}
        for pin in profile.pinned_hosts:
            if pin not in placed_hosts:
                assert any(u.code.startswith("pinned") and u.host_id == pin for u in mine)
    for entry in entries:
        assert entry.message.endswith(".") and ". " not in entry.message, entry.message
        assert entry.would_fit_if, entry
        if entry.code in ("insufficient_capacity", "no_eligible_host", "pinned_host_insufficient"):
            assert entry.binding, entry
