"""Engine state file: a key generated once, owner-only files, refusals for bad files."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.node.engines.state import EngineRecord, EngineStateStore, atomic_write_text

pytestmark = pytest.mark.unit


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_key_is_generated_once_and_written_owner_only(tmp_path: Path) -> None:
    store = EngineStateStore(tmp_path / "state")
    first = store.load_or_init()
    second = EngineStateStore(tmp_path / "state").load_or_init()
    assert first.engine_key == second.engine_key
    assert len(first.engine_key) >= 32
    assert _mode(store.state_path) == 0o600
    assert _mode(store.key_path) == 0o600
    assert store.key_path.read_text() == first.engine_key + "\n"  # llama.cpp: one key per line


def test_two_hosts_get_different_keys(tmp_path: Path) -> None:
    one = EngineStateStore(tmp_path / "a").load_or_init().engine_key
    two = EngineStateStore(tmp_path / "b").load_or_init().engine_key
    assert one != two


def test_records_round_trip(tmp_path: Path) -> None:
    store = EngineStateStore(tmp_path)
    doc = store.load_or_init()
    doc.engines["m"] = EngineRecord(
        model_id="m",
        pid=123,
        port=39100,
        argv=["llama-server"],
        model_path="/m.gguf",
        spawned_at=1.0,
    )
    store.save(doc)
    again = EngineStateStore(tmp_path).load_or_init()
    assert again.engines["m"].pid == 123
    assert again.engines["m"].birth is None  # the second (enrichment) write has not happened


def test_key_file_is_restored_when_missing_or_loosened(tmp_path: Path) -> None:
    store = EngineStateStore(tmp_path)
    key = store.load_or_init().engine_key
    store.key_path.chmod(0o644)
    store.key_path.write_text("tampered\n")
    EngineStateStore(tmp_path).load_or_init()
    assert store.key_path.read_text() == key + "\n"
    assert _mode(store.key_path) == 0o600


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("{not json", "engine_state_corrupt"),
        (json.dumps({"engine_key": "short"}), "engine_state_corrupt"),
        (json.dumps({"engine_key": "k" * 40, "engines": {}, "extra": 1}), "engine_state_corrupt"),
        (json.dumps({"schema_version": 2, "engine_key": "k" * 40}), "engine_state_version"),
    ],
)
def test_unreadable_state_is_a_grid_error(tmp_path: Path, content: str, code: str) -> None:
    (tmp_path / "engines.json").write_text(content)
    with pytest.raises(GridError) as failure:
        EngineStateStore(tmp_path).load_or_init()
    assert failure.value.code == code


def test_atomic_write_replaces_content_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
