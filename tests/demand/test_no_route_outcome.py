"""Issue 8 defect 6: a 503 "no ready route" is demand, not an engine error.

Hand-worked numbers: 12 requests in one bucket, all refused by the router, make arrivals and
no errors (error rate 0); the same 12 as engine errors make error rate 1.0. With one ready
replica and a 5 % error threshold, only real engine errors ask for a replica beyond it.
"""

from __future__ import annotations

import pytest

from grid.demand import DemandTracker, Observation, Outcome
from grid.fleet.models import DemandEntry
from grid.fleet.snapshot import parse_snapshot
from grid.planner.targets import compute_targets
from tests.demand.helpers import BUCKET_S, fill_bucket, profiles

pytestmark = pytest.mark.unit

NOW = 10 * BUCKET_S + 30.0  # inside bucket 10; bucket 9 is the last complete one


def _forecast(outcome: Outcome) -> DemandEntry:
    tracker = DemandTracker(["m"])
    fill_bucket(tracker, "m", 9, 12, service_time_s=0.0, outcome=outcome.value)
    return tracker.forecast(NOW, profiles("m"))["m"]


def test_router_refusals_count_as_arrivals_but_raise_no_error_rate() -> None:
    refused = _forecast(Outcome.NO_ROUTE)
    assert refused.rpm > 0  # still demand for the model
    assert refused.error_rate == 0.0
    failed = _forecast(Outcome.ERROR)
    assert failed.rpm == refused.rpm  # the same arrivals either way
    assert failed.error_rate == 1.0


def test_refused_request_is_no_engine_failure_and_no_models_outcome() -> None:
    refused = Observation(model_id="m", outcome=Outcome.NO_ROUTE, timestamp=NOW)
    assert not refused.failed
    assert Observation(model_id="m", outcome=Outcome.TIMEOUT, timestamp=NOW).failed


def _desired(entry: DemandEntry) -> int:
    snap = parse_snapshot(
        {
            "schema_version": 1,
            "now": NOW,
            "hosts": [
                {
                    "host_id": "h1",
                    "capacity_mb": 16384,
                    "last_heartbeat": NOW,
                    "residencies": [{"model_id": "m", "memory_mb": 1024, "state": "ready"}],
                },
                {"host_id": "h2", "capacity_mb": 16384, "last_heartbeat": NOW},
            ],
            "models": [{"model_id": "m", "memory_mb": 1024, "max_replicas": 3}],
            "demand": {"m": entry.model_dump(mode="json")},
        }
    )
    return compute_targets(snap)["m"].desired


def test_refusals_never_ask_for_a_replica_beyond_the_ready_set() -> None:
    assert _desired(_forecast(Outcome.NO_ROUTE)) == 1  # the one ready replica
    assert _desired(_forecast(Outcome.ERROR)) == 2  # error pressure: ready + 1
