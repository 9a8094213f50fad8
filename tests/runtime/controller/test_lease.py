"""The single-writer lease: grant, renew, refuse, take over with a higher term."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grid.runtime.controller.lease import LeaseFile, LeaseRecord, decide, process_marker

pytestmark = pytest.mark.unit

NOW = 1_000.0


def held(term: int = 3, expires_at: float = NOW + 10, who: str = "a") -> LeaseRecord:
    return LeaseRecord(controller_id=who, term=term, expires_at=expires_at, acquired_at=NOW - 5)


def test_first_lease_has_term_one() -> None:
    got = decide(None, controller_id="a", now=NOW, ttl_s=15, holder_alive=False)
    assert got.granted and got.takeover and got.record is not None
    assert (got.record.term, got.record.expires_at) == (1, NOW + 15)


def test_renewal_keeps_the_term_and_extends_expiry() -> None:
    got = decide(held(), controller_id="a", now=NOW + 5, ttl_s=15, holder_alive=True)
    assert got.granted and not got.takeover and got.record is not None
    assert got.record.term == 3 and got.record.expires_at == NOW + 20


def test_live_unexpired_holder_refuses_others() -> None:
    got = decide(held(), controller_id="b", now=NOW, ttl_s=15, holder_alive=True)
    assert not got.granted and got.record is None and "term 3" in got.reason


@pytest.mark.parametrize(("expires_at", "alive"), [(NOW - 1, True), (NOW, True), (NOW + 10, False)])
def test_expired_or_dead_holder_is_taken_over_with_a_higher_term(
    expires_at: float, alive: bool
) -> None:
    got = decide(
        held(expires_at=expires_at), controller_id="b", now=NOW, ttl_s=15, holder_alive=alive
    )
    assert got.granted and got.takeover and got.record is not None
    assert got.record.term == 4 and got.record.controller_id == "b"


def test_term_never_goes_below_the_remembered_floor() -> None:
    got = decide(None, controller_id="a", now=NOW, ttl_s=15, holder_alive=False, floor_term=41)
    assert got.record is not None and got.record.term == 42


def test_two_controllers_share_one_file(tmp_path: Path) -> None:
    first = LeaseFile(tmp_path / "s.lease", controller_id="a")
    second = LeaseFile(tmp_path / "s.lease", controller_id="b")
    assert first.acquire(NOW).granted
    assert not second.acquire(NOW + 1).granted  # the holder is this live test process
    assert first.acquire(NOW + 2).granted and first.held is not None and first.held.term == 1
    first.release()
    taken = second.acquire(NOW + 3)
    assert taken.granted and second.held is not None and second.held.term == 2
    assert second.valid(NOW + 4) and not first.valid(NOW + 4)


def test_a_dead_holder_process_is_taken_over_before_expiry(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    path = tmp_path / "s.lease"
    path.write_text(
        json.dumps(
            {
                "controller_id": "dead",
                "term": 7,
                "expires_at": NOW + 3600,
                "acquired_at": NOW,
                "holder_pid": child.pid,
                "holder_marker": "12345",
            }
        )
    )
    lease = LeaseFile(path, controller_id="new")
    decision = lease.acquire(NOW)
    assert decision.granted and decision.takeover
    assert lease.held is not None and lease.held.term == 8


def test_process_marker_tells_live_from_missing() -> None:
    import os

    assert process_marker(os.getpid()) is not None
    assert process_marker(0) is None
