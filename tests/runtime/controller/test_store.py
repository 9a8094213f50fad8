"""Durable state: atomic writes, owner-only files, quarantine of a corrupt document."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.runtime.controller.store import MemoryStore, StateStore

pytestmark = pytest.mark.unit


def test_save_then_load_round_trips_owner_only_without_leftovers(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.json")
    store.save({"mode": "automatic", "records": [1, 2]})
    assert store.load().document == {"mode": "automatic", "records": [1, 2]}
    assert stat.S_IMODE((tmp_path / "state.json").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_missing_file_is_a_clean_start_without_warning(tmp_path: Path) -> None:
    loaded = StateStore(tmp_path / "state.json").load()
    assert loaded.document is None and loaded.warning_code == ""


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_corrupt_file_is_moved_aside_intact(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    store = StateStore(path)
    loaded = store.load()
    assert loaded.document is None
    assert loaded.warning_code == "state_quarantined"
    assert not path.exists()
    assert (tmp_path / "state.json.corrupt-1").read_bytes() == content
    assert store.durable
    store.save({"fresh": True})  # the clean controller can write again
    assert json.loads(path.read_text()) == {"fresh": True}


def test_second_quarantine_keeps_the_first(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    for text in (b"bad-1", b"bad-2"):
        path.write_bytes(text)
        StateStore(path).load()
    assert (tmp_path / "state.json.corrupt-1").read_bytes() == b"bad-1"
    assert (tmp_path / "state.json.corrupt-2").read_bytes() == b"bad-2"


def test_failed_quarantine_makes_the_store_not_durable_and_never_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(b"corrupt evidence")

    def refuse(*_args: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    store = StateStore(path)
    loaded = store.load()
    assert loaded.warning_code == "state_quarantine_failed"
    assert not store.durable
    store.save({"would": "overwrite"})
    assert path.read_bytes() == b"corrupt evidence"


def test_write_failure_is_a_grid_error_and_keeps_the_old_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    store = StateStore(path)
    store.save({"generation": 1})

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(GridError) as err:
        store.save({"generation": 2})
    assert err.value.code == "state_write_failed"
    assert json.loads(path.read_text()) == {"generation": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_memory_store_is_never_durable() -> None:
    store = MemoryStore()
    store.save({"a": 1})
    assert not store.durable and store.load().document is None
