"""Action records: parsing a snapshot's history, receipts, ids, backoff arithmetic."""

from __future__ import annotations

import pytest

from grid.fleet.actions import (
    ActionKind,
    ActionRecord,
    Receipt,
    ReceiptStatus,
    RecordStatus,
    action_id,
    apply_receipt,
    parse_history,
)
from grid.fleet.errors import SnapshotError
from grid.fleet.models import Policy
from grid.runtime.reconcile.history import HistoryIndex, backoff_delay
from tests.runtime.builders import NOW, record

pytestmark = pytest.mark.unit


def test_action_ids_are_stable_and_differ_per_attempt() -> None:
    first = action_id(ActionKind.LOAD, "h1", "m", 1)
    assert first == action_id(ActionKind.LOAD, "h1", "m", 1)
    assert first != action_id(ActionKind.LOAD, "h1", "m", 2)
    assert first != action_id(ActionKind.WARM, "h1", "m", 1)
    assert first != action_id(ActionKind.LOAD, "h2", "m", 1)


def test_parse_history_splits_records_and_tombstones() -> None:
    entries: list[dict[str, object]] = [
        {"action_id": "x1", "kind": "drain", "host_id": "h", "model_id": "m", "status": "pending"},
        {"type": "tombstone", "model_id": "gone", "created_at": 5.0},
    ]
    records, tombstones = parse_history(entries)
    assert [r.action_id for r in records] == ["x1"]
    assert records[0].kind is ActionKind.DRAIN
    assert [(t.model_id, t.created_at) for t in tombstones] == [("gone", 5.0)]


def test_duplicate_record_keeps_the_first_terminal_outcome() -> None:
    base = {"action_id": "x1", "kind": "warm", "host_id": "h", "model_id": "m"}
    entries: list[dict[str, object]] = [
        {**base, "status": "delivered"},
        {**base, "status": "succeeded", "finished_at": 10.0},
        {**base, "status": "failed", "finished_at": 11.0},
    ]
    records, _ = parse_history(entries)
    assert [(r.status, r.finished_at) for r in records] == [(RecordStatus.SUCCEEDED, 10.0)]


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        (
            {"action_id": "x", "kind": "teleport", "host_id": "h", "model_id": "m"},
            "history[0].kind",
        ),
        ({"kind": "load", "host_id": "h", "model_id": "m"}, "history[0].action_id"),
        ({"type": "weird"}, "history[0].type"),
    ],
)
def test_bad_history_entry_is_a_refusal_with_a_path(entry: dict[str, object], path: str) -> None:
    with pytest.raises(SnapshotError) as caught:
        parse_history([entry])
    assert caught.value.code == "invalid_history"
    assert caught.value.path == path


def test_receipts_first_terminal_wins_and_unknown_ids_are_ignored() -> None:
    rec = record("warm", "h1", "m", "delivered")
    done = apply_receipt([rec], Receipt(action_id=rec.action_id, status="succeeded", at=NOW))
    assert done[0].status is RecordStatus.SUCCEEDED and done[0].finished_at == NOW
    again = apply_receipt(done, Receipt(action_id=rec.action_id, status="failed", at=NOW + 1))
    assert again == done  # a conflicting later acknowledgement is ignored
    dup = apply_receipt(done, Receipt(action_id=rec.action_id, status="succeeded", at=NOW + 2))
    assert dup == done
    stray = apply_receipt(done, Receipt(action_id="nope", status="failed", at=NOW))
    assert stray == done


def test_late_success_completes_a_withdrawn_action() -> None:
    rec = record("drain", "h1", "m", "withdrawn", withdrawn_at=NOW - 5)
    rec = rec.model_copy(update={"delivered_at": NOW - 9})
    assert rec.holds_slot  # withdrawn after delivery: may still be running
    out = apply_receipt([rec], Receipt(action_id=rec.action_id, status="succeeded", at=NOW))
    assert out[0].status is RecordStatus.SUCCEEDED and not out[0].holds_slot


def test_cancelled_receipt_keeps_a_withdrawn_record_withdrawn() -> None:
    rec = record("drain", "h1", "m", "withdrawn").model_copy(update={"delivered_at": NOW - 9})
    out = apply_receipt(
        [rec], Receipt(action_id=rec.action_id, status=ReceiptStatus.CANCELLED, at=NOW)
    )
    assert out[0].status is RecordStatus.WITHDRAWN and out[0].finished_at == NOW


def test_backoff_delay_doubles_and_caps() -> None:
    policy = Policy(retry_backoff_base_s=10.0, retry_backoff_cap_s=100.0)
    assert [backoff_delay(policy, n) for n in range(6)] == [0.0, 10.0, 20.0, 40.0, 80.0, 100.0]
    assert backoff_delay(policy, 10_000) == 100.0


def test_success_resets_the_failure_streak() -> None:
    key = (ActionKind.WARM, "h1", "m")
    records: list[ActionRecord] = [
        record("warm", "h1", "m", "failed", attempt=1, created_at=1, finished_at=2),
        record("warm", "h1", "m", "failed", attempt=2, created_at=3, finished_at=4),
        record("warm", "h1", "m", "succeeded", attempt=3, created_at=5, finished_at=6),
        record("warm", "h1", "m", "failed", attempt=4, created_at=7, finished_at=8),
    ]
    index = HistoryIndex(records)
    assert index.consecutive_failures(key) == 1
    assert index.retry_at(key, Policy(retry_backoff_base_s=10.0)) == 18.0
    assert index.next_attempt(key) == 5


def test_terminal_receipt_message_is_kept_as_the_outcome() -> None:
    record = ActionRecord(action_id="a1", kind=ActionKind.LOAD, host_id="h", model_id="m")
    failed = Receipt(action_id="a1", status=ReceiptStatus.FAILED, at=10.0, message="no file")
    (updated,) = apply_receipt([record], failed)
    assert (updated.status, updated.outcome) == (RecordStatus.FAILED, "no file")
    late = Receipt(action_id="a1", status=ReceiptStatus.SUCCEEDED, at=11.0, message="ready")
    (again,) = apply_receipt([updated], late)
    assert again.outcome == "no file"  # the first terminal receipt wins, message included
