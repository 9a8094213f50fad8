"""Workflow learning: five repeats, confidence over departures, order, expiry, caps, no raw key."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.demand.workflow import Step, WorkflowConfig, WorkflowLearner
from grid.fleet.errors import GridError
from grid.router import hash_affinity_key

pytestmark = pytest.mark.unit

SECRET = b"s" * 32


def digest(raw: str) -> str:
    key = hash_affinity_key(raw)
    assert key is not None
    return key.digest


def session(
    learner: WorkflowLearner, key: str, words: list[str], start: float, gap: float = 5.0
) -> list[Step]:
    """Sequential requests of one client: each starts `gap` s after the previous completed."""
    steps, t = [], start
    for word in words:
        steps.append(learner.observe(key, word, started_at=t, completed_at=t + 10, now=t + 10))
        t += 10 + gap
    return steps


def test_five_repeated_transitions_establish_an_edge() -> None:
    learner = WorkflowLearner(SECRET)
    key = digest("campaign-42")
    for i in range(4):
        session(learner, key, ["image", "video"], start=i * 100.0)
    assert learner.next_workload("image", 400.0) is None  # four are not enough
    steps = session(learner, key, ["image", "video"], start=400.0)
    assert steps == [Step.TRANSITION, Step.TRANSITION]  # video->image, then image->video
    edge = learner.next_workload("image", 430.0)
    assert edge is not None
    assert (edge.target, edge.count, edge.departures, edge.confidence) == ("video", 5, 5, 1.0)


def test_confidence_counts_every_departure_from_the_source() -> None:
    learner = WorkflowLearner(SECRET)
    for i in range(5):
        session(learner, digest(f"user-{i}"), ["image", "video"], start=0.0)
    for i in range(3):
        session(learner, digest(f"designer-{i}"), ["image", "design"], start=0.0)
    edge = learner.next_workload("image", 60.0)
    assert edge is not None
    assert (edge.target, edge.count, edge.departures) == ("video", 5, 8)
    assert edge.confidence == pytest.approx(5 / 8)
    assert learner.next_workload("video", 60.0) is None


def test_repeats_of_one_workload_are_no_departures() -> None:
    learner = WorkflowLearner(SECRET)
    key = digest("coder")
    assert session(learner, key, ["coding"] * 6, start=0.0)[1:] == [Step.REPEAT] * 5
    assert learner.transitions() == []


def test_adjacent_traffic_of_unrelated_users_is_no_sequence() -> None:
    learner = WorkflowLearner(SECRET)
    for i in range(10):
        t = i * 30.0
        first = learner.observe(digest(f"a{i}"), "image", started_at=t, completed_at=t + 5, now=t)
        second = learner.observe(
            digest(f"b{i}"), "video", started_at=t + 10, completed_at=t + 20, now=t + 20
        )
        assert (first, second) == (Step.FIRST, Step.FIRST)
    assert learner.edges(400.0) == []


def test_simultaneous_and_out_of_order_completions_never_establish_order() -> None:
    learner = WorkflowLearner(SECRET)
    key = digest("parallel")
    for i in range(10):
        t = 1000.0 * i
        # Image runs t..t+30; video starts at t+5 while the image still runs (simultaneous).
        learner.observe(key, "image", started_at=t, completed_at=t + 30, now=t + 30)
        step = learner.observe(key, "video", started_at=t + 5, completed_at=t + 40, now=t + 40)
        assert step is Step.UNORDERED
    for i in range(10):
        t = 20_000.0 + 1000.0 * i
        # The later-started design request completes (and is reported) first; the earlier
        # sales request completes after it.
        learner.observe(key, "design", started_at=t + 20, completed_at=t + 25, now=t + 25)
        step = learner.observe(key, "sales", started_at=t, completed_at=t + 60, now=t + 60)
        assert step is Step.UNORDERED
    assert all(
        (tr.source, tr.target) not in {("image", "video"), ("sales", "design")}
        for tr in learner.transitions()
    )
    assert learner.next_workload("image", 40_000.0) is None
    assert learner.next_workload("sales", 40_000.0) is None


def test_transitions_and_workflows_expire_after_an_hour() -> None:
    learner = WorkflowLearner(SECRET)
    key = digest("slow")
    for i in range(5):
        session(learner, key, ["research", "marketing"], start=i * 100.0)
    assert learner.next_workload("research", 500.0) is not None
    assert learner.next_workload("research", 480.0 + 3601.0) is None  # every transition aged out
    assert learner.transitions() == [] and learner.workflow_ids() == []
    # A request more than an hour after the last one starts a new workflow, not a transition.
    late = 480.0 + 7300.0
    assert learner.observe(key, "sales", started_at=late, completed_at=late + 1, now=late + 1) == (
        Step.FIRST
    )


def test_caps_evict_the_least_recently_used() -> None:
    learner = WorkflowLearner(SECRET, WorkflowConfig(max_workflows=512, max_transitions=4096))
    for i in range(600):
        learner.observe(digest(f"k{i}"), "general", started_at=i, completed_at=i + 0.5, now=i + 1)
    assert len(learner.workflow_ids()) == 512
    # k0 was evicted: its next request is a first request again, not a transition.
    assert learner.observe(digest("k0"), "coding", started_at=700, completed_at=701, now=701) == (
        Step.FIRST
    )
    small = WorkflowLearner(SECRET, WorkflowConfig(max_transitions=6))
    session(small, digest("x"), ["coding", "research"] * 5, start=0.0)
    assert len(small.transitions()) == 6  # nine counted, the oldest three dropped


def test_neither_the_raw_key_nor_the_router_digest_is_held() -> None:
    learner = WorkflowLearner(SECRET)
    raw = "session-RAW-7f3a-very-identifying-user@example.com"
    session(learner, digest(raw), ["image", "video", "image"], start=0.0)
    blob = pickle.dumps(learner.__dict__ | {"_secret": b""})
    assert raw.encode() not in blob
    assert digest(raw).encode() not in blob
    (stored,) = learner.workflow_ids()
    assert stored != digest(raw) and len(stored) == 64
    other = WorkflowLearner(b"t" * 32)  # another controller's secret: another name
    assert other.workflow_id(digest(raw)) != stored


@pytest.mark.parametrize(
    "make",
    [
        lambda: WorkflowLearner(b"short"),
        lambda: WorkflowConfig(min_repeats=0),
        lambda: WorkflowConfig(expiry_s=float("inf")),
    ],
)
def test_a_bad_configuration_is_a_clear_error(make: object) -> None:
    with pytest.raises(GridError) as caught:
        make()  # type: ignore[operator]
    assert caught.value.code == "invalid_workflow_config"


def test_unusable_input_is_ignored() -> None:
    learner = WorkflowLearner(SECRET)
    assert learner.observe(None, "coding", started_at=0, completed_at=1, now=1) is Step.IGNORED
    assert learner.observe("d", "coding", started_at=5, completed_at=1, now=5) is Step.IGNORED
    nan = float("nan")
    assert learner.observe("d", "coding", started_at=nan, completed_at=1, now=1) is Step.IGNORED
    assert learner.observe("d", "x" * 33, started_at=0, completed_at=1, now=1) is Step.IGNORED
    assert learner.workflow_ids() == []


EVENT = st.tuples(
    st.integers(min_value=0, max_value=5),  # client
    st.sampled_from(["coding", "research", "image", "video"]),
    st.floats(min_value=0, max_value=5000),  # start
    st.floats(min_value=0, max_value=300),  # duration
)


@settings(max_examples=120, deadline=None)
@given(events=st.lists(EVENT, max_size=80), cap_w=st.integers(1, 4), cap_t=st.integers(1, 12))
def test_caps_hold_and_every_transition_follows_a_completed_request(
    events: list[tuple[int, str, float, float]], cap_w: int, cap_t: int
) -> None:
    learner = WorkflowLearner(SECRET, WorkflowConfig(max_workflows=cap_w, max_transitions=cap_t))
    reported: dict[int, list[tuple[str, float, float]]] = {}
    now = 0.0
    for client, word, start, duration in events:
        now = max(now, start + duration)
        step = learner.observe(
            digest(f"c{client}"), word, started_at=start, completed_at=start + duration, now=now
        )
        if step is Step.TRANSITION:
            # Independent oracle: some earlier report of this client, of another workload,
            # completed no later than this request started.
            earlier = reported.get(client, [])
            assert any(w != word and done <= start for w, _s, done in earlier)
        reported.setdefault(client, []).append((word, start, start + duration))
        assert len(learner.workflow_ids()) <= cap_w
        assert len(learner.transitions()) <= cap_t


@settings(max_examples=80, deadline=None)
@given(
    words=st.lists(st.sampled_from(["coding", "image", "video"]), min_size=2, max_size=30),
    order=st.randoms(use_true_random=False),
)
def test_overlapping_requests_in_any_report_order_never_establish_order(
    words: list[str], order: object
) -> None:
    # Every request runs across t = 100: each overlaps all the others.
    requests = [(w, 100.0 - i - 1, 101.0 + i) for i, w in enumerate(words)]
    order.shuffle(requests)  # type: ignore[attr-defined]
    learner = WorkflowLearner(SECRET, WorkflowConfig(min_repeats=1))
    for word, start, done in requests:
        step = learner.observe("one-client", word, started_at=start, completed_at=done, now=200.0)
        assert step is not Step.TRANSITION
    assert learner.transitions() == [] and learner.edges(200.0) == []


@settings(max_examples=60, deadline=None)
@given(
    raws=st.lists(
        st.text(st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=8, max_size=40),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    words=st.lists(st.sampled_from(["coding", "image", "video"]), min_size=1, max_size=6),
)
def test_no_raw_key_or_router_digest_is_ever_stored(raws: list[str], words: list[str]) -> None:
    learner = WorkflowLearner(SECRET, WorkflowConfig(min_repeats=1))
    for i, raw in enumerate(raws):
        session(learner, digest(raw), words, start=i * 100.0)  # all within the hour
    blob = pickle.dumps(learner.__dict__ | {"_secret": b""})
    for raw in raws:
        assert raw.encode() not in blob
        assert digest(raw).encode() not in blob
    assert set(learner.workflow_ids()) == {learner.workflow_id(digest(r)) for r in raws}
