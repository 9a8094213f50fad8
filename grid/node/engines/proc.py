"""Linux process identity from /proc: liveness, birth marker, executable and exact argv.

A PID alone proves nothing (PIDs are reused); a process is "ours" only when its birth marker
(start time in clock ticks since boot, plus the boot id) and its exact argv and executable match
what was recorded right after spawn. Every reader returns None when /proc cannot answer, so the
caller fails closed: an unreadable process is never treated as proven.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from grid.fleet import process_state, start_ticks

PROC = Path("/proc")
BOOT_ID_PATH = PROC / "sys" / "kernel" / "random" / "boot_id"


@dataclass(frozen=True)
class BirthMarker:
    start_ticks: int
    boot_id: str


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    executable: str
    argv: tuple[str, ...]
    birth: BirthMarker


def read_boot_id() -> str | None:
    try:
        return BOOT_ID_PATH.read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def read_start_ticks(pid: int) -> int | None:
    return start_ticks(pid)


def read_birth_marker(pid: int) -> BirthMarker | None:
    ticks = read_start_ticks(pid)
    boot_id = read_boot_id()
    if ticks is None or boot_id is None:
        return None
    return BirthMarker(start_ticks=ticks, boot_id=boot_id)


def read_argv(pid: int) -> tuple[str, ...] | None:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None  # a zombie or kernel thread: no argv to prove
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts = parts[:-1]
    return tuple(part.decode("utf-8", errors="surrogateescape") for part in parts)


def read_executable(pid: int) -> str | None:
    try:
        return os.readlink(PROC / str(pid) / "exe")
    except OSError:
        return None


def read_identity(pid: int) -> ProcessIdentity | None:
    """Everything needed to prove a process later, or None if any part is unreadable."""
    birth = read_birth_marker(pid)
    executable = read_executable(pid)
    argv = read_argv(pid)
    if birth is None or executable is None or argv is None:
        return None
    # Re-read the birth marker: if the PID was recycled while we read, the two differ.
    if read_birth_marker(pid) != birth:
        return None
    return ProcessIdentity(pid=pid, executable=executable, argv=argv, birth=birth)


def reap_if_own_child(pid: int) -> None:
    """Collect the exit status if `pid` is a finished child of this process (else no-op)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_alive(pid: int) -> bool:
    """True while the PID exists and is not a zombie (a zombie can do no work and holds no port)."""
    if pid <= 0:
        return False
    reap_if_own_child(pid)
    state = process_state(pid)
    return state is not None and state not in ("Z", "X", "x")


def identity_mismatch(
    expected_executable: str | None,
    expected_argv: tuple[str, ...],
    expected_birth: BirthMarker | None,
    observed: ProcessIdentity | None,
) -> str | None:
    """Why `observed` is not the recorded process, or None when every part matches exactly."""
    if observed is None:
        return "process identity unreadable from /proc"
    if expected_birth is None or expected_executable is None:
        return "no birth marker or executable was recorded for this process"
    if observed.birth.boot_id != expected_birth.boot_id:
        return "the machine rebooted since the process was recorded"
    if observed.birth.start_ticks != expected_birth.start_ticks:
        return "the PID belongs to a process started at a different time (PID reuse)"
    if observed.executable != expected_executable:
        return f"executable is {observed.executable!r}, expected {expected_executable!r}"
    if observed.argv != expected_argv:
        return "command line differs from the recorded argv"
    return None
