"""Command admission on the node: host, authority fence, plan generations, start-time checks."""

from __future__ import annotations

import pytest

from grid.fleet.actions import ReceiptStatus
from grid.fleet.wire import WireCommand
from grid.node.agent.admission import (
    Authority,
    admit,
    admit_batch,
    local_free_mb,
    remaining_ttl,
    start_check,
)
from tests.node.agent_helpers import HOST, command

pytestmark = pytest.mark.unit

FRESH = Authority()


def test_a_well_formed_command_is_accepted_and_commits_term_and_generation() -> None:
    verdict, after = admit(
        command("warm", term=3, controller_id="c3", sequence=7),
        host_id=HOST,
        authority=FRESH,
        ttl_remaining_s=5.0,
    )
    assert verdict.accepted
    assert after == Authority(highest_term=3, controller_id="c3", plan_epoch="e1", plan_sequence=7)


def test_a_command_for_another_host_fails_and_changes_nothing() -> None:
    verdict, after = admit(
        command("warm", host_id="host-b", term=5), host_id=HOST, authority=FRESH, ttl_remaining_s=5
    )
    assert (verdict.accepted, verdict.status, verdict.code) == (
        False,
        ReceiptStatus.FAILED,
        "wrong_host",
    )
    assert after == FRESH  # a foreign command cannot raise the fence


@pytest.mark.parametrize(
    ("term", "controller_id", "code"),
    [(2, "c3", "stale_term"), (3, "other", "second_controller_in_term"), (0, "", "stale_term")],
)
def test_lower_or_foreign_terms_are_refused(term: int, controller_id: str, code: str) -> None:
    fenced = Authority(highest_term=3, controller_id="c3", plan_epoch="e1", plan_sequence=1)
    verdict, after = admit(
        command("drain", term=term, controller_id=controller_id),
        host_id=HOST,
        authority=fenced,
        ttl_remaining_s=5,
    )
    assert (verdict.accepted, verdict.status, verdict.code) == (False, ReceiptStatus.FAILED, code)
    assert after == fenced


def test_a_higher_term_takes_over_from_another_controller() -> None:
    fenced = Authority(highest_term=3, controller_id="c3", plan_epoch="e1", plan_sequence=9)
    verdict, after = admit(
        command("warm", term=4, controller_id="c4", sequence=9),
        host_id=HOST,
        authority=fenced,
        ttl_remaining_s=5,
    )
    assert verdict.accepted and (after.highest_term, after.controller_id) == (4, "c4")


def test_spent_authority_is_cancelled_on_the_nodes_own_clock() -> None:
    # The server said 1.0 s were left, but the request itself took 1.5 s on the node's clock.
    ttl = remaining_ttl(1.0, request_duration_s=1.5)
    assert ttl == pytest.approx(-0.5)
    verdict, after = admit(command("warm"), host_id=HOST, authority=FRESH, ttl_remaining_s=ttl)
    assert (verdict.status, verdict.code) == (ReceiptStatus.CANCELLED, "authority_expired")
    assert after == FRESH


@pytest.mark.parametrize("bad", [None, "soon", float("nan"), True])
def test_an_unreadable_ttl_counts_as_no_authority(bad: object) -> None:
    assert remaining_ttl(bad, 0.0) <= 0.0


def test_recommendations_are_not_executed() -> None:
    verdict, _ = admit(
        command("warm", executable=False), host_id=HOST, authority=FRESH, ttl_remaining_s=5
    )
    assert (verdict.status, verdict.code) == (ReceiptStatus.FAILED, "not_executable")


def test_an_older_plan_generation_of_the_same_epoch_is_cancelled() -> None:
    seen = Authority(highest_term=1, controller_id="ctl-1", plan_epoch="e1", plan_sequence=8)
    verdict, after = admit(
        command("warm", sequence=7), host_id=HOST, authority=seen, ttl_remaining_s=5
    )
    assert (verdict.status, verdict.code) == (ReceiptStatus.CANCELLED, "stale_plan_generation")
    assert after == seen
    same, _ = admit(command("warm", sequence=8), host_id=HOST, authority=seen, ttl_remaining_s=5)
    assert same.accepted  # several commands of one plan share its generation


def test_a_new_epoch_behind_the_fence_starts_a_new_order() -> None:
    seen = Authority(highest_term=1, controller_id="ctl-1", plan_epoch="e1", plan_sequence=80)
    verdict, after = admit(
        command("warm", epoch="e2", sequence=2), host_id=HOST, authority=seen, ttl_remaining_s=5
    )
    assert verdict.accepted and (after.plan_epoch, after.plan_sequence) == ("e2", 2)


def test_malformed_commands() -> None:
    no_id = command("warm")
    del no_id["action_id"]
    verdict, _ = admit(no_id, host_id=HOST, authority=FRESH, ttl_remaining_s=5)
    assert not verdict.accepted and verdict.status is None  # nothing to acknowledge
    bad_kind = command("teleport")  # no node command has this kind
    verdict, _ = admit(bad_kind, host_id=HOST, authority=FRESH, ttl_remaining_s=5)
    assert (verdict.status, verdict.code) == (ReceiptStatus.FAILED, "malformed_command")
    bad_generation = command("warm")
    bad_generation["plan_generation"] = "not-a-generation"
    verdict, after = admit(bad_generation, host_id=HOST, authority=FRESH, ttl_remaining_s=5)
    assert verdict.code == "malformed_plan_generation" and after == FRESH


def _start(cmd: dict[str, object], **overrides: object) -> tuple[bool, object, str]:
    settings: dict[str, object] = {
        "now_mono": 10.0,
        "deadline_mono": 20.0,
        "admits_new_work": True,
        "lifecycle": "accepting",
        "dependency_status": lambda _id: ReceiptStatus.SUCCEEDED,
        "free_mb": 4096,
    }
    settings.update(overrides)
    verdict = start_check(WireCommand.model_validate(cmd), **settings)  # type: ignore[arg-type]
    return verdict.accepted, verdict.status, verdict.code


def test_start_needs_authority_left() -> None:
    assert _start(command("drain"), now_mono=20.0) == (
        False,
        ReceiptStatus.CANCELLED,
        "authority_expired",
    )
    assert _start(command("drain"), now_mono=19.9)[0]


def test_local_protection_cancels_load_and_warm_but_not_drain_or_unload() -> None:
    fenced = {"admits_new_work": False, "lifecycle": "paused"}
    for kind in ("load", "warm"):
        assert _start(command(kind), **fenced) == (
            False,
            ReceiptStatus.CANCELLED,
            "local_protection",
        )
    for kind in ("drain", "unload"):
        assert _start(command(kind), **fenced)[0]


@pytest.mark.parametrize("outcome", [ReceiptStatus.FAILED, ReceiptStatus.CANCELLED, None])
def test_dependencies_must_have_succeeded(outcome: ReceiptStatus | None) -> None:
    warm = command("warm", dependencies=["load-1"])
    assert _start(warm, dependency_status=lambda _id: outcome)[2] == "dependency_not_succeeded"
    assert _start(warm, dependency_status=lambda _id: ReceiptStatus.SUCCEEDED)[0]


def test_a_warm_that_local_free_memory_no_longer_admits_fails() -> None:
    warm = command("warm", memory_mb=2048)
    assert _start(warm, free_mb=2047) == (False, ReceiptStatus.FAILED, "insufficient_local_memory")
    assert _start(warm, free_mb=None)[2] == "insufficient_local_memory"  # unknown fails safe
    assert _start(warm, free_mb=2048)[0]
    assert _start(command("load", memory_mb=2048), free_mb=0)[0]  # only a warm claims memory


def test_local_free_memory_counts_managed_residencies_once_and_respects_the_os() -> None:
    ledger = dict(capacity_mb=8000, reserved_mb=1000, external_mb=500, managed_live_mb=2500)
    assert local_free_mb(**ledger, physical_available_mb=64000) == 4000
    assert local_free_mb(**ledger, physical_available_mb=3000) == 3000
    assert local_free_mb(**ledger, physical_available_mb=None) is None
    over = dict(ledger, managed_live_mb=9000)
    assert local_free_mb(**over, physical_available_mb=64000) == 0


def test_a_batch_is_judged_against_the_generation_accepted_before_it() -> None:
    seen = Authority(highest_term=1, controller_id="ctl-1", plan_epoch="e1", plan_sequence=4)
    newer, older, stale = (
        command("warm", sequence=6),
        command("drain", model_id="m2", sequence=5),
        command("unload", model_id="m3", sequence=3),
    )
    verdicts, after = admit_batch(
        [newer, older, stale], host_id=HOST, authority=seen, ttl_remaining_s=5
    )
    assert [v.accepted for _c, v in verdicts] == [True, True, False]
    assert verdicts[2][1].code == "stale_plan_generation"
    assert after.plan_sequence == 6
    # The next batch is judged against the newest generation accepted so far.
    again, _ = admit_batch(
        [command("drain", sequence=5)], host_id=HOST, authority=after, ttl_remaining_s=5
    )
    assert again[0][1].code == "stale_plan_generation"
