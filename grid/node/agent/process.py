"""Start, find and stop the detached node agent of one state folder (for the CLI and the lab).

Start is idempotent: an agent already running for the folder (proved by its pid record: the
process-birth marker, and a command line that names this module, this folder and the record's
instance id) is left alone. A new agent gets a fresh instance id in its argv; `start_agent`
reports success only once that instance has written status.json, so a stale status file of an
earlier run can never make a start look successful. The credential goes to the agent on its
stdin and is dropped from its environment. Stop signals only a proved agent; an ambiguous or
reused PID is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grid
from grid.fleet import GridError, atomic_write_text, read_json_file
from grid.node.agent.status import read_status
from grid.node.engines import is_alive, read_argv, read_birth_marker

PID_NAME = "agent.pid"
LOG_NAME = "agent.log"
AGENT_MODULE = "grid.node.agent"
SECRET_ENV_PREFIX = "GRID_ALLOCATOR_"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class AgentProcess:
    pid: int
    instance: str
    started_now: bool


def _marker(pid: int) -> str | None:
    birth = read_birth_marker(pid)
    return f"{birth.boot_id}:{birth.start_ticks}" if birth is not None else None


def pid_record(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = read_json_file(state_dir / PID_NAME)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _proven(state_dir: Path, record: dict[str, Any]) -> int | None:
    pid, instance = record.get("pid"), record.get("instance")
    if not isinstance(pid, int) or pid <= 0 or not isinstance(instance, str) or not instance:
        return None
    if not is_alive(pid) or _marker(pid) != record.get("marker"):
        return None
    argv = read_argv(pid) or ()
    expected = (AGENT_MODULE, str(state_dir), instance)
    if not all(part in argv for part in expected):
        return None
    return pid


def running_agent(state_dir: Path) -> AgentProcess | None:
    state_dir = state_dir.absolute()
    record = pid_record(state_dir)
    if record is None:
        return None
    pid = _proven(state_dir, record)
    return AgentProcess(pid, str(record["instance"]), False) if pid is not None else None


def _agent_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SECRET_ENV_PREFIX)}
    env["PYTHONUNBUFFERED"] = "1"
    root = str(Path(grid.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def log_tail(state_dir: Path, lines: int = 6) -> str:
    try:
        text = (state_dir / LOG_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def start_agent(
    state_dir: Path, *, token: str | None, timeout_s: float = START_TIMEOUT_S
) -> AgentProcess:
    """Start the agent of `state_dir` (or find it running). `token` None: node.json names a
    token file the agent reads itself."""
    state_dir = state_dir.absolute()
    running = running_agent(state_dir)
    if running is not None:
        return running
    instance = secrets.token_hex(8)
    argv = [sys.executable, "-m", AGENT_MODULE, "--state-dir", str(state_dir)]
    argv += ["--instance", instance] + (["--token-stdin"] if token else [])
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(state_dir / LOG_NAME, "ab") as log:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if token else subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_agent_env(),
            cwd=state_dir,
            start_new_session=True,  # a terminal ^C does not reach it; `node stop` does
            close_fds=True,
        )
    if token and child.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            child.stdin.write((token + "\n").encode())
        with contextlib.suppress(BrokenPipeError):
            child.stdin.close()
    record = {"pid": child.pid, "marker": _marker(child.pid), "instance": instance}
    atomic_write_text(state_dir / PID_NAME, json.dumps(record) + "\n")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if child.poll() is not None:
            (state_dir / PID_NAME).unlink(missing_ok=True)
            raise GridError(
                "node_agent_failed",
                f"the node agent exited with status {child.returncode} while starting: "
                f"{log_tail(state_dir, 3)}",
                fix=f"read {state_dir / LOG_NAME}",
                next_command=f"tail -n 50 {state_dir / LOG_NAME}",
            )
        status = read_status(state_dir)
        if status is not None and status.instance == instance:
            return AgentProcess(child.pid, instance, True)
        time.sleep(0.05)
    raise GridError(
        "node_agent_timeout",
        f"the node agent did not complete its first heartbeat cycle within {timeout_s:.0f} s",
        fix=f"read {state_dir / LOG_NAME}",
        next_command="grid allocator node stop",
    )


def stop_agent(state_dir: Path, *, force: bool = False, timeout_s: float = STOP_TIMEOUT_S) -> str:
    """Stop the agent gracefully; returns stopped, killed, not_running or stale."""
    state_dir = state_dir.absolute()
    record = pid_record(state_dir)
    if record is None:
        return "not_running"
    pid = _proven(state_dir, record)
    if pid is None:
        raw = record.get("pid")
        if isinstance(raw, int) and is_alive(raw) and _marker(raw) == record.get("marker"):
            raise GridError(
                "ambiguous_process",
                f"process {raw} matches the agent's birth marker but not its command line",
                fix="inspect it by hand; Grid never signals a process it cannot identify",
                next_command=f"ps -o pid,lstart,args -p {raw}",
            )
        (state_dir / PID_NAME).unlink(missing_ok=True)
        return "stale"
    os.kill(pid, signal.SIGUSR1 if force else signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and is_alive(pid):
        time.sleep(0.05)
    outcome = "stopped"
    if is_alive(pid) and _proven(state_dir, record) == pid:
        os.kill(pid, signal.SIGKILL)  # stuck: bounded escalation against the proved process
        outcome = "killed"
        end = time.monotonic() + 10.0
        while time.monotonic() < end and is_alive(pid):
            time.sleep(0.05)
    (state_dir / PID_NAME).unlink(missing_ok=True)
    return outcome
