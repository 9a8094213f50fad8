"""Process identity and restart recovery with stand-in processes (no llama-server needed).

The stand-ins are plain python sleepers whose argv carries the flags a llama-server record
names; the supervisor's binary points at a path that does not exist, so any attempt to spawn
would fail with a different error code than the ones asserted here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.node.engines import EngineState, LlamaCppConfig, LlamaCppSupervisor
from grid.node.engines.proc import (
    identity_mismatch,
    is_alive,
    process_state,
    read_birth_marker,
    read_identity,
)
from grid.node.engines.state import EngineStateStore
from tests.node.processes import ProcessJanitor, free_port, sleeper_argv, wait_until

pytestmark = pytest.mark.service


def _config(state_dir: Path) -> LlamaCppConfig:
    return LlamaCppConfig(
        state_dir=state_dir,
        binary=Path("/nonexistent/llama-server"),
        port_range=(39500, 39599),
        stop_grace_s=5.0,
        probe_timeout_s=0.5,
    )


def _engine_argv(state_dir: Path, model_id: str, port: int) -> list[str]:
    key_file = EngineStateStore(state_dir).key_path
    return sleeper_argv(
        "-m", "/models/m.gguf", "--alias", model_id, "--port", str(port),
        "--api-key-file", str(key_file), "--slots",
    )  # fmt: skip


def _write_record(
    state_dir: Path, model_id: str, pid: int, port: int, argv: list[str], **overrides: object
) -> None:
    """What a previous agent would have left: the record of a child it had spawned."""
    store = EngineStateStore(state_dir)
    doc = store.load_or_init()
    identity = read_identity(pid)
    assert identity is not None
    record: dict[str, object] = {
        "model_id": model_id,
        "pid": pid,
        "port": port,
        "argv": argv,
        "model_path": "/models/m.gguf",
        "executable": identity.executable,
        "birth": dataclasses.asdict(identity.birth),
        "spawned_at": 1.0,
    }
    record.update(overrides)
    raw = json.loads(doc.model_dump_json())
    raw["engines"][model_id] = record
    store.state_path.write_text(json.dumps(raw))


def _stored_models(state_dir: Path) -> set[str]:
    return set(EngineStateStore(state_dir).load_or_init().engines)


def test_identity_matches_only_the_exact_process(janitor: ProcessJanitor) -> None:
    argv = sleeper_argv("--alias", "m")
    popen = janitor.start(argv)
    assert wait_until(lambda: read_identity(popen.pid) is not None, timeout_s=5)
    observed = read_identity(popen.pid)
    assert observed is not None
    assert observed.argv == tuple(argv)
    birth = observed.birth
    assert read_birth_marker(popen.pid) == birth  # stable while the process lives
    exe = observed.executable
    assert identity_mismatch(exe, tuple(argv), birth, observed) is None
    reused = dataclasses.replace(birth, start_ticks=birth.start_ticks + 1)
    assert "PID reuse" in (identity_mismatch(exe, tuple(argv), reused, observed) or "")
    rebooted = dataclasses.replace(birth, boot_id="another-boot")
    assert "rebooted" in (identity_mismatch(exe, tuple(argv), rebooted, observed) or "")
    assert "command line" in (identity_mismatch(exe, (*argv, "x"), birth, observed) or "")
    assert "executable" in (identity_mismatch("/bin/sh", tuple(argv), birth, observed) or "")
    assert identity_mismatch(exe, tuple(argv), birth, None) is not None


def test_a_zombie_is_not_alive(janitor: ProcessJanitor) -> None:
    popen = janitor.start(sleeper_argv())
    assert is_alive(popen.pid)
    popen.kill()
    assert wait_until(lambda: process_state(popen.pid) in (None, "Z"), timeout_s=5)
    assert not is_alive(popen.pid)


def test_unrelated_live_pid_is_kept_failed_and_never_signalled(
    tmp_path: Path, janitor: ProcessJanitor
) -> None:
    unrelated = janitor.start(["sleep", "120"])
    assert wait_until(lambda: read_identity(unrelated.pid) is not None, timeout_s=5)
    port = free_port()
    # The record claims the sleep's PID for model m, with the argv a llama-server would have.
    _write_record(tmp_path, "m", unrelated.pid, port, _engine_argv(tmp_path, "m", port))
    supervisor = LlamaCppSupervisor(_config(tmp_path))
    try:
        status = supervisor.status("m")
        assert status is not None
        assert (status.state, status.proven, status.pid) == (
            EngineState.FAILED,
            False,
            unrelated.pid,
        )
        assert "command line" in status.reason
        for attempt in (
            lambda: supervisor.warm("m", Path("/models/m.gguf")),
            lambda: supervisor.stop("m", force=True),
        ):
            with pytest.raises(GridError) as failure:
                attempt()
            assert failure.value.code == "engine_unproven_process"
        assert supervisor.activity("m").state.value == "unknown"
        assert supervisor.poll()["m"].state is EngineState.FAILED
        assert unrelated.poll() is None  # still running: no signal was sent
        assert process_state(unrelated.pid) in ("S", "R")
        assert _stored_models(tmp_path) == {"m"}  # the record is retained, port stays reserved
    finally:
        supervisor.close()

    # Once the unrelated process is gone, the record is released and m may start again.
    unrelated.kill()
    unrelated.wait(timeout=5)
    supervisor = LlamaCppSupervisor(_config(tmp_path))
    try:
        status = supervisor.status("m")
        assert status is not None and status.pid is None
        assert "exited while the agent was down" in status.reason
        assert _stored_models(tmp_path) == set()
    finally:
        supervisor.close()


def test_pid_reuse_is_not_adopted(tmp_path: Path, janitor: ProcessJanitor) -> None:
    port = free_port()
    argv = _engine_argv(tmp_path, "m", port)
    popen = janitor.start(argv)
    assert wait_until(lambda: read_identity(popen.pid) is not None, timeout_s=5)
    birth = read_birth_marker(popen.pid)
    assert birth is not None
    earlier = {"start_ticks": birth.start_ticks - 100, "boot_id": birth.boot_id}
    _write_record(tmp_path, "m", popen.pid, port, argv, birth=earlier)
    supervisor = LlamaCppSupervisor(_config(tmp_path))
    try:
        status = supervisor.status("m")
        assert status is not None and not status.proven
        assert "PID reuse" in status.reason
        with pytest.raises(GridError):
            supervisor.stop("m", force=True)
        assert popen.poll() is None
    finally:
        supervisor.close()


def test_argv_that_names_another_port_is_not_adopted(
    tmp_path: Path, janitor: ProcessJanitor
) -> None:
    port = free_port()
    argv = _engine_argv(tmp_path, "m", port + 1)  # the process listens elsewhere
    popen = janitor.start(argv)
    assert wait_until(lambda: read_identity(popen.pid) is not None, timeout_s=5)
    _write_record(tmp_path, "m", popen.pid, port, argv)
    supervisor = LlamaCppSupervisor(_config(tmp_path))
    try:
        status = supervisor.status("m")
        assert status is not None and not status.proven
        assert "--port" in status.reason
    finally:
        supervisor.close()


def test_proven_survivor_is_adopted_refuses_blind_drain_and_stops_on_force(
    tmp_path: Path, janitor: ProcessJanitor
) -> None:
    port = free_port()
    argv = _engine_argv(tmp_path, "m", port)
    popen = janitor.start(argv)
    assert wait_until(lambda: read_identity(popen.pid) is not None, timeout_s=5)
    _write_record(tmp_path, "m", popen.pid, port, argv)
    supervisor = LlamaCppSupervisor(_config(tmp_path))
    try:
        status = supervisor.status("m")
        assert status is not None
        assert (status.proven, status.pid, status.port) == (True, popen.pid, port)
        # The stand-in answers no HTTP: not ready yet, and its activity is unknown.
        assert status.state is EngineState.STARTING
        with pytest.raises(GridError) as failure:
            supervisor.stop("m")
        assert failure.value.code == "engine_activity_unknown"
        assert popen.poll() is None  # a refused drain leaves the process alive

        result = supervisor.stop("m", force=True)
        assert (result.stopped, result.pid, result.killed) == (True, popen.pid, False)
        # The supervisor reaped it (it is our child here), so only its absence is observable.
        assert process_state(popen.pid) is None
        assert supervisor.status("m") is None
        assert _stored_models(tmp_path) == set()
    finally:
        supervisor.close()
