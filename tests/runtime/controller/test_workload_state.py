"""Issue 9 wiring in the controller: persistence of the workload side, one vocabulary, the
snapshot's workloads/outcomes, workflow pre-warming and router measurements (hand-worked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.demand import EndpointFamily, Measurements, Observation
from grid.demand import Outcome as ObsOutcome
from grid.fleet.errors import GridError
from grid.fleet.models import Evidence, Host, ModelProfile
from grid.router.affinity import hash_affinity_key
from grid.runtime.controller.core import Controller
from grid.runtime.controller.store import StateStore
from grid.runtime.controller.workload_inputs import measured_hosts
from tests.runtime.controller.harness import FAST, T0, profile

pytestmark = pytest.mark.unit

SHA_A = "a" * 64
SHA_B = "b" * 64


def controller(folder: Path, now: float = T0) -> Controller:
    return Controller(StateStore(folder / "state.json"), now=now, config=FAST)


def auto(workload: str, at: float, *, served: str | None = None) -> Observation:
    return Observation(
        model_id="auto",
        served_model_id=served,
        endpoint_family=EndpointFamily.CHAT,
        workload=workload,
        service_time_s=2.0,
        output_units=40.0,
        outcome=ObsOutcome.OK if served else ObsOutcome.NO_ROUTE,
        timestamp=at,
    )


def test_auto_requests_are_workload_demand_and_survive_a_restart(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    ctl.put_profile("coder", profile(workload_scores={"coding": 1.0}, artifact_sha256=SHA_A), T0)
    for i in range(3):
        assert ctl.observe_request(auto("coding", T0 + i), T0 + i, served_sha256=None)
    ctl.observe_request(auto("coding", T0 + 4, served="coder"), T0 + 4, served_sha256=SHA_A)
    snap = ctl.snapshot(T0 + 5)
    assert snap.workloads["coding"].observations == 4
    assert "coder" not in snap.demand  # the model that served it got no demand
    (row,) = snap.outcomes
    assert (row.model_id, row.workload, row.artifact_sha256, row.requests) == (
        "coder",
        "coding",
        SHA_A,
        1,
    )
    ctl.save(T0 + 5)

    again = controller(tmp_path, now=T0 + 6)
    snap2 = again.snapshot(T0 + 6)
    assert snap2.workloads["coding"].observations == 4
    assert [(o.model_id, o.requests) for o in snap2.outcomes] == [("coder", 1)]
    assert not [w for w in again.warnings if w.endswith("_dropped")]


def test_an_old_state_file_without_the_new_fields_loads(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    ctl.put_profile("coder", profile(), T0)
    doc = json.loads((tmp_path / "state.json").read_text())
    for key in ("workloads", "evidence", "workflow"):
        doc.pop(key)
    (tmp_path / "state.json").write_text(json.dumps(doc))
    again = controller(tmp_path, now=T0 + 1)
    assert "coder" in again.profiles and again.restored
    assert again.snapshot(T0 + 1).workloads == {}


def test_a_corrupt_evidence_part_is_dropped_with_a_warning_and_the_rest_stays(
    tmp_path: Path,
) -> None:
    ctl = controller(tmp_path)
    ctl.put_profile("coder", profile(), T0)
    ctl.observe_request(auto("coding", T0), T0)
    ctl.save(T0)
    doc = json.loads((tmp_path / "state.json").read_text())
    doc["evidence"] = {"entries": "not a list"}
    (tmp_path / "state.json").write_text(json.dumps(doc))
    again = controller(tmp_path, now=T0 + 1)
    assert "evidence_state_dropped" in again.warnings
    assert again.snapshot(T0 + 1).workloads["coding"].observations == 1
    assert "coder" in again.profiles


def test_a_word_outside_the_vocabulary_is_never_recorded(tmp_path: Path) -> None:
    ctl = controller(tmp_path)
    ctl.put_profile("coder", profile(), T0)
    assert not ctl.observe_request(auto("cooking", T0), T0)
    assert ctl.snapshot(T0 + 1).workloads == {}
    assert set(ctl.classifier.workloads) == set(ctl.policy.workload_vocabulary)


def test_learned_workflow_prewarms_the_next_workloads_model_as_inferred_demand(
    tmp_path: Path,
) -> None:
    # Hand-worked: one client alternates research (10 s) then coding (10 s), five times, so
    # research -> coding is counted 5 times (the edge threshold) and coding -> research 4.
    ctl = controller(tmp_path)
    ctl.put_profile("coder", profile(workload_scores={"coding": 1.0}), T0)
    ctl.put_profile("writer", profile(workload_scores={"research": 1.0}), T0)
    key = hash_affinity_key("session-7")
    assert key is not None
    t = T0
    for _ in range(5):
        for word in ("research", "coding"):
            obs = Observation(
                model_id="auto", workload=word, service_time_s=10.0, timestamp=t + 10.0
            )
            ctl.observe_request(obs, t + 10.0, affinity_digest=key.digest)
            t += 11.0
    edges = {(e.source, e.target): e for e in ctl.signals.edges(t)}
    assert edges[("research", "coding")].count == 5
    assert edges[("research", "coding")].confidence == 1.0
    assert ("coding", "research") not in edges  # 4 < 5 repeats
    snap = ctl.snapshot(t)
    entry = snap.demand["coder"]
    assert entry.evidence is Evidence.INFERRED
    # confidence 1.0 x research's offered concurrency
    assert entry.offered_concurrency == pytest.approx(
        snap.workloads["research"].offered_concurrency
    )
    assert "writer" not in snap.demand  # no edge leads to research


def test_router_measurements_ramp_to_full_weight_over_eight_samples() -> None:
    # Hardware prior: 400 GB/s / 10 + 20000 GFLOPS / 1000 = 60 tok/s. Each response: 100 tokens
    # in 1 s = 100 tok/s, so the EWMA stays 100 and the estimate is 60 + 40 * n / 8.
    host = Host(host_id="h1", capacity_mb=8192, memory_bandwidth_gbps=400, compute_gflops=20000)
    profiles = {"m": ModelProfile(model_id="m", memory_mb=100, artifact_sha256=SHA_A)}
    measured = Measurements()
    assert measured_hosts([host], profiles, measured, T0)[0].measured_tokens_per_s == {}
    expected = [65.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 100.0, 100.0]
    for n, want in enumerate(expected, start=1):
        measured.record("h1", ("h1:9000", "m", SHA_A), 1.0, 100, T0 + n)
        rate = measured_hosts([host], profiles, measured, T0 + n)[0].measured_tokens_per_s["m"]
        assert rate == pytest.approx(want), n
    # A replaced artifact starts from the hardware prior: old samples do not count for it.
    replaced = {"m": profiles["m"].model_copy(update={"artifact_sha256": SHA_B})}
    assert measured_hosts([host], replaced, measured, T0 + 20)[0].measured_tokens_per_s == {}
    measured.record("h1", ("h1:9000", "m", SHA_B), 1.0, 20, T0 + 21)  # 20 tok/s, one sample
    rate = measured_hosts([host], replaced, measured, T0 + 21)[0].measured_tokens_per_s["m"]
    assert rate == pytest.approx(60.0 + (20.0 - 60.0) / 8)


def test_a_late_response_of_a_replaced_revision_never_updates_the_new_one(
    tmp_path: Path,
) -> None:
    ctl = controller(tmp_path)
    ctl.put_profile("coder", profile(workload_scores={"coding": 1.0}, artifact_sha256=SHA_A), T0)
    ctl.observe_request(auto("coding", T0, served="coder"), T0, served_sha256=SHA_A)
    assert [o.requests for o in ctl.snapshot(T0 + 1).outcomes] == [1]
    ctl.put_profile("coder", profile(workload_scores={"coding": 1.0}, artifact_sha256=SHA_B), T0)
    assert ctl.snapshot(T0 + 2).outcomes == []  # the new revision starts uncertain
    # A response the old engine finishes after the swap is keyed to the old revision.
    ctl.observe_request(auto("coding", T0 + 3, served="coder"), T0 + 3, served_sha256=SHA_A)
    assert ctl.snapshot(T0 + 4).outcomes == []
    ctl.observe_request(auto("coding", T0 + 5, served="coder"), T0 + 5, served_sha256=SHA_B)
    (row,) = ctl.snapshot(T0 + 6).outcomes
    assert (row.artifact_sha256, row.requests) == (SHA_B, 1)


def test_a_profile_scoring_an_unknown_workload_word_is_refused_and_nothing_changes(
    tmp_path: Path,
) -> None:
    ctl = controller(tmp_path)
    with pytest.raises(GridError) as refused:
        ctl.put_profile("coder", profile(workload_scores={"cooking": 1.0}), T0)
    assert refused.value.code == "unknown_workload"
    assert refused.value.path == "workload_scores.cooking"
    with pytest.raises(GridError) as bad_score:
        ctl.put_profile("coder", profile(workload_scores={"coding": 1.5}), T0)
    assert bad_score.value.code == "invalid_value"
    assert ctl.profiles == {}
