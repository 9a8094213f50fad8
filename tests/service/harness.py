"""A real controller process on loopback and fake nodes that speak real HTTP to it.

`ControllerProcess` runs `python -m grid.api.server --state-dir DIR` exactly as `grid up` does,
on a free port, and can stop it gracefully or with SIGKILL. `HttpNode` wraps the fake node agent
of the controller tests (tests/support/fake_node.py) with the real httpx client.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from grid.api.settings import Settings, load_or_create_settings, write_settings
from grid.fleet.errors import GridError
from grid.fleet.wire import NodeReply
from grid.node.agent import credential_text
from grid.wire import AllocatorClient
from tests.support.fake_node import FakeNode

REPO = Path(__file__).resolve().parents[2]
FAST_CONTROLLER = {
    "engine": "cpsat",
    "plan_budget_s": 1.0,
    "deterministic": True,
    "periodic_interval_s": 1.0,
    "membership_grace_s": 3.0,
    "lease_ttl_s": 6.0,
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ControllerProcess:
    def __init__(
        self,
        state_dir: Path,
        controller: dict[str, Any] | None = None,
        breaker: dict[str, Any] | None = None,
    ) -> None:
        self.state_dir = state_dir
        base = load_or_create_settings(state_dir, port=free_port())
        self.settings = Settings(
            base.operator_token,
            base.node_signing_key,
            base.host,
            base.port,
            base.instance,
            dict(controller or FAST_CONTROLLER),
            dict(breaker or {}),
            open_access=True,  # loopback: /v1 without client keys (tests of keys turn it off)
        )
        write_settings(state_dir, self.settings)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = state_dir / "server.log"

    @property
    def url(self) -> str:
        return self.settings.url

    def start(self, timeout_s: float = 30.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_ALLOCATOR")}
        env["PYTHONPATH"] = str(REPO)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "grid.api.server", "--state-dir", str(self.state_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            with contextlib.suppress(GridError), AllocatorClient(self.url, timeout_s=1) as c:
                c.healthz()
                return
            time.sleep(0.1)
        raise RuntimeError("server did not start")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, the lease is not released."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def admin(self) -> AllocatorClient:
        return AllocatorClient(self.url, operator_token=self.settings.operator_token)

    def public(self) -> AllocatorClient:
        return AllocatorClient(self.url)


class HttpNode:
    """A fake node agent talking to the controller over HTTP with its host credential."""

    def __init__(self, fake: FakeNode, url: str, token: str, reply_key: str | None = None) -> None:
        self.fake = fake
        if reply_key is not None:
            REPLY_KEYS[token] = reply_key
        self.client = node_client(url, token)
        self.acks: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    def register(self) -> NodeReply:
        return self.client.put_node(self.fake.node_id, self.fake.registration())

    def poll(self, *, execute: bool = True) -> list[dict[str, Any]]:
        started = time.monotonic()
        reply = self.client.put_node(self.fake.node_id, self.fake.heartbeat(self.acks))
        self.acks = []
        block = reply.allocator
        commands: list[dict[str, Any]] = block.commands
        self.received += commands
        # Authority in the node's own clock: the TTL less the whole request duration.
        ttl = (block.controller_lease_ttl_seconds or 0.0) - (time.monotonic() - started)
        if execute:
            for command in commands:
                ack = self.fake.execute(command, now=time.time(), ttl_s=ttl)
                if ack is not None:
                    self.acks.append(ack)
        return commands

    def close(self) -> None:
        self.client.close()


# The reply key of every credential `mint` handed out: a node client must verify replies with it.
REPLY_KEYS: dict[str, str] = {}


def mint(server: ControllerProcess, host_id: str) -> str:
    """A fresh credential's token; its reply key is kept for `node_client`/`credential_file`."""
    with server.admin() as admin:
        minted = admin.node_credential(host_id)
    token: str = minted.token
    REPLY_KEYS[token] = minted.reply_key
    return token


def node_client(url: str, token: str, **options: Any) -> AllocatorClient:
    """A node's client: its token, and the reply key every reply is verified with."""
    key = REPLY_KEYS.get(token, "not-the-reply-key")  # a forged token has none
    return AllocatorClient(url, node_token=token, reply_key=key, **options)


def credential_file(token: str) -> str:
    """What a credential file holds for a minted token (the token and its reply key)."""
    return credential_text(token, REPLY_KEYS[token])


def converge(nodes: list[HttpNode], rounds: int = 8) -> None:
    for _ in range(rounds):
        for node in nodes:
            node.poll()
