"""The learned stage-to-stage lead of a workflow edge (what the predictive cache caps a
transfer's counted seconds by): the median of the newest bounded samples, each the seconds from
the source request's completion to the next stage's start; kept across a restart, dropped with
its transition, and unknown (None) without a sample. Oracles are hand-worked medians."""

from __future__ import annotations

import pytest

from grid.demand.workflow import WorkflowConfig, WorkflowLearner
from grid.router import hash_affinity_key

pytestmark = pytest.mark.unit

SECRET = b"s" * 32


def digest(raw: str) -> str:
    key = hash_affinity_key(raw)
    assert key is not None
    return key.digest


def image_then_video(learner: WorkflowLearner, user: str, start: float, gap: float) -> float:
    """One session: an image request (10 s), then `gap` s later a video request (10 s)."""
    key = digest(user)
    learner.observe(key, "image", started_at=start, completed_at=start + 10, now=start + 10)
    video = start + 10 + gap
    learner.observe(key, "video", started_at=video, completed_at=video + 10, now=video + 10)
    return video + 10


def test_the_edge_lead_is_the_median_gap_from_completion_to_the_next_start() -> None:
    learner = WorkflowLearner(SECRET)
    t = 0.0
    for n, gap in enumerate([2.0, 4.0, 100.0, 6.0, 8.0]):
        t = image_then_video(learner, f"campaign-{n}", t, gap)
    edge = learner.next_workload("image", t)
    assert edge is not None and edge.target == "video"
    assert edge.lead_s == 6.0  # the median of 2, 4, 6, 8, 100: one slow session is no lead


def test_only_the_newest_samples_count() -> None:
    learner = WorkflowLearner(SECRET, WorkflowConfig(max_lead_samples=3))
    t = 0.0
    for n, gap in enumerate([1.0, 2.0, 3.0, 10.0, 20.0]):
        t = image_then_video(learner, f"campaign-{n}", t, gap)
    edge = learner.next_workload("image", t)
    assert edge is not None
    assert edge.lead_s == 10.0  # the median of the newest three: 3, 10, 20


def test_the_lead_survives_a_restart_and_a_bad_row_is_dropped() -> None:
    learner = WorkflowLearner(SECRET)
    t = 0.0
    for n, gap in enumerate([5.0, 7.0, 9.0, 11.0, 13.0]):
        t = image_then_video(learner, f"campaign-{n}", t, gap)
    state = learner.to_state()
    again = WorkflowLearner(b"t" * 32)  # another secret: cursors are not kept, transitions are
    again.restore(state)
    edge = again.next_workload("image", t)
    assert edge is not None and edge.lead_s == 9.0
    # A negative lead is no measurement: that row is left out whole (four edges remain: no edge).
    rows = [list(r) for r in state["transitions"] if r[:2] == ["image", "video"]]
    rows[0][3] = -1.0
    broken = WorkflowLearner(SECRET)
    broken.restore({**state, "transitions": rows})
    assert broken.next_workload("image", t) is None
    # Rows without a lead (an older state file) give an edge of unknown timing.
    older = WorkflowLearner(SECRET)
    older.restore({**state, "transitions": [r[:3] for r in state["transitions"]]})
    edge = older.next_workload("image", t)
    assert edge is not None and edge.count == 5 and edge.lead_s is None


def test_leads_expire_with_their_transitions() -> None:
    learner = WorkflowLearner(SECRET)
    t = 0.0
    for n, gap in enumerate([5.0, 5.0, 5.0, 5.0, 5.0]):
        t = image_then_video(learner, f"campaign-{n}", t, gap)
    assert learner.next_workload("image", t) is not None
    later = t + 3601.0
    assert learner.next_workload("image", later) is None
    # New sessions an hour later learn a fresh lead, not the old one.
    t = later
    for n, gap in enumerate([30.0, 40.0, 50.0, 60.0, 70.0]):
        t = image_then_video(learner, f"late-{n}", t, gap)
    edge = learner.next_workload("image", t)
    assert edge is not None and edge.lead_s == 50.0
