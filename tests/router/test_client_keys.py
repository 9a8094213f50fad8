"""Client keys on /v1 for real: a controller process without open access, keys issued with the
real CLI (`grid allocator key create|list|revoke`), used by the real openai SDK, counted in
status and /metrics, revoked at once; open access only on loopback and only when asked for."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.api.client_keys import ClientKeys, import_key_file
from grid.api.settings import load_settings, write_settings
from grid.fleet.errors import GridError
from grid.fleet.wire import NodeUpdate
from grid.runtime.controller import Controller, ControllerService, StateStore
from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import grant
from tests.service.harness import REPO, ControllerProcess, mint, node_client

pytestmark = pytest.mark.service

ENGINE_KEY = "engine-key-clientkeys-0123456789abcdef01"
MODEL = "keyed"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("keys")) / "ctl")
    process.settings = replace(process.settings, open_access=False)
    write_settings(process.state_dir, process.settings)
    process.start()
    engine = FakeEngine(ENGINE_KEY, "keyed-engine").start()
    process.engine_port = engine.port  # type: ignore[attr-defined]
    beat(process)
    with process.admin() as admin:
        admin.put_model(MODEL, {"memory_mb": 200, "max_replicas": 2})
    try:
        yield process
    finally:
        engine.stop()
        process.stop()


def beat(process: ControllerProcess) -> None:
    """A heartbeat of the host serving MODEL (its lease is short in the test controller)."""
    body: dict[str, Any] = {
        "role": "allocator",
        "host_id": "host-k",
        "resources": {"capacity_mb": 16384},
        "allocator": {
            "schema_version": 1,
            "residencies": [{"model_id": MODEL, "memory_mb": 200, "state": "ready"}],
            "routes": [  # as a commanded node reports it: with the controller's grant
                {
                    "model_id": MODEL,
                    "port": process.engine_port,  # type: ignore[attr-defined]
                    "grant": grant(process, "host-k", MODEL),
                }
            ],
            "engine_key": ENGINE_KEY,
        },
        "request_commands": False,
    }
    with node_client(process.url, mint(process, "host-k")) as node:
        node.put_node("host-k.allocator", NodeUpdate.model_validate(body))


def grid_cli(server: ControllerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "grid", *args, "--state-dir", str(server.state_dir)],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )  # fmt: skip


def chat(server: ControllerProcess, key: str | None, path: str = "/v1/chat/completions") -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=10)


def test_v1_needs_a_key_issued_once_stored_hashed_counted_and_revocable(
    server: ControllerProcess, tmp_path: Path
) -> None:
    # Without a key, every /v1 path is refused before routing (an unknown one too).
    for path in ("/v1/chat/completions", "/v1/embeddings", "/v1/no-such-thing"):
        refused = chat(server, None, path)
        assert refused.status_code == 401, path
        assert refused.headers["www-authenticate"] == "Bearer"
        error = refused.json()["error"]
        assert (error["code"], error["type"]) == ("client_key_required", "authentication_error")
    assert httpx.get(f"{server.url}/v1/models", timeout=5).status_code == 401
    assert chat(server, "gk1_not-a-key").json()["error"]["code"] == "invalid_client_key"

    made = grid_cli(server, "allocator", "key", "create", "team-a", "--json")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)["key"]
    assert key.startswith("gk1_") and len(key) > 40
    # Stored hashed, owner-only, in the controller's durable state (it follows the store):
    # the state file holds SHA-256(key) and never the key.
    stored = server.state_dir / "state.json"
    [row] = json.loads(stored.read_text())["client_keys"]
    assert (row["name"], row["sha256"]) == ("team-a", hashlib.sha256(key.encode()).hexdigest())
    assert key not in stored.read_text() and not (server.state_dir / "client_keys.json").exists()
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    again = grid_cli(server, "allocator", "key", "create", "team-a")
    assert again.returncode == 2 and "client_key_exists" in again.stderr

    openai = pytest.importorskip("openai")
    beat(server)
    sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0)
    assert MODEL in [m.id for m in sdk.models.list().data]
    answer = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4
    )
    assert answer.choices[0].message.content == "OK"
    wrong = openai.OpenAI(base_url=f"{server.url}/v1", api_key="gk1_wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()

    # The operator capability works too, and is counted as the operator.
    beat(server)
    assert chat(server, server.settings.operator_token).status_code == 200

    listed = json.loads(grid_cli(server, "allocator", "key", "list", "--json").stdout)
    [row] = listed["keys"]
    assert (row["name"], row["requests"], row["revoked_at"]) == ("team-a", 2, None)
    assert listed["requests"]["operator"] == 1 and listed["open_access"] is False
    assert key not in json.dumps(listed)
    with server.public() as client:
        status = client.status(history=0).model_dump(mode="json")
        metrics = client.metrics()
    assert [r["requests"] for r in status["client_keys"]["keys"]] == [2]
    assert 'grid_client_requests_total{key="team-a"} 2' in metrics
    assert 'grid_client_requests_total{key="operator"} 1' in metrics
    assert key not in json.dumps(status) and key not in metrics

    revoked = grid_cli(server, "allocator", "key", "revoke", "team-a")
    assert revoked.returncode == 0, revoked.stderr
    beat(server)
    assert chat(server, key).json()["error"]["code"] == "invalid_client_key"
    table = grid_cli(server, "allocator", "key", "list").stdout
    assert "team-a" in table
    gone = grid_cli(server, "allocator", "key", "revoke", "team-a")
    assert gone.returncode == 2 and "unknown_client_key" in gone.stderr

    # Written to a file instead of shown; `grid chat` reads it with --api-key-file.
    key_file = tmp_path / "team-b.key"
    wrote = grid_cli(server, "allocator", "key", "create", "team-b", "-o", str(key_file))
    assert wrote.returncode == 0 and "gk1_" not in wrote.stdout
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    beat(server)
    said = subprocess.run(
        [sys.executable, "-m", "grid", "chat", "-m", MODEL, "hi", "--grid", server.url,
         "--api-key-file", str(key_file)],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert said.returncode == 0 and "OK" in said.stdout, said.stderr
    no_key = subprocess.run(
        [sys.executable, "-m", "grid", "chat", "-m", MODEL, "hi", "--grid", server.url],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert no_key.returncode == 2 and "client_key_required" in no_key.stderr


def test_open_access_is_refused_off_loopback(tmp_path: Path) -> None:
    state = tmp_path / "ctl"
    base = ControllerProcess(state).settings
    write_settings(state, replace(base, host="0.0.0.0", insecure_http=True, open_access=True))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    server = subprocess.run(
        [sys.executable, "-m", "grid.api.server", "--state-dir", str(state)],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert server.returncode == 2
    assert "open_access_not_loopback" in server.stderr
    up = subprocess.run(
        [sys.executable, "-m", "grid", "up", "--state-dir", str(tmp_path / "other"),
         "--host", "0.0.0.0", "--insecure-http", "--open-access"],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert up.returncode == 2 and "open_access_not_loopback" in up.stderr
    assert not (tmp_path / "other" / "server.pid").exists()
    assert load_settings(state).open_access is True  # nothing rewrote the setting


def _service(path: Path) -> ControllerService:
    return ControllerService(Controller(StateStore(path), now=0.0))


def test_keys_live_in_the_controller_state_and_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    keys = ClientKeys(_service(state), operator_token="op")
    key, record = keys.create("laptop-ana", now=100.0)
    assert keys.identify(key) == "laptop-ana" and keys.identify("op") == "operator"
    assert keys.identify(None) is None and keys.identify(key + "x") is None
    assert record.sha256 == hashlib.sha256(key.encode()).hexdigest()
    assert key not in state.read_text()
    # Another controller on the same store (a restart, or the next leader) accepts the key.
    again = ClientKeys(_service(state), operator_token="op")
    assert again.identify(key) == "laptop-ana"
    again.revoke("laptop-ana", now=200.0)
    assert ClientKeys(_service(state)).identify(key) is None
    assert ClientKeys(_service(state), open_access=True).identify(key) == "anonymous"
    with pytest.raises(GridError) as bad_name:
        again.create("operator", now=1.0)
    assert bad_name.value.code == "invalid_key_name"


def test_a_failed_save_issues_no_key(tmp_path: Path) -> None:
    service = _service(tmp_path / "state.json")
    keys = ClientKeys(service)
    kept, _ = keys.create("kept", now=1.0)
    (tmp_path / "state.json").unlink()
    (tmp_path / "state.json").mkdir()  # the next write cannot replace a folder
    with pytest.raises(GridError) as refused:
        keys.create("lost", now=2.0)
    assert refused.value.code == "state_write_failed"
    assert [r["name"] for r in keys.rows()] == ["kept"] and keys.identify(kept) == "kept"


def test_an_older_key_file_is_imported_once_and_a_corrupt_one_refused(tmp_path: Path) -> None:
    legacy = tmp_path / "client_keys.json"
    old = ClientKeys(legacy)  # an older controller's own key file
    key, _ = old.create("team-old", now=5.0)
    assert "team-old" in legacy.read_text() and key not in legacy.read_text()
    keys = ClientKeys(_service(tmp_path / "state.json"))
    assert import_key_file(legacy, keys, now=6.0) == 1
    assert keys.identify(key) == "team-old" and not legacy.exists()
    assert (tmp_path / "client_keys.json.imported").exists()
    assert ClientKeys(_service(tmp_path / "state.json")).identify(key) == "team-old"
    legacy.write_text("{not json")
    with pytest.raises(GridError) as corrupt:
        import_key_file(legacy, keys, now=7.0)
    assert corrupt.value.code == "client_keys_unreadable"
