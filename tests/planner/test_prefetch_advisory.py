"""Cache-only advisories of the authoritative plan (grid/planner/prefetch), against hand-worked
values: which prediction gets the one advisory, on which host, and what is refused with a code.

Value of a transfer = confidence x pressure x min(transfer s, lead s) (docs/predictive-cache.md);
it ranks by that value per artifact MB. Every number below is worked by hand in the comment.
"""

from __future__ import annotations

from typing import Any

import pytest

import grid.planner.prefetch.advise as advise
from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.plan import make_plan

pytestmark = pytest.mark.unit

NOW = 1_785_300_000.0
SHA = {name: f"{i:064x}" for i, name in enumerate(["video", "image", "big", "small", "coder"], 1)}
ALL_KINDS = ["load", "warm", "drain", "unload", "evict"]


def host(host_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "host_id": host_id,
        "capacity_mb": 32768,
        "disk_free_mb": 100_000,
        "last_heartbeat": NOW,
        "actuator_capabilities": ALL_KINDS,
        **fields,
    }


def model(model_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "memory_mb": 8192,
        "artifact_size_mb": 5000,
        "artifact_sha256": SHA.get(model_id),
        "artifact_source": f"hf://owner/repo/{model_id}.gguf",
        "load_estimate_s": 60.0,
        **fields,
    }


def prediction(model_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "source": "image",
        "target": "video",
        "confidence": 0.8,
        "offered_concurrency": 1.0,
        **fields,
    }


def snapshot(
    hosts: list[dict[str, Any]], models: list[dict[str, Any]], **extra: Any
) -> FleetSnapshot:
    return FleetSnapshot.model_validate({"now": NOW, "hosts": hosts, "models": models, **extra})


def plan(snap: FleetSnapshot) -> Plan:
    return make_plan(snap, engine="heuristic", deterministic=True)


def test_a_workflow_prediction_without_a_slot_gets_one_disk_only_advisory() -> None:
    snap = snapshot(
        [host("h1")],
        [model("video")],
        predictions=[prediction("video", lead_s=20.0)],
    )
    result = plan(snap)
    assert result.assignments == []  # no serving slot: nothing demands the model
    assert result.prefetch is not None
    (adv,) = result.prefetch.advisories
    assert (adv.model_id, adv.host_id, adv.sha256, adv.size_mb) == (
        "video",
        "h1",
        SHA["video"],
        5000,
    )
    assert adv.edge == "image->video" and adv.confidence == 0.8
    # 0.8 x 1.0 x min(60, 20) = 16 s of cold start; per MB 16 / 5000
    assert adv.counted_s == 20.0 and adv.value_s == pytest.approx(16.0)
    assert adv.value_per_mb == pytest.approx(16.0 / 5000)
    assert adv.disk_left_mb == 95_000


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"artifact_sha256": None}, "artifact_unverified"),
        ({"artifact_size_mb": 0}, "artifact_size_unknown"),
        ({"artifact_source": None}, "artifact_source_missing"),
    ],
)
def test_an_artifact_without_sha_size_or_source_is_not_staged(
    fields: dict[str, Any], code: str
) -> None:
    snap = snapshot([host("h1")], [model("video", **fields)], predictions=[prediction("video")])
    report = plan(snap).prefetch
    assert report is not None and report.advisories == []
    assert [(s.model_id, s.code) for s in report.skipped] == [("video", code)]
    assert report.skipped[0].message  # a sentence for status


def test_missing_disk_telemetry_never_authorizes_a_transfer() -> None:
    snap = snapshot(
        [host("blind", disk_free_mb=None)], [model("video")], predictions=[prediction("video")]
    )
    report = plan(snap).prefetch
    assert report is not None and report.advisories == []
    assert ("video", "blind", "no_disk_telemetry") in {
        (s.model_id, s.host_id, s.code) for s in report.skipped
    }


@pytest.mark.parametrize(
    ("reserve_mb", "free_mb", "staged"),
    [
        (10240, 15239, False),  # 15239 - 10240 = 4999 < 5000
        (10240, 15240, True),  # exactly the artifact above the reserve
        (0, 5000, True),  # 0 disables the reserve
        (0, 4999, False),  # ... but the artifact must still fit
        (20000, 30000, True),
        (20000, 24999, False),
    ],
)
def test_predictive_transfers_leave_the_reserve_free(
    reserve_mb: int, free_mb: int, staged: bool
) -> None:
    snap = snapshot(
        [host("h1", disk_free_mb=free_mb)],
        [model("video")],
        predictions=[prediction("video")],
        policy={"predictive_disk_reserve_mb": reserve_mb},
    )
    report = plan(snap).prefetch
    assert report is not None
    assert bool(report.advisories) is staged
    if not staged:
        assert [s.code for s in report.skipped] == ["insufficient_disk"]


def test_the_default_reserve_is_ten_gib() -> None:
    assert FleetSnapshot(now=NOW).policy.predictive_disk_reserve_mb == 10240


def test_transfers_start_from_the_post_assignment_disk_ledger() -> None:
    # The coder is demanded and uncached: its 8000 MB are charged to the only host first, so
    # 20000 - 8000 - 10240 = 1760 MB are left for prediction: the video artifact does not fit.
    snap = snapshot(
        [host("h1", disk_free_mb=20000, capacity_mb=65536)],
        [model("video"), model("coder", artifact_size_mb=8000)],
        demand={"coder": {"offered_concurrency": 1.0, "rpm": 10}},
        predictions=[prediction("video")],
    )
    result = plan(snap)
    assert [(a.model_id, a.host_id) for a in result.assignments] == [("coder", "h1")]
    assert result.prefetch is not None and result.prefetch.advisories == []
    # Cached coder weights are not charged again: then the video transfer fits (20000 - 10240).
    cached = snap.model_copy(
        update={"hosts": [snap.hosts[0].model_copy(update={"cached_models": ["coder"]})]}
    )
    assert [a.model_id for a in plan(cached).prefetch.advisories] == ["video"]  # type: ignore[union-attr]


def test_only_future_compatible_managed_hosts_with_the_load_actuator_qualify() -> None:
    snap = snapshot(
        [
            host("manual", ownership="manual"),
            host("no-load", actuator_capabilities=["warm", "drain", "unload"]),
            host("tiny", capacity_mb=4096),  # raw memory below the model's 8192 MB
            host("wrong-runtime", runtimes=["vllm"]),
            host("down", last_heartbeat=NOW - 3600),
        ],
        [model("video")],
        predictions=[prediction("video")],
    )
    report = plan(snap).prefetch
    assert report is not None and report.advisories == []
    assert [s.code for s in report.skipped] == ["no_compatible_host"]
    ok = snapshot(
        [*(h.model_dump() for h in snap.hosts), host("good")],
        [model("video")],
        predictions=[prediction("video")],
    )
    assert [a.host_id for a in plan(ok).prefetch.advisories] == ["good"]  # type: ignore[union-attr]


def test_a_copy_on_a_compatible_host_already_covers_the_prediction() -> None:
    snap = snapshot(
        [host("h1", cached_models=["video"]), host("h2")],
        [model("video")],
        predictions=[prediction("video")],
    )
    report = plan(snap).prefetch
    assert report is not None and report.advisories == []
    assert [s.code for s in report.skipped] == ["already_cached"]


def test_an_enormous_download_with_little_lead_loses_to_a_smaller_one() -> None:
    # big: 40000 MB, 400 s transfer, lead 5 s: 0.9 x 2 x 5 = 9 s, 9/40000 = 0.000225 per MB.
    # small: 4000 MB, 40 s transfer, lead 30 s: 0.6 x 2 x 30 = 36 s, 36/4000 = 0.009 per MB.
    snap = snapshot(
        [host("h1", disk_free_mb=200_000)],
        [
            model("big", artifact_size_mb=40000, load_estimate_s=400.0),
            model("small", artifact_size_mb=4000, load_estimate_s=40.0),
        ],
        predictions=[
            prediction(
                "big",
                source="image",
                target="video",
                confidence=0.9,
                offered_concurrency=2.0,
                lead_s=5.0,
            ),
            prediction(
                "small",
                source="coding",
                target="embedding",
                confidence=0.6,
                offered_concurrency=2.0,
                lead_s=30.0,
            ),
        ],
    )
    report = plan(snap).prefetch
    assert report is not None
    (adv,) = report.advisories
    assert adv.model_id == "small" and adv.value_s == pytest.approx(36.0)
    assert [(s.model_id, s.code) for s in report.skipped] == [("big", "budget_exhausted")]
    # Without learned timing the whole transfer counts: big 0.9 x 2 x 400 / 40000 = 0.018 per
    # MB beats small 0.6 x 2 x 40 / 4000 = 0.012 per MB.
    unknown = snap.model_copy(
        update={"predictions": [p.model_copy(update={"lead_s": None}) for p in snap.predictions]}
    )
    assert [a.model_id for a in plan(unknown).prefetch.advisories] == ["big"]  # type: ignore[union-attr]


def test_learned_per_host_transfer_time_prices_each_host() -> None:
    # The same artifact is worth more where its transfer is slower: h2 learned 200 s.
    snap = snapshot(
        [host("h1"), host("h2")],
        [model("video")],
        predictions=[prediction("video")],
        learned_startup={"video": {"h2": {"load_s": 200.0}}},
    )
    (adv,) = plan(snap).prefetch.advisories  # type: ignore[union-attr]
    assert adv.host_id == "h2" and adv.transfer_s == 200.0 and adv.value_s == pytest.approx(160.0)


def test_values_are_recomputed_against_the_ledger_after_every_chosen_transfer() -> None:
    # Budget 2. "video" (0.009/MB on h1, the only place with the lead) is chosen first; h1's
    # ledger then has 3000 MB above the reserve, too little for "image" (4000 MB) there, so it
    # goes to h2, its second-best host, rather than overcommitting h1.
    snap = snapshot(
        [host("h1", disk_free_mb=17240), host("h2", disk_free_mb=50000)],
        [
            model("video", artifact_size_mb=4000),
            model("image", artifact_size_mb=4000),
        ],
        predictions=[
            prediction("video", confidence=0.9),
            prediction("image", source="marketing", target="image", confidence=0.5),
        ],
        learned_startup={"video": {"h1": {"load_s": 90.0}}, "image": {"h1": {"load_s": 90.0}}},
        policy={"prefetch": {"max_advisories_per_plan": 2}},
    )
    advisories = plan(snap).prefetch.advisories  # type: ignore[union-attr]
    assert [(a.model_id, a.host_id) for a in advisories] == [("video", "h1"), ("image", "h2")]
    assert advisories[0].disk_left_mb == 17240 - 4000
    assert advisories[1].disk_left_mb == 50000 - 4000


def test_the_advisory_budget_is_policy() -> None:
    models = [model(m, artifact_size_mb=1000) for m in ("video", "image", "coder")]
    preds = [prediction(m["model_id"], confidence=0.5 + i / 10) for i, m in enumerate(models)]
    for budget, expected in ((0, 0), (1, 1), (2, 2), (5, 3)):
        snap = snapshot(
            [host("h1")],
            models,
            predictions=preds,
            policy={"prefetch": {"max_advisories_per_plan": budget}},
        )
        assert len(plan(snap).prefetch.advisories) == expected  # type: ignore[union-attr]


def test_a_disabled_cache_and_a_snapshot_without_predictions_have_no_report() -> None:
    snap = snapshot([host("h1")], [model("video")], predictions=[prediction("video")])
    off = snap.model_copy(
        update={
            "policy": snap.policy.model_copy(
                update={"prefetch": snap.policy.prefetch.model_copy(update={"enabled": False})}
            )
        }
    )
    assert plan(off).prefetch is None
    assert plan(snapshot([host("h1")], [model("video")])).prefetch is None
    assert "prefetch" not in plan(snapshot([host("h1")], [model("video")])).model_dump(mode="json")


def test_counterfactual_portfolio_evaluations_emit_no_advisory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The portfolio's search plans many candidate portfolios; only the authoritative plan
    that make_plan returns carries advisories: the advisory step runs once per plan."""
    calls: list[int] = []
    original = advise.plan_prefetch

    def counting(snap: FleetSnapshot, result: Plan) -> Any:
        calls.append(1)
        return original(snap, result)

    monkeypatch.setattr("grid.planner.prefetch.plan_prefetch", counting)
    snap = snapshot(
        [host("h1"), host("h2")],
        [
            model("video", workload_scores={"video": 0.9}),
            model("coder", workload_scores={"coding": 0.9}),
            model("image", workload_scores={"image": 0.9, "coding": 0.3}),
        ],
        workloads={
            "coding": {"offered_concurrency": 2.0, "observations": 12, "rpm": 6.0},
            "image": {
                "offered_concurrency": 1.6,
                "observations": 6,
                "rpm": 2.0,
                "modality": "image",
            },
        },
        predictions=[prediction("video")],
    )
    result = make_plan(snap, engine="heuristic", deterministic=True)
    assert result.portfolio is not None  # the search ran
    assert len(calls) == 1


# ----------------------------------------------------------------------------- where it lands


@pytest.mark.parametrize(
    "full",
    [
        {"max_models": 1},  # the pinned coder takes the only model slot
        {"capacity_mb": 16384},  # 16384 - 8192 (coder) = 8192 < 8192 + 820 MB headroom
    ],
)
def test_a_host_the_plan_fills_is_no_prefetch_target(full: dict[str, Any]) -> None:
    # h1 has the most disk, so disk alone would pick it; but after the plan it has no slot or
    # memory for the video model's replica, so a cached copy there could never be warmed.
    pinned = model("coder", pinned_hosts=["h1"], artifact_size_mb=1000)
    hosts = [host("h1", disk_free_mb=400_000, **full), host("h2")]
    snap = snapshot(hosts, [model("video"), pinned], predictions=[prediction("video")])
    result = plan(snap)
    assert ("coder", "h1") in {(a.model_id, a.host_id) for a in result.assignments}
    assert [a.host_id for a in result.prefetch.advisories] == ["h2"]  # type: ignore[union-attr]
    alone = snapshot(hosts[:1], [model("video"), pinned], predictions=[prediction("video")])
    report = plan(alone).prefetch
    assert report is not None and report.advisories == []
    assert [(s.model_id, s.code) for s in report.skipped] == [("video", "no_free_slot")]


@pytest.mark.parametrize(
    ("pressure", "surge", "staged"),
    [
        # coder: 1 replica planned on h1, capacity 1.0 x 0.75 = 0.75; load 0.1 direct demand
        (0.2, 0.5, False),  # 0.1 + 0.5 x 0.2 = 0.2 < 0.5 x 0.75 = 0.375: the replica takes it
        (0.6, 0.5, True),  # 0.1 + 0.5 x 0.6 = 0.4 >= 0.375: a next replica is in sight
        (0.6, 1.0, False),  # 0.4 < 1.0 x 0.75
        (0.2, 0.0, True),  # 0 disables the gate: every prediction wants the next copy
    ],
)
def test_a_served_model_gets_a_copy_only_when_a_surge_would_need_a_replica(
    pressure: float, surge: float, staged: bool
) -> None:
    snap = snapshot(
        [host("h1"), host("h2")],
        [model("coder", pinned_hosts=["h1"])],
        demand={"coder": {"offered_concurrency": 0.1, "rpm": 1.0}},
        predictions=[prediction("coder", confidence=0.5, offered_concurrency=pressure)],
        # The default share is 0.5 (left out, so the default itself is what is checked).
        **({} if surge == 0.5 else {"policy": {"prefetch": {"surge_utilization": surge}}}),
    )
    result = plan(snap)
    assert [(a.model_id, a.host_id) for a in result.assignments] == [("coder", "h1")]
    report = result.prefetch
    assert report is not None
    assert [(a.model_id, a.host_id) for a in report.advisories] == ([("coder", "h2")] * staged)
    if not staged:
        assert [(s.model_id, s.code) for s in report.skipped] == [("coder", "served")]
