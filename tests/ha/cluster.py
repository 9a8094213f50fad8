"""A real etcd cluster on loopback ports: Debian's `etcd` binary, one process per member.

Used by the HA tests and `bench/bench_failover.py`. Every member gets a free client and peer
port on 127.0.0.1 and its own data folder; `stop_member`/`start_member` kill and restart one
member (SIGKILL: what a machine loss looks like), and `stop` ends them all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def etcd_available() -> bool:
    return Path(ETCD).is_file() and os.access(ETCD, os.X_OK)


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in socks:
        sock.close()
    return ports


@dataclass
class Member:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"


@dataclass
class EtcdCluster:
    root: Path
    size: int = 3
    members: list[Member] = field(default_factory=list)

    def __post_init__(self) -> None:
        ports = free_ports(2 * self.size)
        for i in range(self.size):
            name = f"m{i}"
            self.members.append(Member(name, ports[2 * i], ports[2 * i + 1], self.root / name))

    @property
    def endpoints(self) -> list[str]:
        return [m.endpoint for m in self.members]

    @property
    def store_url(self) -> str:
        return "etcd://" + ",".join(self.endpoints)

    def start(self, timeout_s: float = 30.0) -> EtcdCluster:
        for member in self.members:
            self.start_member(member, wait=False)
        self.wait_healthy(self.members, timeout_s)
        return self

    def _argv(self, member: Member) -> list[str]:
        initial = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in self.members)
        return [
            ETCD,
            "--name", member.name,
            "--data-dir", str(member.data_dir),
            "--listen-client-urls", f"http://{member.endpoint}",
            "--advertise-client-urls", f"http://{member.endpoint}",
            "--listen-peer-urls", f"http://127.0.0.1:{member.peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{member.peer_port}",
            "--initial-cluster", initial,
            "--initial-cluster-token", f"grid-{self.root.name}",
            "--initial-cluster-state", "new",
            "--heartbeat-interval", "100",
            "--election-timeout", "1000",
            "--auto-compaction-mode", "revision",
            "--auto-compaction-retention", "1000",
            "--log-level", "error",
        ]  # fmt: skip

    def start_member(self, member: Member, *, wait: bool = True) -> None:
        member.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.root / f"{member.name}.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            member.process = subprocess.Popen(
                self._argv(member), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        if wait:
            self.wait_healthy([member], 30.0)

    def kill_member(self, member: Member) -> None:
        if member.process is not None and member.process.poll() is None:
            member.process.send_signal(signal.SIGKILL)
            member.process.wait(timeout=10)
        member.process = None

    def wait_healthy(self, members: list[Member], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        pending = list(members)
        while pending:
            member = pending[0]
            try:
                reply = httpx.get(f"http://{member.endpoint}/health", timeout=1.0)
                if reply.status_code == 200 and reply.json().get("health") == "true":
                    pending.pop(0)
                    continue
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd member {member.name} did not become healthy")
            time.sleep(0.1)

    def stop(self) -> None:
        for member in self.members:
            with contextlib.suppress(Exception):
                self.kill_member(member)
