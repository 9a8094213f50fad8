"""End-to-end helpers: node agent processes with real llama-server children, and their cleanup.

Every process a test starts is ended by `cleanup_node` (also when the test failed): the agent
is asked to stop (cutting busy children), then SIGKILLed if it is still the recorded process,
then every recorded llama-server child that is still provably ours is SIGKILLed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from grid.fleet.errors import GridError
from grid.lab.logical_fleet import recorded_children
from grid.node.agent.config import CatalogEntry, NodeConfig, save_config
from grid.node.agent.process import pid_record, start_agent, stop_agent
from grid.node.agent.status import read_status
from grid.node.engines.proc import is_alive, read_argv
from grid.node.engines.state import atomic_write_text
from tests.service.harness import ControllerProcess, credential_file, mint


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class EngineNode:
    """One node agent process (as `grid allocator node start` runs it) in its own folder."""

    def __init__(
        self,
        root: Path,
        server: ControllerProcess,
        host_id: str,
        *,
        catalog: list[CatalogEntry],
        ports: tuple[int, int],
        llama_server: Path,
        capacity_mb: int = 2048,
    ) -> None:
        self.host_id = host_id
        self.folder = root / host_id
        self.folder.mkdir(parents=True, mode=0o700)
        token = self.folder / "node.token"
        atomic_write_text(token, credential_file(mint(server, host_id)))
        self.config = NodeConfig(
            grid_url=server.url,
            host_id=host_id,
            token_file=str(token),
            capacity_mb=capacity_mb,
            external_memory="none",
            failure_domain=f"domain-{host_id}",
            telemetry="logical",
            heartbeat_interval_s=0.3,
            engine_port_range=ports,
            llama_server=str(llama_server),
            drain_timeout_s=5.0,
            stop_grace_s=5.0,
            catalog=catalog,
            protection={"debounce_samples": 1, "recovery_cooldown_s": 0.0},
        )
        save_config(self.folder, self.config)

    def start(self) -> int:
        return start_agent(self.folder, token=None).pid

    def agent_pid(self) -> int | None:
        record = pid_record(self.folder)
        pid = record.get("pid") if record else None
        return pid if isinstance(pid, int) and is_alive(pid) else None

    def status(self) -> dict[str, Any]:
        status = read_status(self.folder)
        return status.model_dump(mode="json") if status is not None else {}

    def residency(self, model_id: str) -> dict[str, Any] | None:
        rows = self.status().get("residencies", [])
        return next((r for r in rows if r["model_id"] == model_id), None)

    def ready_residency(self, model_id: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The node's own record once it shows the model ready: the agent writes its status
        file on its own cycle, so it may trail the controller's view by a heartbeat."""

        def ready() -> dict[str, Any] | None:
            row = self.residency(model_id)
            return row if row is not None and row["state"] == "ready" and row["pid"] else None

        found: dict[str, Any] = wait_for(ready, timeout_s, f"{model_id} ready in the node status")
        return found

    def engine_key(self) -> str:
        return (self.folder / "engines" / "engine.keys").read_text(encoding="utf-8").strip()

    def engine_pids(self) -> list[int]:
        return [pid for pid, _proven in recorded_children(self.folder / "engines")]

    def log(self) -> str:
        try:
            return (self.folder / "agent.log").read_text(encoding="utf-8")[-4000:]
        except OSError:
            return ""

    def cleanup(self) -> None:
        cleanup_node(self.folder)


def cleanup_node(folder: Path) -> None:
    with contextlib.suppress(GridError, OSError):
        stop_agent(folder, force=True, timeout_s=30.0)
    record = pid_record(folder)
    pid = record.get("pid") if record else None
    if isinstance(pid, int) and is_alive(pid) and "grid.node.agent" in (read_argv(pid) or ()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for child, proven in recorded_children(folder / "engines"):
        if proven:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    wait_for(lambda: not recorded_children(folder / "engines"), 10.0, "children to exit")


def host_row(admin_status: dict[str, Any], host_id: str, model_id: str) -> dict[str, Any] | None:
    for host in admin_status.get("hosts", []):
        if host["host_id"] == host_id:
            return next((r for r in host["residencies"] if r["model_id"] == model_id), None)
    return None


def chat(
    port: int, key: str | None, model_id: str, prompt: str = "Reply with OK"
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        headers=headers,
        json={
            "model": model_id,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 8,
            "temperature": 0,
        },
        timeout=60,
        trust_env=False,
    )


def completion_text(response: httpx.Response) -> str:
    body = response.json()
    return str(body["choices"][0]["message"]["content"])


def kinds(history: list[dict[str, Any]], host_id: str | None = None) -> list[tuple[str, str]]:
    return [(r["kind"], r["status"]) for r in history if host_id is None or r["host_id"] == host_id]


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1)[-3000:]
