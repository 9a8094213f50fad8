"""Wording helpers (issue 14, item 12): hand-worked values."""

from __future__ import annotations

import time

import pytest

from grid.cli.text import duration, local_time, plural, relative

pytestmark = [pytest.mark.unit, pytest.mark.smoke]


def test_plural() -> None:
    assert plural(0, "replica") == "0 replicas"
    assert plural(1, "replica") == "1 replica"
    assert plural(2, "command") == "2 commands"
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"


def test_duration_and_relative() -> None:
    assert duration(10) == "10 s"
    assert duration(600) == "10 min"
    assert duration(2 * 3600 + 300) == "2 h 5 min"
    assert duration(3 * 86400) == "3 d"
    assert relative(110.0, 100.0) == "in 10 s"
    assert relative(40.0, 100.0) == "60 s ago"
    assert relative(100.2, 100.0) == "now"


def test_local_time_same_day_and_other_day() -> None:
    now = time.mktime((2026, 12, 1, 12, 0, 0, 0, 0, -1))
    assert local_time(now - 12, now) == "11:59:48 (12 s ago)"
    assert local_time(now + 10, now) == "12:00:10 (in 10 s)"
    assert local_time(now - 2 * 86400, now) == "2026-11-29 12:00:00 (2 d ago)"
