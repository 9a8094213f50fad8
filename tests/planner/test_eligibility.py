"""Hard eligibility filters: each reason code, from the host, the pair and the problem builder."""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.models import FleetSnapshot
from grid.planner.eligibility import (
    REASON_TEXT,
    compatible_runtimes,
    explain_reasons,
    host_refusals,
    pair_refusals,
)
from grid.planner.problem_build import build_problem
from tests.planner.fleets import NOW, host, model, resident, snapshot, want

pytestmark = pytest.mark.unit


def _one(host_fields: dict[str, Any], model_fields: dict[str, Any] | None = None) -> FleetSnapshot:
    return snapshot(
        [host("h", **host_fields)], [model("m", **(model_fields or {}))], {"m": want(1)}
    )


def _host_codes(**fields: Any) -> list[str]:
    snap = _one(fields)
    return host_refusals(snap.hosts[0], snap)


def _pair_codes(
    host_fields: dict[str, Any], model_fields: dict[str, Any], cached: bool = False
) -> list[str]:
    snap = _one(host_fields, model_fields)
    return pair_refusals(snap.models[0], snap.hosts[0], cached=cached)


def test_a_plain_fresh_accepting_host_is_eligible() -> None:
    assert _host_codes() == []
    assert _pair_codes({}, {}) == []


@pytest.mark.parametrize("state", ["draining", "paused", "unhealthy", "quarantined"])
def test_only_accepting_and_throttled_hosts_take_new_work(state: str) -> None:
    assert _host_codes(state=state) == ["host_not_admitting"]


def test_throttled_host_still_admits() -> None:
    assert _host_codes(state="throttled", throttle_fraction=0.5) == []


def test_missing_heartbeat() -> None:
    snap = _one({})
    snap.hosts[0].last_heartbeat = None  # the controller path: a host never heard from
    assert host_refusals(snap.hosts[0], snap) == ["heartbeat_missing"]


@pytest.mark.parametrize(
    ("offset", "codes"),
    [
        (-90.0, []),  # exactly the 90 s staleness limit: still fresh
        (-90.5, ["heartbeat_stale"]),
        (-3600.0, ["heartbeat_stale"]),
        (30.0, []),  # exactly the 30 s future skew: tolerated
        (30.5, ["heartbeat_future"]),
        (86400.0, ["heartbeat_future"]),
    ],
)
def test_heartbeat_freshness(offset: float, codes: list[str]) -> None:
    assert _host_codes(last_heartbeat=NOW + offset) == codes


def test_policy_sets_heartbeat_limits() -> None:
    snap = snapshot(
        [host("h", last_heartbeat=NOW - 20)],
        [model("m")],
        policy={"heartbeat_stale_s": 10.0},
    )
    assert host_refusals(snap.hosts[0], snap) == ["heartbeat_stale"]


def test_manual_host_takes_no_placement() -> None:
    assert _host_codes(ownership="manual") == ["host_manual"]


def test_refusals_accumulate() -> None:
    codes = _host_codes(state="paused", ownership="manual", last_heartbeat=NOW - 1000)
    assert set(codes) == {"host_not_admitting", "heartbeat_stale", "host_manual"}


@pytest.mark.parametrize(
    ("host_fields", "model_fields", "code"),
    [
        ({"runtimes": ["vllm"]}, {"runtimes": ["llama.cpp"]}, "runtime_mismatch"),
        ({"backends": ["metal"]}, {"backends": ["cuda"]}, "backend_mismatch"),
        ({"data_tiers": ["public"]}, {"data_tier": "internal"}, "data_tier"),
        ({"tags": ["laptop"]}, {"required_tags": ["server"]}, "missing_tag"),
        ({"tags": ["laptop", "gpu"]}, {"forbidden_tags": ["laptop"]}, "forbidden_tag"),
        ({}, {"allowed_hosts": ["other"]}, "host_not_allowed"),
        ({}, {"denied_hosts": ["h"]}, "host_denied"),
        ({"actuator_capabilities": ["warm", "drain", "unload"]}, {}, "actuator_missing"),
    ],
)
def test_each_pair_refusal_code(
    host_fields: dict[str, Any], model_fields: dict[str, Any], code: str
) -> None:
    assert _pair_codes(host_fields, model_fields) == [code]
    assert code in REASON_TEXT


@pytest.mark.parametrize(
    ("host_fields", "model_fields"),
    [
        ({"backends": []}, {"backends": []}),  # empty model list: any backend
        ({"backends": ["cuda", "cpu"]}, {"backends": ["cpu"]}),
        ({"tags": ["server", "gpu"]}, {"required_tags": ["gpu"], "forbidden_tags": ["laptop"]}),
        ({}, {"allowed_hosts": ["h"], "denied_hosts": ["other"]}),
        ({"runtimes": ["vllm", "llama.cpp"]}, {"runtimes": ["llama.cpp"]}),
        ({"data_tiers": ["restricted"]}, {"data_tier": "restricted"}),
    ],
)
def test_compatible_pairs_pass(host_fields: dict[str, Any], model_fields: dict[str, Any]) -> None:
    assert _pair_codes(host_fields, model_fields) == []


def test_cached_weights_only_need_the_warm_capability() -> None:
    fields = {"actuator_capabilities": ["warm"]}
    assert _pair_codes(fields, {}, cached=True) == []
    assert _pair_codes(fields, {}, cached=False) == ["actuator_missing"]


def test_compatible_runtimes_is_the_sorted_intersection() -> None:
    snap = _one({"runtimes": ["vllm", "mlx", "llama.cpp"]}, {"runtimes": ["vllm", "llama.cpp"]})
    assert compatible_runtimes(snap.models[0], snap.hosts[0]) == ["llama.cpp", "vllm"]
    snap = _one({"runtimes": ["vllm", "mlx"]}, {"runtimes": []})
    assert compatible_runtimes(snap.models[0], snap.hosts[0]) == ["mlx", "vllm"]


def test_explain_reasons_gives_sentences() -> None:
    text = explain_reasons(["heartbeat_stale", "data_tier"])
    assert REASON_TEXT["heartbeat_stale"] in text and REASON_TEXT["data_tier"] in text


# ---------------------------------------------------------------- problem-level reason codes


def test_host_refusals_reach_the_problem() -> None:
    snap = _one({"state": "paused"})
    problem = build_problem(snap)
    assert problem.candidates == {}
    assert problem.refusals[("m", "h")] == ["host_not_admitting"]


def test_model_without_desired_replicas_is_not_a_candidate() -> None:
    snap = snapshot([host("h")], [model("m")])
    assert build_problem(snap).refusals[("m", "h")] == ["not_desired"]


@pytest.mark.parametrize(
    "residency",
    [
        resident("m", 4096, state="draining"),
        resident("m", 4096, state="failed"),
        resident("m", 4096, managed=False),
        resident("m", 4096, ownership="manual"),
        resident("m", 4096, artifact_sha256="b" * 64),  # another revision of the weights
        resident("m", 4096, runtime="vllm"),  # a runtime the profile does not allow
    ],
)
def test_live_copy_that_cannot_be_reused_blocks_a_second_copy(residency: dict[str, Any]) -> None:
    snap = snapshot(
        [host("h", runtimes=["llama.cpp", "vllm"], residencies=[residency])],
        [model("m", artifact_sha256="a" * 64, runtimes=["llama.cpp"])],
        {"m": want(1)},
    )
    assert "residency_not_reusable" in build_problem(snap).refusals[("m", "h")]


def test_reusable_incumbent_is_a_zero_increment_candidate() -> None:
    snap = snapshot(
        [host("h", residencies=[resident("m", 5000, artifact_sha256="a" * 64)])],
        [model("m", 4096, artifact_sha256="a" * 64)],
        {"m": want(1)},
    )
    cand = build_problem(snap).candidates[("m", "h")]
    assert cand.incumbent is not None and cand.new_mb == 0
    assert cand.memory_mb == 5000, "never less than the incumbent's reported memory"


def test_exclusion_with_a_live_model_is_static() -> None:
    snap = snapshot(
        [host("h", residencies=[resident("other", 1024)])],
        [model("m"), model("other", 1024, colocation_excludes=["m"])],  # declared by one side
        {"m": want(1), "other": want(1)},
    )
    assert build_problem(snap).refusals[("m", "h")] == ["colocation_excluded"]


@pytest.mark.parametrize(
    ("host_fields", "profiles"),
    [
        ({"max_models": 1, "residencies": [resident("other", 1024)]}, []),
        (
            {"residencies": [resident("other", 1024)]},
            [model("other", 1024, max_colocated_models=1)],
        ),
    ],
)
def test_full_slots_or_ceiling_refuse_new_models(
    host_fields: dict[str, Any], profiles: list[dict[str, Any]]
) -> None:
    models = [model("m"), *(profiles or [model("other", 1024)])]
    snap = snapshot([host("h", **host_fields)], models, {"m": want(1), "other": want(1)})
    problem = build_problem(snap)
    assert problem.refusals[("m", "h")] == ["colocation_or_slots_full"]
    assert ("other", "h") in problem.candidates, "the incumbent itself stays a candidate"


def test_pair_refusals_accumulate_sorted_and_unique() -> None:
    snap = _one(
        {"runtimes": ["vllm"], "tags": ["laptop"], "max_models": 1, "residencies": []},
        {"runtimes": ["llama.cpp"], "forbidden_tags": ["laptop"], "denied_hosts": ["h"]},
    )
    codes = build_problem(snap).refusals[("m", "h")]
    assert codes == sorted(set(codes))
    assert set(codes) == {"runtime_mismatch", "forbidden_tag", "host_denied"}


def test_host_refusals_stand_for_the_whole_host() -> None:
    snap = _one(
        {"state": "paused", "last_heartbeat": NOW - 500, "runtimes": ["vllm"]},
        {"runtimes": ["llama.cpp"]},
    )
    codes = build_problem(snap).refusals[("m", "h")]
    assert {"host_not_admitting", "heartbeat_stale"} <= set(codes)
