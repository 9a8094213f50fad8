"""One engine child as the supervisor holds it, and the acts on its process (grid/node/engines).

`EngineChild` is the supervisor's record of one child: its persisted `EngineRecord`, its state,
and whether its identity is proved. The functions here are the process-level steps the
supervisor's safety rules are made of (llamacpp.py): spawn with a scrubbed environment, prove
identity right before each signal, signal only a proven process, wait with a bound, and refuse
a stop while the engine is busy. They take the child and the paths they need; no lock is taken
here (the supervisor holds its own).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grid.fleet import GridError
from grid.node.engines.adapters import LaunchSpec
from grid.node.engines.base import EngineState
from grid.node.engines.launch import argv_contradiction, child_env
from grid.node.engines.probes import Activity, ActivityState
from grid.node.engines.proc import identity_mismatch, is_alive, read_identity
from grid.node.engines.state import EngineRecord


@dataclass
class EngineChild:
    record: EngineRecord
    state: EngineState
    proven: bool
    reason: str = ""
    stopping: bool = False  # a stop is signalling it: warm must not join it
    spec: LaunchSpec | None = None  # what it was started with (None: adopted)
    # Set only when this instance spawned the child: the handle itself proves identity and
    # lets us reap it. Adopted children are proved through /proc instead.
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)


def spawn(argv: list[str], log_file: Path, cwd: Path, binary: Path) -> subprocess.Popen[bytes]:
    """Start the child in its own session with a scrubbed environment, output to `log_file`."""
    log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        with log_file.open("wb") as log:
            return subprocess.Popen(
                argv,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                close_fds=True,
                start_new_session=True,  # survives the agent; a terminal ^C does not reach it
                cwd=cwd,
            )
    except OSError as exc:
        raise GridError(
            code="engine_spawn_failed",
            message=f"Cannot start {binary}: {exc}.",
            fix="Run scripts/install-engine.sh, or configure the llama-server path.",
            next_command="bash scripts/install-engine.sh",
        ) from exc


def alive(child: EngineChild) -> bool:
    if child.popen is not None:
        return child.popen.poll() is None
    return is_alive(child.record.pid)


def identity_problem(record: EngineRecord, key_path: Path, state_dir: Path) -> str | None:
    """Why the live PID of `record` is not provably our child, or None when it is."""
    birth = record.birth.marker() if record.birth is not None else None
    observed = read_identity(record.pid)
    reason = identity_mismatch(record.executable, tuple(record.argv), birth, observed)
    if reason is not None:
        return reason
    return argv_contradiction(record, key_path, state_dir)


def proven_now(child: EngineChild, key_path: Path, state_dir: Path) -> bool:
    """Proof right before a signal: our own unreaped child, or an exact /proc match."""
    if child.popen is not None:
        return child.popen.poll() is None
    return identity_problem(child.record, key_path, state_dir) is None


def signal_if_proven(child: EngineChild, signum: int, key_path: Path, state_dir: Path) -> bool:
    if not proven_now(child, key_path, state_dir):
        return False
    try:
        os.kill(child.record.pid, signum)
    except ProcessLookupError:
        return False
    return True


def wait_gone(child: EngineChild, timeout_s: float, poll_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(child):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def kill_own(child: EngineChild, wait_s: float) -> None:
    """Stop a child this instance just spawned (used when a post-spawn step fails)."""
    popen = child.popen
    if popen is None or popen.poll() is not None:
        return
    popen.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=wait_s)


def unproven_error(child: EngineChild) -> GridError:
    record = child.record
    return GridError(
        code="engine_unproven_process",
        message=(
            f"PID {record.pid} (port {record.port}) is recorded for {record.model_id} but "
            f"cannot be proved to be its engine ({child.reason}); it is left untouched."
        ),
        fix="Inspect that process by hand; once it is gone the record is released.",
        details={"pid": record.pid, "port": record.port},
        next_command=f"ps -o pid,lstart,args -p {record.pid}",
    )


def require_idle(
    model_id: str, activity: Callable[[], Activity], drain_timeout_s: float, poll_s: float
) -> None:
    """Return once the engine is idle; refuse (busy, or activity unknown) after the drain."""
    deadline = time.monotonic() + drain_timeout_s
    while True:
        seen = activity()
        if seen.idle:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(poll_s)
    if seen.state is ActivityState.BUSY:
        raise GridError(
            code="engine_busy",
            message=(
                f"The {model_id} engine still processes {seen.processing} "
                f"request(s); it was left running."
            ),
            fix="Wait for the drain to finish, or stop with force to cut the requests.",
            next_command="grid allocator node stop --force",
        )
    raise GridError(
        code="engine_activity_unknown",
        message=(
            f"The activity of the {model_id} engine cannot be read ({seen.reason}); "
            "it was left running."
        ),
        fix="Retry once the engine answers /slots, or stop with force.",
        next_command="grid allocator node stop --force",
    )
