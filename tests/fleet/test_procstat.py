"""The one /proc/<pid>/stat reader, against real processes (issue 26: one place per rule)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from grid.fleet import process_state, read_stat, start_ticks

pytestmark = pytest.mark.unit


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(
    tmp_path: Path,
) -> None:
    sleep = shutil.which("sleep")
    assert sleep
    odd = tmp_path / "x) (y z"
    odd.symlink_to(sleep)
    before = start_ticks("self")
    child = subprocess.Popen([str(odd), "30"])
    try:
        deadline = time.monotonic() + 5
        while process_state(child.pid) not in ("S", "R") and time.monotonic() < deadline:
            time.sleep(0.01)
        comm = Path(f"/proc/{child.pid}/comm").read_text().strip()
        assert ")" in comm and " " in comm  # the name really is the hostile one
        stat = read_stat(child.pid)
        assert stat is not None and stat.state in ("S", "R")
        assert before is not None and stat.start_ticks >= before  # started after this process
    finally:
        child.kill()
        child.wait()
    assert process_state(child.pid) is None


def test_self_and_own_pid_agree_and_a_missing_pid_is_none() -> None:
    assert start_ticks("self") == start_ticks(os.getpid())
    assert read_stat(2**22 + 1) is None  # above the kernel's pid_max ceiling
