"""Atomic writes: final mode from the start, old-or-new content, no temporary file left behind."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from grid.fleet.files import atomic_write_text

pytestmark = pytest.mark.unit


def test_writes_with_the_requested_mode_and_replaces_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    atomic_write_text(target, "old")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    atomic_write_text(target, "new", 0o644)
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_write_text(target, "old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "bad \udc80 surrogate")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
