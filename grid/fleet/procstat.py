"""The one reader of Linux `/proc/<pid>/stat`.

The command name (field 2) may hold spaces and parentheses, so the fields are read after the last
`)`: there the first is field 3 (state) and the twentieth field 22 (starttime, clock ticks since
boot). Every reader returns None when /proc cannot answer; callers decide whether that fails
closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
_STATE = 0  # field 3
_START_TICKS = 19  # field 22


@dataclass(frozen=True)
class ProcStat:
    state: str  # one letter: 'R', 'S', 'Z', ...
    start_ticks: int  # clock ticks since boot


def read_stat(pid: int | str) -> ProcStat | None:
    """State and start time of /proc/<pid>/stat (`pid` may be "self"), or None when unreadable."""
    try:
        raw = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 1 :].split() if ")" in raw else []
    if len(fields) <= _START_TICKS:
        return None
    try:
        return ProcStat(state=fields[_STATE], start_ticks=int(fields[_START_TICKS]))
    except ValueError:
        return None


def process_state(pid: int | str) -> str | None:
    """The one-letter state or None when the PID does not exist."""
    stat = read_stat(pid)
    return stat.state if stat else None


def start_ticks(pid: int | str) -> int | None:
    """The process's start time in clock ticks since boot, or None when unreadable."""
    stat = read_stat(pid)
    return stat.start_ticks if stat else None
