"""Real llama-server children with the real SmolLM2-135M weights.

Each test starts at most two short-lived children (readiness in a few seconds on the CPU) and
every child is killed at teardown even when an assertion fails (see engine_fixtures).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from grid.fleet.errors import GridError
from grid.node.engines import ActivityState, EngineState
from grid.node.engines.proc import is_alive
from grid.node.engines.state import EngineStateDoc, EngineStateStore
from tests.node.engine_fixtures import ENGINE_PORTS, MODEL, SupervisorFactory, bearer, chat
from tests.node.processes import ProcessJanitor, wait_until

pytestmark = pytest.mark.engine

REPO_ROOT = Path(__file__).resolve().parents[2]


def _nothing_listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _stored_models(state_dir: Path) -> set[str]:
    return set(EngineStateStore(state_dir).load_or_init().engines)


def test_warm_serves_a_real_completion_then_drains_and_stops(
    make_supervisor: SupervisorFactory,
    smollm2: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GRID_TEST_SENTINEL", "sentinel-secret-7f3a")  # must not reach the child
    supervisor = make_supervisor()
    status = supervisor.warm(MODEL, smollm2)
    assert status.state is EngineState.READY and status.proven
    assert status.pid is not None and status.port is not None and status.base_url is not None
    assert ENGINE_PORTS[0] <= status.port <= ENGINE_PORTS[1]
    key = supervisor.engine_key

    # The key travels only through the 0600 key file, never argv or the environment.
    cmdline = Path(f"/proc/{status.pid}/cmdline").read_bytes()
    environ = Path(f"/proc/{status.pid}/environ").read_bytes()
    assert key.encode() not in cmdline and key.encode() not in environ
    assert str(supervisor.key_file).encode() in cmdline
    assert b"sentinel-secret-7f3a" not in environ

    # A direct request without the key (or with a wrong one) is refused.
    base = status.base_url
    assert httpx.get(f"{base}/v1/models", trust_env=False).status_code == 401
    assert (
        httpx.get(f"{base}/v1/models", headers=bearer("wrong"), trust_env=False).status_code == 401
    )
    models = httpx.get(f"{base}/v1/models", headers=bearer(key), trust_env=False)
    assert models.status_code == 200
    assert MODEL in [entry["id"] for entry in models.json()["data"]]  # --alias is the model id

    response = chat(base, key, MODEL, "Say hello in one word.")
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body["choices"][0]["message"]["content"], str)
    assert body["usage"]["completion_tokens"] >= 1
    assert chat(base, "wrong", MODEL, "hi").status_code == 401

    activity = supervisor.activity(MODEL)
    assert activity.state is ActivityState.IDLE and activity.slots >= 1

    result = supervisor.stop(MODEL)
    assert (result.stopped, result.pid, result.killed, result.forced) == (
        True, status.pid, False, False,
    )  # fmt: skip
    assert not is_alive(status.pid)
    assert _nothing_listens(status.port)
    assert supervisor.status(MODEL) is None
    assert _stored_models(tmp_path / "state") == set()


def test_busy_engine_refuses_a_drain_and_force_cuts_it(
    make_supervisor: SupervisorFactory, smollm2: Path
) -> None:
    # llama-server finishes a running generation before honouring SIGTERM: a short grace
    # period keeps this test fast (the forced stop then ends it with SIGKILL).
    supervisor = make_supervisor(stop_grace_s=1.0)
    status = supervisor.warm(MODEL, smollm2)
    assert status.base_url is not None and status.pid is not None
    outcome: list[object] = []

    def long_request() -> None:
        try:
            outcome.append(chat(status.base_url or "", supervisor.engine_key, MODEL, "Count.", 900))
        except httpx.HTTPError as exc:  # the forced stop cuts it
            outcome.append(exc)

    worker = threading.Thread(target=long_request)
    worker.start()
    try:
        assert wait_until(
            lambda: supervisor.activity(MODEL).state is ActivityState.BUSY, timeout_s=30
        )
        with pytest.raises(GridError) as failure:
            supervisor.stop(MODEL)
        assert failure.value.code == "engine_busy"
        assert is_alive(status.pid)  # a refused drain leaves the engine serving
        result = supervisor.stop(MODEL, force=True)
        assert result.stopped and result.forced
        assert not is_alive(status.pid)
    finally:
        worker.join(timeout=60)
    assert not worker.is_alive() and outcome  # the cut request returned, one way or another


def test_killed_child_is_detected_failed_and_a_new_warm_recovers(
    make_supervisor: SupervisorFactory,
    smollm2: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Relative paths on purpose: the child runs in the state folder, so they must be resolved.
    monkeypatch.chdir(tmp_path)
    supervisor = make_supervisor(Path("relative-state"))
    first = supervisor.warm(MODEL, Path(os.path.relpath(smollm2)))
    assert first.pid is not None
    os.kill(first.pid, signal.SIGKILL)
    assert wait_until(lambda: supervisor.poll()[MODEL].state is EngineState.FAILED, timeout_s=10)
    failed = supervisor.status(MODEL)
    assert failed is not None and failed.pid is None
    assert "signal 9" in failed.reason

    second = supervisor.warm(MODEL, Path(os.path.relpath(smollm2)))
    assert second.state is EngineState.READY and second.pid not in (None, first.pid)
    assert second.base_url is not None
    assert chat(second.base_url, supervisor.engine_key, MODEL, "Hi").status_code == 200
    assert supervisor.stop(MODEL).stopped


_AGENT_SCRIPT = """
import json, sys, time
from pathlib import Path
from grid.node.engines import LlamaCppConfig, LlamaCppSupervisor
state_dir, binary, low, high, model_path, model_id = sys.argv[1:7]
config = LlamaCppConfig(
    state_dir=Path(state_dir), binary=Path(binary), port_range=(int(low), int(high))
)
status = LlamaCppSupervisor(config).warm(model_id, Path(model_path))
print(json.dumps({"pid": status.pid, "port": status.port}), flush=True)
time.sleep(600)
"""


def test_restarted_agent_adopts_the_exact_live_pid_and_can_stop_it(
    make_supervisor: SupervisorFactory,
    smollm2: Path,
    llama_server: Path,
    tmp_path: Path,
    janitor: ProcessJanitor,
) -> None:
    state_dir = tmp_path / "state"
    agent = subprocess.Popen(
        [sys.executable, "-c", _AGENT_SCRIPT, str(state_dir), str(llama_server),
         str(ENGINE_PORTS[0]), str(ENGINE_PORTS[1]), str(smollm2), MODEL],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    janitor.popens.append(agent)  # type: ignore[arg-type]
    assert agent.stdout is not None
    line = agent.stdout.readline()
    assert line, "the first agent did not warm its engine"
    child = json.loads(line)
    janitor.track_pid(child["pid"])
    agent.kill()  # the agent dies abruptly; its engine child survives (own session)
    agent.wait(timeout=10)
    assert is_alive(child["pid"])

    supervisor = make_supervisor(state_dir)
    status = supervisor.status(MODEL)
    assert status is not None
    assert (status.state, status.proven) == (EngineState.READY, True)
    assert (status.pid, status.port) == (child["pid"], child["port"])
    assert status.base_url is not None
    # The durable key was reused: the adopted child accepts the new supervisor's key.
    assert chat(status.base_url, supervisor.engine_key, MODEL, "Hi").status_code == 200
    # Warming again joins the adopted child instead of starting a duplicate.
    assert supervisor.warm(MODEL, smollm2).pid == child["pid"]

    result = supervisor.stop(MODEL)
    assert result.stopped and result.pid == child["pid"]
    assert wait_until(lambda: not is_alive(child["pid"]), timeout_s=10)
    assert _stored_models(state_dir) == set()


class _DiskFullStore(EngineStateStore):
    """The disk (an outside thing) refuses a write: the first post-spawn write, or the second."""

    def __init__(self, state_dir: Path, fail_enrichment_only: bool) -> None:
        super().__init__(state_dir)
        self._fail_enrichment_only = fail_enrichment_only

    def save(self, doc: EngineStateDoc) -> None:
        records = list(doc.engines.values())
        enriched = any(r.birth is not None for r in records)
        if records and (enriched or not self._fail_enrichment_only):
            raise OSError(28, "No space left on device")
        super().save(doc)


@pytest.mark.parametrize("fail_enrichment_only", [False, True], ids=["pid-write", "birth-write"])
def test_a_failed_post_spawn_write_stops_the_child(
    make_supervisor: SupervisorFactory, smollm2: Path, tmp_path: Path, fail_enrichment_only: bool
) -> None:
    state_dir = tmp_path / "state"
    supervisor = make_supervisor(state_dir, store=_DiskFullStore(state_dir, fail_enrichment_only))
    with pytest.raises(GridError) as failure:
        supervisor.warm(MODEL, smollm2)
    assert failure.value.code == "engine_state_write_failed"
    pid = failure.value.details["pid"]
    assert isinstance(pid, int)
    assert not is_alive(pid)
    status = supervisor.status(MODEL)
    assert status is not None and status.state is EngineState.FAILED and status.pid is None
