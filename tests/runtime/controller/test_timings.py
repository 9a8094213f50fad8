"""Learned load/warm timings: eight-sample EWMA, authoritative after four, expiry, revisions."""

from __future__ import annotations

import math

import pytest

from grid.fleet.models import ModelProfile
from grid.runtime.controller.timings import EXPIRY_S, Phase, TimingTable

pytestmark = pytest.mark.unit

NOW = 10_000_000.0
W = Phase.WARM


def test_prior_is_blended_until_four_samples_then_learned_is_authoritative() -> None:
    table = TimingTable()
    assert table.estimate(W, "h", "m", "", 100.0, NOW) == 100.0
    table.record(W, "h", "m", "", 20.0, NOW)
    table.record(W, "h", "m", "", 20.0, NOW)
    # two of four samples: halfway between the prior (100) and the learned mean (20)
    assert table.estimate(W, "h", "m", "", 100.0, NOW) == pytest.approx(60.0)
    table.record(W, "h", "m", "", 20.0, NOW)
    table.record(W, "h", "m", "", 20.0, NOW)
    assert table.estimate(W, "h", "m", "", 100.0, NOW) == pytest.approx(20.0)


def test_ewma_is_the_mean_of_eight_then_weights_each_new_sample_one_eighth() -> None:
    table = TimingTable()
    for value in range(1, 9):  # 1..8: mean 4.5
        table.record(W, "h", "m", "", float(value), NOW)
    learned = table.learned(W, "h", "m", "", NOW)
    assert learned is not None and learned.samples == 8 and learned.mean_s == pytest.approx(4.5)
    table.record(W, "h", "m", "", 12.5, NOW)
    learned = table.learned(W, "h", "m", "", NOW)
    assert learned is not None and learned.samples == 8
    assert learned.mean_s == pytest.approx(4.5 + (12.5 - 4.5) / 8)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 3600.5, "5", None, True])
def test_invalid_reports_are_ignored(bad: object) -> None:
    table = TimingTable()
    assert not table.record(W, "h", "m", "", bad, NOW)
    assert len(table) == 0


def test_samples_expire_after_thirty_days() -> None:
    table = TimingTable()
    table.record(W, "h", "m", "", 5.0, NOW)
    assert table.learned(W, "h", "m", "", NOW + EXPIRY_S) is not None
    assert table.estimate(W, "h", "m", "", 60.0, NOW + EXPIRY_S + 1) == 60.0
    assert len(table) == 0


def test_a_new_artifact_digest_starts_from_the_prior() -> None:
    table = TimingTable()
    for _ in range(4):
        table.record(W, "h", "m", "old", 5.0, NOW)
    assert table.estimate(W, "h", "m", "new", 60.0, NOW) == 60.0
    assert table.forget_other_revisions({"m": "new"}) == 1
    assert table.learned(W, "h", "m", "old", NOW) is None


def test_learned_startup_is_per_host_current_revision_and_registered_only() -> None:
    table = TimingTable()
    for _ in range(2):  # two of four samples: halfway between prior and learned
        table.record(Phase.LOAD, "fast", "m", "", 10.0, NOW)
        table.record(W, "fast", "m", "", 4.0, NOW)
    table.record(W, "gone", "m", "", 1.0, NOW)  # not registered now
    table.record(W, "fast", "m", "old-sha", 1.0, NOW)  # another revision
    profiles = {"m": ModelProfile(model_id="m", memory_mb=1, load_estimate_s=60.0)}
    learned = table.learned_startup(profiles, ["fast", "new"], NOW)
    assert set(learned) == {"m"} and set(learned["m"]) == {"fast"}
    # (60 + 10) / 2 = 35 and (20 + 4) / 2 = 12; "new" is absent, so it keeps the priors.
    assert learned["m"]["fast"].load_s == pytest.approx(35.0)
    assert learned["m"]["fast"].warm_s == pytest.approx(12.0)


def test_state_round_trip_drops_malformed_rows() -> None:
    table = TimingTable()
    table.record(W, "h", "m", "d", 7.0, NOW)
    rows = table.to_state()
    rows += [
        {"phase": "warm"},
        {
            "phase": "bogus",
            "host_id": "h",
            "model_id": "m",
            "digest": "",
            "mean_s": 1,
            "samples": 1,
            "updated_at": NOW,
        },
        "junk",
        {**rows[0], "samples": 99},
        {**rows[0], "mean_s": -3},
    ]
    restored = TimingTable.from_state(rows)
    assert restored.to_state() == table.to_state()
