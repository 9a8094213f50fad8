"""The enrollment book's file keeps its JSON form: a book written before `BookEntry` loads,
and saving it again writes the same text (oracle: the file's text, written by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.api.routes_enroll import BookEntry, _load, _save
from grid.fleet import GridError

pytestmark = pytest.mark.unit

OLD_BOOK = {
    "a" * 64: {
        "created_at": 100.0,
        "credential_ttl_s": 3600.0,
        "expires_at": 1000.0,
        "host_id": "worker-01",
        "used_at": None,
    },
    "b" * 64: {
        "created_at": 50.0,
        "credential_ttl_s": 86400.0,
        "expires_at": 950.0,
        "host_id": "worker-02",
        "used_at": 60.5,
    },
}


def test_an_old_book_loads_and_saves_to_the_same_text(tmp_path: Path) -> None:
    path = tmp_path / "enrollments.json"
    text = json.dumps(OLD_BOOK, indent=1, sort_keys=True)
    path.write_text(text, encoding="utf-8")
    book = _load(path)
    assert book["a" * 64] == BookEntry(
        host_id="worker-01", created_at=100.0, expires_at=1000.0, credential_ttl_s=3600.0
    )
    assert book["b" * 64].used_at == 60.5
    _save(path, book, now=200.0)
    assert path.read_text(encoding="utf-8") == text


def test_a_missing_book_is_empty_and_a_malformed_entry_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "enrollments.json"
    assert _load(path) == {}
    path.write_text(json.dumps({"a" * 64: {"expires_at": 1.0}}), encoding="utf-8")
    with pytest.raises(GridError) as refused:
        _load(path)
    assert refused.value.code == "enrollment_book_unreadable"
