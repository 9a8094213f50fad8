"""A job no engine could take is queued work: the boundary reports all of it to the control.

The spec: "at least 1.5 offered-concurrency units—arrival rate multiplied by measured service
time, plus queued work—is already enough pressure to justify one candidate. A queued minute-long
video job can therefore start its model immediately". The lab's NO_ROUTE observation carries
the job's base device seconds as queued concurrency units (60 device seconds per unit, rounded
up), so the smart control's workload forecast sees it on the next tick.
"""

from __future__ import annotations

import pytest

from grid.demand import EndpointFamily, Modality, Outcome, RequestShape
from grid.fleet.models import ModelProfile
from grid.fleet.workloads import PortfolioPolicy
from grid.lab.scenario.arrivals import Request
from grid.lab.scenario.lab import T0, _observations, queued_units
from grid.lab.scenario.physics import Replica, route_minute
from grid.lab.scenario.strategies import Control

pytestmark = pytest.mark.unit


def _job(service_s: float, word: str = "video", modality: Modality = Modality.VIDEO) -> Request:
    return Request(
        minute=0,
        offset_s=10.0,
        user_id="u1",
        family=EndpointFamily.CHAT,
        requested="auto",
        shape=RequestShape(word, modality),
        service_s=service_s,
        body_bytes=10,
    )


VIDEO = ModelProfile(model_id="vid", memory_mb=1, workload_scores={"video": 0.9})
CODER = ModelProfile(model_id="coder", memory_mb=1, workload_scores={"coding": 0.9})


@pytest.mark.parametrize(("service_s", "units"), [(72.9, 2), (60.0, 1), (49.9, 1), (0.5, 1)])
def test_an_unroutable_job_reports_its_work_as_queued_units(service_s: float, units: int) -> None:
    # ⌈72.9 / 60⌉ = 2, ⌈60 / 60⌉ = 1, ⌈49.9 / 60⌉ = 1, and any refused job is at least one.
    out = route_minute([_job(service_s)], [], {}, {"vid": VIDEO})
    assert out.routed[0].outcome is Outcome.NO_ROUTE
    assert queued_units(out.routed[0]) == units


def test_a_routed_job_reports_the_replicas_overflow_only() -> None:
    # One replica, 60 device-seconds, speed 1: 50 s + 50 s → 40 s over budget → round(40/60) = 1.
    reps = [Replica("h1", "coder", speed=1.0, budget_s=60.0)]
    jobs = [_job(50, "coding", Modality.TEXT), _job(50, "coding", Modality.TEXT)]
    out = route_minute(jobs, reps, {}, {"coder": CODER})
    assert [queued_units(r) for r in out.routed] == [1, 1]
    fresh = [Replica("h1", "coder", speed=1.0, budget_s=60.0)]
    alone = route_minute([_job(30, "coding", Modality.TEXT)], fresh, {}, {"coder": CODER})
    assert queued_units(alone.routed[0]) == 0  # within budget: nothing queued


def test_a_queued_minute_long_video_job_reaches_the_media_band_at_once() -> None:
    # The control sees the refused 72.9 s job on the next tick: one observation (below the
    # 3-observation gate) but two queued units, which after the demand EWMA is at least the
    # media canary band's 1.0 (it was 0.0 when a refused job reported no queue).
    out = route_minute([_job(72.9)], [], {}, {"vid": VIDEO})
    control = Control([VIDEO], seed=1)
    control.observe(_observations(out, T0, {"vid": VIDEO}), T0 + 60)
    _demand, workloads, _outcomes = control.fields(T0 + 60)
    video = workloads["video"]
    assert video.observations == 1
    assert video.offered_concurrency >= PortfolioPolicy().media_canary_min_concurrency
    assert video.queue_depth > 0
