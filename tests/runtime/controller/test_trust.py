"""The trust rules of grid/runtime/controller/trust.py, pure and table-driven: what a node's word
is worth (issue 22). Oracles are hand-worked tables and a brute-force replay of the token bucket
on a fine clock, never the module's own functions."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grid.fleet.actions import ActionKind, ActionRecord, RecordStatus
from grid.runtime.controller.trust import (
    MAX_SUSPICIONS_PER_HOST,
    Attestor,
    FenceReport,
    HeartbeatBudget,
    Standing,
    Suspicions,
    foreign_floor,
    route_verdict,
    standings,
    term_suspicious,
)

pytestmark = pytest.mark.unit

KEY = Attestor(b"k" * 32)


def test_attestations_verify_only_for_what_they_were_made_for() -> None:
    proof = KEY.term_proof(7, "ctl-a")
    assert KEY.proves_term(7, "ctl-a", proof)
    assert not KEY.proves_term(8, "ctl-a", proof)
    assert not KEY.proves_term(7, "ctl-b", proof)
    assert not Attestor(b"x" * 32).proves_term(7, "ctl-a", proof)  # another controller family
    assert not KEY.proves_term(0, "ctl-a", KEY.term_proof(0, "ctl-a"))  # term 0 proves nothing
    grant = KEY.grant("h1", "m")
    assert KEY.proves_grant("h1", "m", grant)
    assert not KEY.proves_grant("h2", "m", grant)  # another host cannot reuse it
    assert not KEY.proves_grant("h1", "other", grant)
    for junk in (None, "", 7, "A" * 43, "A" * 500, grant + "x"):
        assert not KEY.proves_grant("h1", "m", junk)
    # Derived keys: every controller sharing the node-signing key checks the same proofs.
    assert Attestor.derived("s").grant("h", "m") == Attestor.derived("s").grant("h", "m")
    assert Attestor.derived("s").grant("h", "m") != Attestor.derived("t").grant("h", "m")
    assert "k" * 8 not in repr(KEY)


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        ([], (0, "")),
        ([FenceReport("a", 10**15, "x", False)], (0, "")),  # unproven: never counted
        ([FenceReport("a", 5, "old", True), FenceReport("b", 9, "old", False)], (5, "a")),
        ([FenceReport("a", 5, "me", True)], (0, "")),  # this controller's own term
        ([FenceReport("b", 6, "old", True), FenceReport("a", 6, "old", True)], (6, "a")),
    ],
)
def test_the_foreign_floor_counts_proven_terms_only(
    reports: list[FenceReport], expected: tuple[int, str]
) -> None:
    assert foreign_floor(reports, "me") == expected


@pytest.mark.parametrize(
    ("term", "proven", "own", "suspicious"),
    [(10**15, False, 4, True), (5, False, 4, True), (4, False, 4, False), (3, False, 4, False),
     (10**15, True, 4, False)],
)  # fmt: skip
def test_an_unproven_term_above_ours_is_suspicious(
    term: int, proven: bool, own: int, suspicious: bool
) -> None:
    assert term_suspicious(FenceReport("h", term, "x", proven), own) is suspicious


def record(kind: ActionKind, status: RecordStatus, at: float, **extra: object) -> ActionRecord:
    fields: dict[str, object] = {
        "action_id": f"{kind.value}-{at}",
        "kind": kind,
        "host_id": "h",
        "model_id": "m",
        "status": status,
        "created_at": at,
        **extra,
    }
    if status in (RecordStatus.DELIVERED, RecordStatus.RUNNING, RecordStatus.SUCCEEDED):
        fields.setdefault("delivered_at", at + 0.5)
    return ActionRecord.model_validate(fields)


W, D, U = ActionKind.WARM, ActionKind.DRAIN, ActionKind.UNLOAD
P, DL, S, F, WD = (
    RecordStatus.PENDING,
    RecordStatus.DELIVERED,
    RecordStatus.SUCCEEDED,
    RecordStatus.FAILED,
    RecordStatus.WITHDRAWN,
)


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], None),
        ([(W, P)], None),  # issued, not taken: the node cannot be running it
        ([(W, DL)], Standing.COMMANDED),
        ([(W, S)], Standing.COMMANDED),
        ([(W, S), (D, DL)], Standing.RETRACTED),  # a drain the node took
        ([(W, S), (D, S), (U, S)], Standing.RETRACTED),
        ([(W, S), (D, F)], Standing.COMMANDED),  # a failed drain left it serving
        ([(W, S), (D, P)], Standing.COMMANDED),  # not delivered yet
        ([(W, S), (D, S), (U, S), (W, S)], Standing.COMMANDED),  # placed here again
        ([(ActionKind.LOAD, S)], None),  # weights only: no route
    ],
)
def test_standing_of_a_residency_from_the_book(
    history: list[tuple[ActionKind, RecordStatus]], expected: Standing | None
) -> None:
    records = [record(kind, status, float(i)) for i, (kind, status) in enumerate(history)]
    records.append(record(W, S, 99.0, host_id="other"))  # another host's records never count
    assert standings(records, "h").get("m") == expected


def test_a_withdrawn_command_that_was_delivered_still_counts() -> None:
    warm = record(W, S, 0.0)
    drain = record(D, WD, 1.0, delivered_at=1.5)  # delivered, then withdrawn: may run
    assert standings([warm, drain], "h") == {"m": Standing.RETRACTED}
    undelivered = record(D, WD, 1.0)
    assert standings([warm, undelivered], "h") == {"m": Standing.COMMANDED}


@pytest.mark.parametrize(
    ("standing", "pinned", "grant", "verdict"),
    [
        (Standing.NONE, False, None, "route_not_commanded"),  # the hijack of the issue
        (Standing.NONE, False, "forged", "route_not_commanded"),
        (Standing.NONE, False, KEY.grant("h", "m"), ""),  # commanded by a controller family
        (Standing.NONE, False, KEY.grant("other", "m"), "route_not_commanded"),
        (Standing.COMMANDED, False, None, ""),
        (Standing.NONE, True, None, ""),  # an operator registered it (a pin)
        (Standing.RETRACTED, False, KEY.grant("h", "m"), "route_retracted"),  # told to drain
        (Standing.RETRACTED, True, None, "route_retracted"),
    ],
)
def test_route_verdicts(standing: Standing, pinned: bool, grant: str | None, verdict: str) -> None:
    assert route_verdict("h", "m", grant, attestor=KEY, standing=standing, pinned=pinned) == verdict


@settings(max_examples=60, deadline=None)
@given(
    rate=st.sampled_from([1.0, 2.5, 10.0]),
    burst=st.integers(1, 12),
    gaps=st.lists(st.integers(0, 400), min_size=1, max_size=80),
)
@example(rate=2.5, burst=1, gaps=[312, 400])  # 0.4 s x 2.5 refills to 1.0 only up to rounding
def test_the_heartbeat_budget_admits_what_a_fine_clock_replay_admits(
    rate: float, burst: int, gaps: list[int]
) -> None:
    """Oracle: a bucket replayed in 1 ms steps with integer milli-tokens (no float shortcut)."""
    budget = HeartbeatBudget(rate, burst)
    milli, capacity = burst * 1000, burst * 1000
    refill_per_ms = rate  # milli-tokens per millisecond
    now_ms = 0
    for gap in gaps:
        for _ in range(gap):
            milli = min(capacity, milli + refill_per_ms)
        now_ms += gap
        expected = milli >= 1000 - 1e-6
        if expected:
            milli -= 1000
        assert budget.admit("h", now_ms / 1000.0) is expected
    # Another host has its own bucket.
    assert budget.admit("other", now_ms / 1000.0)


def test_fifty_updates_a_second_get_the_budget_not_more() -> None:
    """Hand-worked: 3,000 updates in a minute (the last at 59.98 s) against a burst of 40 and
    10 a second admit 40 + 10 x 59.98 = 639.8, so 639 (one either way for float rounding)."""
    budget = HeartbeatBudget(10.0, 40)
    admitted = sum(budget.admit("rogue", i / 50.0) for i in range(50 * 60))
    assert abs(admitted - math.floor(40 + 10.0 * 59.98)) <= 1


def test_suspicions_name_hosts_bounded_and_expire() -> None:
    book = Suspicions(ttl_s=100.0)
    book.note("evil", "term_unproven", "it reported term 10^15", 0.0)
    book.note("evil", "term_unproven", "it reported term 10^15 again", 5.0)
    book.note("evil", "route_not_commanded", "a route for m", 6.0)
    assert book.hosts(10.0) == ["evil"]
    [first, second] = book.of("evil", 10.0)
    assert (first.code, first.count) == ("route_not_commanded", 1)
    assert (second.code, second.count, second.first_at, second.last_at) == (
        "term_unproven",
        2,
        0.0,
        5.0,
    )
    text = book.warning(10.0)
    assert "host evil" in text and "revoke" in text and "term_unproven x2" in text
    for index in range(3 * MAX_SUSPICIONS_PER_HOST):
        book.note("evil", f"code{index}", "x" * 5000, 7.0)
    assert len(book.of("evil", 10.0)) == MAX_SUSPICIONS_PER_HOST
    assert all(len(s.message) <= 400 for s in book.of("evil", 10.0))
    assert book.of("evil", 107.5) == [] and book.warning(107.5) == ""  # expired


def test_after_a_restart_a_replica_in_flight_from_before_is_waited_for() -> None:
    """Issue 22, item 7: a restored controller's first plan is solved afresh and may pick
    another host for the replica a previous controller already delivered; with a READY replica
    in view, constructive work for that model waits (bounded) for the one in flight."""
    from grid.fleet.actions import Action
    from grid.fleet.models import FleetSnapshot
    from grid.runtime.controller.authority import Grace, held_after_restart
    from grid.runtime.controller.config import ControllerConfig

    config = ControllerConfig(membership_grace_s=3.0, restart_inflight_wait_s=60.0)
    grace = Grace(restored=True, anchor=100.0)
    snap = FleetSnapshot.model_validate(
        {
            "now": 110.0,
            "hosts": [
                {"host_id": "b", "capacity_mb": 8192, "last_heartbeat": 110.0,
                 "residencies": [{"model_id": "m", "memory_mb": 100, "state": "ready"},
                                 {"model_id": "n", "memory_mb": 100, "state": "ready"}]},
            ],
            "models": [{"model_id": "m", "memory_mb": 100}, {"model_id": "n", "memory_mb": 100},
                       {"model_id": "z", "memory_mb": 100}],
        }
    )  # fmt: skip
    in_flight = [
        record(W, DL, 90.0, host_id="c"),  # delivered by the controller before the restart
        record(W, DL, 90.0, host_id="c", model_id="z"),  # ... of a model with no READY replica
        record(W, DL, 105.0, host_id="c", model_id="n"),  # delivered by this controller
    ]

    def action(model: str, kind: ActionKind = W) -> Action:
        return Action(action_id=f"{kind}-{model}", kind=kind, host_id="a", model_id=model,
                      not_before=0.0)  # fmt: skip

    wanted = [action("m"), action("z"), action("n"), action("m", D)]
    held = held_after_restart(wanted, snap, in_flight, {"a", "b", "c"}, grace, config, 110.0)
    assert [a.action_id for a in held] == ["warm-m"]
    assert held_after_restart(wanted, snap, in_flight, {"a", "b", "c"}, grace, config, 161.0) == []
    answered = [record(W, S, 90.0, host_id="c"), *in_flight[1:]]
    assert held_after_restart(wanted, snap, answered, {"a", "b", "c"}, grace, config, 110.0) == []
    fresh = Grace(restored=False, anchor=100.0)
    assert held_after_restart(wanted, snap, in_flight, {"a", "b", "c"}, fresh, config, 110.0) == []
