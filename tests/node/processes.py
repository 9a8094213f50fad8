"""Process fixtures for node tests: every process a test starts is ended by the finalizer."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from grid.node.engines.proc import is_alive


class ProcessJanitor:
    """Tracks Popen handles and bare PIDs started by one test; kills what is left at teardown."""

    def __init__(self) -> None:
        self.popens: list[subprocess.Popen[bytes]] = []
        self.pids: list[int] = []

    def start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.popens.append(popen)
        return popen

    def track_pid(self, pid: int) -> None:
        self.pids.append(pid)

    def cleanup(self) -> None:
        for popen in self.popens:
            if popen.poll() is None:
                popen.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=10)
        for pid in self.pids:
            if is_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                wait_until(functools.partial(process_gone, pid), timeout_s=10)


@pytest.fixture
def janitor() -> Iterator[ProcessJanitor]:
    keeper = ProcessJanitor()
    try:
        yield keeper
    finally:
        keeper.cleanup()


def process_gone(pid: int) -> bool:
    return not is_alive(pid)


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True


def sleeper_argv(*extra: str, seconds: int = 120) -> list[str]:
    """A long-lived python process whose argv carries `extra` verbatim (after `-c`)."""
    return [sys.executable, "-c", f"import time; time.sleep({seconds})", *extra]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
