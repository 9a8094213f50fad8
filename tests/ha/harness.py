"""Several real controller processes on one etcd store (`grid up --store etcd://...` as the
server reads it): one shared cluster credential, each its own folder and port."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from grid.api.auth import new_secret
from grid.api.settings import Settings, write_settings
from tests.service.harness import FAST_CONTROLLER, ControllerProcess, free_port

HA_CONTROLLER = {**FAST_CONTROLLER, "lease_ttl_s": 3.0}


class HAControllerProcess(ControllerProcess):
    def __init__(
        self,
        state_dir: Path,
        store: str,
        secrets: tuple[str, str],
        controller: dict[str, Any] | None = None,
    ) -> None:
        self.state_dir = state_dir
        self.settings = Settings(
            secrets[0],
            secrets[1],
            port=free_port(),
            instance=new_secret()[:16],
            controller=dict(controller or HA_CONTROLLER),
            store=store,
            open_access=True,  # loopback test controllers: /v1 without client keys
        )
        write_settings(state_dir, self.settings)
        self.proc = None
        self.log_path = state_dir / "server.log"

    def authority(self) -> dict[str, Any] | None:
        try:
            reply = httpx.get(f"{self.url}/allocator/status?history=0", timeout=3.0)
        except httpx.HTTPError:
            return None
        auth: dict[str, Any] = reply.json()["authority"]
        return auth

    def status(self) -> dict[str, Any]:
        with self.public() as api:
            return api.status(history=200).model_dump(mode="json")

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)


def start_controllers(root: Path, store: str, n: int, **extra: Any) -> list[HAControllerProcess]:
    """`n` controllers started at once (each waited for in turn)."""
    shared = (new_secret(), new_secret())
    made = [HAControllerProcess(root / f"ctl{i}", store, shared, **extra) for i in range(n)]
    threads = [threading.Thread(target=ctl.start, args=(60.0,)) for ctl in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ctl in made:
        if ctl.proc is None or ctl.proc.poll() is not None:
            raise RuntimeError(f"controller did not start: {ctl.log_path.read_text()[-2000:]}")
    return made


def leader_of(
    controllers: list[HAControllerProcess], timeout_s: float = 15.0
) -> HAControllerProcess:
    """The one controller that reports itself leader (waits for an election)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leading = [
            c
            for c in controllers
            if c.proc is not None
            and c.proc.poll() is None
            and (c.authority() or {}).get("role") == "leader"
        ]
        if len(leading) == 1:
            return leading[0]
        assert len(leading) <= 1, "two controllers report themselves leader"
        time.sleep(0.1)
    raise AssertionError("no controller leads")
