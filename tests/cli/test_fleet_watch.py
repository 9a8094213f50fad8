"""Readings of the logical fleet's status (issue 14, item 1): failure code and reason, when a
start has failed for good. Inputs are status documents shaped as a real run printed them."""

from __future__ import annotations

from typing import Any

import pytest

from grid.cli.fleet_watch import failures, node_lines, split_outcome, start_failed

pytestmark = [pytest.mark.unit, pytest.mark.smoke]

# The receipt message of a real run on a file of random bytes (`grid test start --model bad.gguf`).
OUTCOME = (
    "engine_exited: The bad.gguf engine exited before it became ready: the engine exited with "
    "status 1. Log tail: oad model from /tmp/bad.gguf\n0.00.014.124 E llama_model_load_from_"
    "file_impl: failed to load model\n0.00.014.171 E gguf_init_from_reader: invalid magic "
    "characters: '????', expec"
)


def _record(status: str, *, kind: str = "warm", host: str = "logical-01", attempt: int = 1) -> Any:
    return {
        "action_id": f"{kind}-{host}-{attempt}",
        "kind": kind,
        "host_id": host,
        "model_id": "bad.gguf",
        "status": status,
        "attempt": attempt,
        "finished_at": 100.0 if status in ("failed", "succeeded") else None,
        "outcome": OUTCOME if status == "failed" else "",
    }


def test_split_outcome_keeps_the_code_the_sentence_and_the_last_engine_error() -> None:
    code, reason = split_outcome(OUTCOME)
    assert code == "engine_exited"
    assert reason.startswith("The bad.gguf engine exited before it became ready")
    assert reason.endswith("(gguf_init_from_reader: invalid magic characters: '????', expec)")
    assert "\n" not in reason
    assert split_outcome("") == ("failed", "no reason was reported")
    assert split_outcome("Something odd") == ("failed", "Something odd")


def test_a_failed_start_with_nothing_in_flight_ends_the_wait() -> None:
    doc = {"history": [_record("failed")], "hosts": []}
    found = start_failed(doc, "bad.gguf")
    assert [f.code for f in found] == ["engine_exited"]
    assert found[0].line().startswith("warm bad.gguf@logical-01: engine_exited: The bad.gguf")


def test_a_retry_in_flight_or_a_ready_replica_keeps_waiting() -> None:
    retry = {"history": [_record("failed"), _record("pending", attempt=2)], "hosts": []}
    assert start_failed(retry, "bad.gguf") == []
    elsewhere = {
        "history": [_record("failed"), _record("delivered", host="logical-02")],
        "hosts": [],
    }
    assert start_failed(elsewhere, "bad.gguf") == []
    ready = {
        "history": [_record("failed")],
        "hosts": [
            {"host_id": "logical-02", "residencies": [{"model_id": "bad.gguf", "state": "ready"}]}
        ],
    }
    assert start_failed(ready, "bad.gguf") == []


def test_a_later_success_supersedes_a_failure() -> None:
    doc = {"history": [_record("failed"), _record("succeeded", attempt=2)]}
    assert failures(doc) == []
    again = {
        "history": [
            _record("failed"),
            _record("succeeded", attempt=2),
            _record("failed", attempt=3),
        ]
    }
    assert [f.attempt for f in failures(again)] == [3]


def test_node_lines() -> None:
    doc = {
        "nodes": [
            {
                "host_id": "a",
                "running": True,
                "registered": True,
                "lifecycle": "accepting",
                "residencies": [{"model_id": "m", "state": "cached", "engine": "failed"}],
            },
            {
                "host_id": "b",
                "running": True,
                "registered": False,
                "lifecycle": None,
                "residencies": [],
            },
            {"host_id": "c", "running": False, "residencies": []},
        ]
    }
    assert node_lines(doc) == {
        "a": "accepting; m cached (engine failed)",
        "b": "registering",
        "c": "stopped",
    }
