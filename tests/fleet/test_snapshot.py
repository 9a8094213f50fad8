"""Snapshot loading and validation: stable error codes with field paths, and the defaults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grid.fleet.errors import GridError, SnapshotError
from grid.fleet.models import HostState, ResidencyState
from grid.fleet.snapshot import load_snapshot, parse_snapshot, save_snapshot

pytestmark = pytest.mark.unit

NOW = 1_785_300_000.0


def _doc() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "now": NOW,
        "hosts": [
            {"host_id": "gpu-01", "capacity_mb": 81920, "last_heartbeat": NOW - 5},
            {"host_id": "mac-01", "capacity_mb": 32768, "last_heartbeat": NOW - 5},
        ],
        "models": [
            {"model_id": "coder", "memory_mb": 24576, "max_replicas": 2},
            {"model_id": "chat", "memory_mb": 4096},
        ],
        "demand": {"coder": {"offered_concurrency": 1.0}},
    }


def _refusal(doc: Any) -> SnapshotError:
    with pytest.raises(SnapshotError) as info:
        parse_snapshot(doc)
    assert isinstance(info.value, GridError)
    assert info.value.message and info.value.fix, "every refusal carries a sentence and a fix"
    return info.value


def test_valid_document_parses_with_spec_defaults() -> None:
    snap = parse_snapshot(_doc())
    gpu = snap.host("gpu-01")
    chat = snap.model("chat")
    assert gpu is not None and chat is not None
    assert gpu.state is HostState.ACCEPTING
    assert gpu.throttle_fraction == 1.0
    assert gpu.max_models == 0 and gpu.disk_free_mb is None
    assert chat.min_replicas == 0 and chat.max_replicas == 1
    assert chat.max_colocated_models == 0 and chat.min_failure_domains == 1
    assert snap.policy.memory_headroom_fraction == pytest.approx(0.05)
    assert snap.policy.heartbeat_future_skew_s == pytest.approx(30.0)


def test_duplicate_host_id_names_the_second_occurrence() -> None:
    doc = _doc()
    doc["hosts"][1]["host_id"] = "gpu-01"
    err = _refusal(doc)
    assert (err.code, err.path) == ("duplicate_id", "hosts[1].host_id")


def test_duplicate_model_id_names_the_second_occurrence() -> None:
    doc = _doc()
    doc["models"][1]["model_id"] = "coder"
    err = _refusal(doc)
    assert (err.code, err.path) == ("duplicate_id", "models[1].model_id")


def test_duplicate_residency_on_one_host_is_refused() -> None:
    doc = _doc()
    doc["hosts"][0]["residencies"] = [
        {"model_id": "chat", "memory_mb": 4096},
        {"model_id": "chat", "memory_mb": 4096, "state": "warming"},
    ]
    err = _refusal(doc)
    assert (err.code, err.path) == ("duplicate_residency", "hosts[0].residencies[1].model_id")


def test_demand_naming_an_unknown_model_is_refused() -> None:
    doc = _doc()
    doc["demand"]["ghost"] = {"rpm": 3}
    err = _refusal(doc)
    assert (err.code, err.path) == ("unknown_model", "demand.ghost")


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("hosts", 0), "capacity_mb"),
        (("hosts", 1), "reserved_mb"),
        (("models", 0), "memory_mb"),
        (("models", 1), "artifact_size_mb"),
    ],
)
def test_negative_numbers_are_refused_with_their_path(where: tuple[str, int], field: str) -> None:
    doc = _doc()
    doc[where[0]][where[1]][field] = -1
    err = _refusal(doc)
    assert (err.code, err.path) == ("negative_number", f"{where[0]}[{where[1]}].{field}")


def test_negative_offered_concurrency_is_refused() -> None:
    doc = _doc()
    doc["demand"]["coder"]["offered_concurrency"] = -0.5
    err = _refusal(doc)
    assert (err.code, err.path) == ("negative_number", "demand.coder.offered_concurrency")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    ("container", "field"),
    [("host", "memory_bandwidth_gbps"), ("host", "capacity_mb"), ("demand", "trend")],
)
def test_non_finite_json_numbers_are_refused(literal: str, container: str, field: str) -> None:
    doc = _doc()
    target = doc["hosts"][0] if container == "host" else doc["demand"]["coder"]
    target[field] = "@@"
    text = json.dumps(doc).replace('"@@"', literal)  # JSON as other tools write it
    err = _refusal(json.loads(text))
    expected_path = "hosts[0]." + field if container == "host" else "demand.coder." + field
    assert (err.code, err.path) == ("non_finite_number", expected_path)


def test_non_finite_policy_number_is_refused() -> None:
    doc = _doc()
    doc["policy"] = {"memory_headroom_fraction": float("nan")}
    err = _refusal(doc)
    assert (err.code, err.path) == ("non_finite_number", "policy.memory_headroom_fraction")


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["hosts"][0].update(state="sleeping"), "hosts[0].state"),
        (
            lambda d: d["hosts"][1].update(residencies=[{"model_id": "chat", "state": "zombie"}]),
            "hosts[1].residencies[0].state",
        ),
        (lambda d: d["demand"]["coder"].update(evidence="rumour"), "demand.coder.evidence"),
        (lambda d: d["hosts"][0].update(ownership="borrowed"), "hosts[0].ownership"),
    ],
)
def test_unknown_enum_values_are_refused(mutate: Any, path: str) -> None:
    doc = _doc()
    mutate(doc)
    err = _refusal(doc)
    assert (err.code, err.path) == ("unknown_enum_value", path)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["hosts"][0].update(colour="red"), "hosts[0].colour"),
        (lambda d: d["models"][1].update(memroy_mb=1), "models[1].memroy_mb"),
        (lambda d: d.update(comment="hi"), "comment"),
        (lambda d: d["demand"]["coder"].update(qps=3), "demand.coder.qps"),
    ],
)
def test_unknown_fields_are_refused(mutate: Any, path: str) -> None:
    doc = _doc()
    mutate(doc)
    err = _refusal(doc)
    assert (err.code, err.path) == ("unknown_field", path)


def test_min_replicas_above_max_is_refused() -> None:
    doc = _doc()
    doc["models"][1].update(min_replicas=3, max_replicas=2)
    err = _refusal(doc)
    assert (err.code, err.path) == ("replica_bounds", "models[1].min_replicas")


def test_equal_replica_bounds_are_accepted() -> None:
    doc = _doc()
    doc["models"][1].update(min_replicas=2, max_replicas=2)
    assert parse_snapshot(doc).models[1].min_replicas == 2


@pytest.mark.parametrize("version", [0, 2, "1"])
def test_wrong_schema_version_is_refused(version: object) -> None:
    doc = _doc()
    doc["schema_version"] = version
    err = _refusal(doc)
    assert (err.code, err.path) == ("unsupported_schema_version", "schema_version")


def test_a_document_that_is_not_an_object_is_refused() -> None:
    err = _refusal([_doc()])
    assert err.code == "invalid_document"


def test_missing_required_field_is_named() -> None:
    doc = _doc()
    del doc["models"][0]["memory_mb"]
    err = _refusal(doc)
    assert (err.code, err.path) == ("missing_field", "models[0].memory_mb")


def test_malformed_sha256_is_refused() -> None:
    doc = _doc()
    doc["models"][0]["artifact_sha256"] = "abc"
    err = _refusal(doc)
    assert err.path == "models[0].artifact_sha256"


def test_sha256_is_canonicalized_to_lower_case() -> None:
    doc = _doc()
    doc["models"][0]["artifact_sha256"] = "AB" * 32
    assert parse_snapshot(doc).models[0].artifact_sha256 == "ab" * 32


def test_missing_now_is_filled_from_the_caller_clock() -> None:
    doc = _doc()
    del doc["now"]
    snap = parse_snapshot(doc, now=NOW + 42)
    assert snap.now == NOW + 42


def test_missing_now_without_a_clock_is_refused() -> None:
    doc = _doc()
    del doc["now"]
    err = _refusal(doc)
    assert (err.code, err.path) == ("missing_field", "now")


def test_missing_heartbeat_means_seen_at_now() -> None:
    doc = _doc()
    del doc["hosts"][1]["last_heartbeat"]
    snap = parse_snapshot(doc)
    assert snap.hosts[1].last_heartbeat == NOW
    assert snap.hosts[0].last_heartbeat == NOW - 5, "an explicit heartbeat is kept"


def test_missing_heartbeat_and_now_both_take_the_caller_clock() -> None:
    doc = _doc()
    del doc["now"]
    del doc["hosts"][0]["last_heartbeat"]
    snap = parse_snapshot(doc, now=NOW + 7)
    assert snap.hosts[0].last_heartbeat == NOW + 7


def test_pin_to_a_host_outside_the_snapshot_is_not_an_error() -> None:
    doc = _doc()
    doc["models"][0]["pinned_hosts"] = ["offline-host"]
    snap = parse_snapshot(doc)
    assert snap.models[0].pinned_hosts == ["offline-host"]


def test_unmanaged_residency_defaults_to_external_ownership() -> None:
    doc = _doc()
    doc["hosts"][0]["residencies"] = [{"model_id": "chat", "memory_mb": 4096, "managed": False}]
    res = parse_snapshot(doc).hosts[0].residencies[0]
    assert res.state is ResidencyState.READY
    assert res.owner.value == "external" and not res.is_managed


def test_toml_snapshot_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "office.toml"
    path.write_text(
        "\n".join(
            [
                "schema_version = 1",
                "",
                "[[hosts]]",
                'host_id = "mac-01"',
                "capacity_mb = 32768",
                'tags = ["employee"]',
                "",
                "[[models]]",
                'model_id = "chat"',
                "memory_mb = 4096",
                "",
                "[demand.chat]",
                "offered_concurrency = 0.5",
            ]
        ),
        encoding="utf-8",
    )
    snap = load_snapshot(path, now=NOW)
    assert snap.now == NOW
    assert snap.hosts[0].tags == ["employee"]
    assert snap.hosts[0].last_heartbeat == NOW
    assert snap.demand["chat"].offered_concurrency == pytest.approx(0.5)


def test_bad_toml_value_reports_the_same_codes_as_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'schema_version = 1\nnow = 1.0\n[[hosts]]\nhost_id = "a"\ncapacity_mb = -5\n',
        encoding="utf-8",
    )
    with pytest.raises(SnapshotError) as info:
        load_snapshot(path)
    assert (info.value.code, info.value.path) == ("negative_number", "hosts[0].capacity_mb")


def test_json_file_round_trips_through_save(tmp_path: Path) -> None:
    original = parse_snapshot(_doc())
    path = tmp_path / "nested" / "fleet.json"
    save_snapshot(original, path)
    again = load_snapshot(path)
    assert again == original
    assert not [p for p in path.parent.iterdir() if p.name != "fleet.json"], "no temp files left"


def test_missing_file_and_bad_syntax_are_refusals(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError) as missing:
        load_snapshot(tmp_path / "nope.json")
    assert missing.value.code == "file_not_found"
    broken = tmp_path / "broken.json"
    broken.write_text('{"hosts": [', encoding="utf-8")
    with pytest.raises(SnapshotError) as syntax:
        load_snapshot(broken)
    assert syntax.value.code == "invalid_syntax"
