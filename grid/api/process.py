"""The local controller process: start it in the background, find it, stop it (`grid up|down`,
the logical fleet).

Start is idempotent: a server already running for the state folder (proved by its pid file, the
process-birth marker, its command line and the instance id its /healthz reports) is left alone.
Secrets stay in `<state-dir>/config.json` (mode 0600, `operator_token`); the server reads them
from there, so neither its arguments nor its environment carry one. Stop signals only a process
it can prove is this state folder's server; an ambiguous or reused PID is never killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from grid.api.settings import CONFIG_NAME, Settings, load_or_create_settings, load_settings
from grid.fleet import GridError, read_json_file
from grid.node.engines import read_argv
from grid.runtime.controller import process_marker
from grid.wire import AllocatorClient

PID_NAME = "server.pid"
LOG_NAME = "server.log"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
SECRET_ENV = ("GRID_ALLOCATOR_CONTROL_TOKEN", "GRID_ALLOCATOR_NODE_TOKEN")


def _pid_record(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = read_json_file(state_dir / PID_NAME)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _owned_process(state_dir: Path, record: dict[str, Any]) -> int | None:
    """The server's pid when the live process is provably this folder's server."""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    marker = process_marker(pid)
    if marker is None or (record.get("marker") and marker != record.get("marker")):
        return None
    cmd = read_argv(pid) or ()
    if "grid.api.server" not in cmd or str(state_dir.resolve()) not in cmd:
        return None
    return pid


UNTRUSTED = "controller_certificate_untrusted"  # grid.wire.client: the TLS handshake's verdict


def _health(settings: Settings) -> GridError | None:
    """None when this folder's server answers /healthz, else why not."""
    try:
        with AllocatorClient(settings.url, timeout_s=2.0, ca_file=settings.ca_file) as client:
            if client.healthz().instance == settings.instance:
                return None
    except GridError as err:
        return err
    return GridError(
        "instance_mismatch",
        "another server answers on this port",
        fix="stop that server, or pick another port with --port",
    )


def _healthy(settings: Settings) -> bool:
    return _health(settings) is None


def _end(child: subprocess.Popen[bytes]) -> None:
    """Stop a server this call started and must not leave running."""
    child.terminate()
    try:
        child.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=5)


def _certificate_refused(state_dir: Path, settings: Settings, err: GridError) -> GridError:
    return GridError(
        "server_certificate_rejected",
        f"the controller started, but its own certificate does not verify for {settings.url}: "
        f"{err.message}; it was stopped again",
        fix="renew an expired certificate, issue it for the host name or address in that URL "
        "(its SAN), or pass --ca-file with the CA that issued it (a self-signed certificate "
        "is its own CA)",
        next_command=f"grid up --state-dir {state_dir} --tls-cert CERT --tls-key KEY --ca-file CA",
    )


def _running(state_dir: Path, settings: Settings) -> int | None:
    record = _pid_record(state_dir)
    if record is None:
        return None
    pid = _owned_process(state_dir, record)
    if pid is None:
        return None
    return pid if _healthy(settings) else None


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _log_tail(state_dir: Path, lines: int = 8) -> str:
    try:
        text = (state_dir / LOG_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def start_server(
    state_dir: Path,
    port: int | None = None,
    listen: dict[str, Any] | None = None,
    *,
    secrets_from: tuple[str, str] | None = None,
) -> tuple[Settings, int, bool]:
    """Start (or find) the server; returns (settings, pid, started_now). `listen`: the host, TLS
    and store settings to record, `secrets_from`: a controller cluster's shared credentials
    (see `load_or_create_settings`)."""
    state_dir = state_dir.expanduser().resolve()
    settings = load_settings(state_dir) if (state_dir / CONFIG_NAME).exists() else None
    if settings is not None:
        pid = _running(state_dir, settings)
        if pid is not None:
            if port is not None and port != settings.port:
                raise GridError(
                    "already_running",
                    f"the controller for {state_dir} already runs on port {settings.port}",
                    fix="run `grid down` first to move it to another port",
                    next_command=f"grid down --state-dir {state_dir}",
                )
            return settings, pid, False
    settings = load_or_create_settings(
        state_dir, port=port, listen=listen, secrets_from=secrets_from
    )
    log = open(state_dir / LOG_NAME, "ab")  # noqa: SIM115 - handed to the child process
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "grid.api.server", "--state-dir", str(state_dir)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_child_env(),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        log.close()
    record = {
        "pid": child.pid,
        "marker": process_marker(child.pid) or "",
        "instance": settings.instance,
        "port": settings.port,
    }
    pid_path = state_dir / PID_NAME
    pid_path.write_text(json.dumps(record), encoding="utf-8")
    os.chmod(pid_path, 0o600)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            pid_path.unlink(missing_ok=True)
            raise GridError(
                "server_failed",
                f"the controller exited with status {child.returncode} while starting: "
                f"{_log_tail(state_dir, 3)}",
                fix=f"read {state_dir / LOG_NAME}; a busy port needs --port",
            )
        problem = _health(settings)
        if problem is None:
            return settings, child.pid, True
        if problem.code == UNTRUSTED:  # waiting cannot help: fail now, with the cause
            _end(child)
            pid_path.unlink(missing_ok=True)
            raise _certificate_refused(state_dir, settings, problem)
        time.sleep(0.2)
    raise GridError(
        "server_timeout",
        f"the controller did not answer within {START_TIMEOUT_S:.0f} s",
        fix=f"read {state_dir / LOG_NAME}",
        next_command=f"grid down --state-dir {state_dir}",
    )


def stop_server(state_dir: Path) -> str:
    """Stop this folder's server; returns what happened (stopped, not_running, stale)."""
    state_dir = state_dir.expanduser().resolve()
    record = _pid_record(state_dir)
    pid_path = state_dir / PID_NAME
    if record is None:
        return "not_running"
    pid = _owned_process(state_dir, record)
    if pid is None:
        raw_pid = record.get("pid")
        marker = process_marker(raw_pid) if isinstance(raw_pid, int) else None
        if marker is not None and (not record.get("marker") or marker == record["marker"]):
            raise GridError(
                "ambiguous_process",
                f"process {raw_pid} is alive but cannot be proved to be this controller",
                fix="inspect it by hand; Grid never kills a process it cannot identify",
            )
        pid_path.unlink(missing_ok=True)
        return "stale"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and process_marker(pid) is not None:
        time.sleep(0.1)
    if process_marker(pid) is not None:
        os.kill(pid, signal.SIGKILL)
    pid_path.unlink(missing_ok=True)
    return "stopped"
