"""Every refusal of the node and of the shared HTTP client has a code, a sentence, a fix and,
where one exists, the next command; the daemon prints them the way the CLI does."""

from __future__ import annotations

import ast
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.node.agent.config import NodeConfig, save_config
from grid.node.agent.main import main, read_credential
from grid.node.agent.state import AgentStateStore
from grid.wire import AllocatorClient

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def _grid_errors(folder: Path) -> Iterator[tuple[str, ast.Call]]:
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = getattr(node, "func", None)
            called = getattr(name, "id", getattr(name, "attr", ""))
            if isinstance(node, ast.Call) and called == "GridError":
                yield f"{path.relative_to(REPO)}:{node.lineno}", node


def _has(call: ast.Call, keyword: str, position: int) -> bool:
    for kw in call.keywords:
        if kw.arg == keyword:
            return not (isinstance(kw.value, ast.Constant) and not kw.value.value)
    return len(call.args) > position


@pytest.mark.parametrize("package", ["grid/node", "grid/wire"])
def test_every_refusal_has_a_code_a_sentence_and_a_fix(package: str) -> None:
    found = list(_grid_errors(REPO / package))
    assert found, f"no refusal found under {package}: the scan is broken"
    missing = [
        where
        for where, call in found
        if not (_has(call, "code", 0) and _has(call, "message", 1) and _has(call, "fix", 2))
    ]
    assert missing == []


def test_a_node_without_a_credential_names_the_command_that_writes_one(tmp_path: Path) -> None:
    config = NodeConfig(host_id="h1", grid_url="http://127.0.0.1:1")
    with pytest.raises(GridError) as refusal:
        read_credential(config, from_stdin=False)
    assert refusal.value.code == "no_node_credential"
    assert refusal.value.fix
    assert refusal.value.next_command == "grid allocator token write FILE --host-id ID"


def test_a_corrupt_state_file_names_the_move_that_sets_it_aside(tmp_path: Path) -> None:
    (tmp_path / "agent.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(GridError) as refusal:
        AgentStateStore(tmp_path).load("h1")
    assert refusal.value.code == "agent_state_corrupt"
    path = tmp_path / "agent.json"
    assert refusal.value.next_command == f"mv {path} {path}.corrupt"


def test_the_daemon_prints_code_sentence_fix_and_next_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_config(tmp_path, NodeConfig(host_id="h1", grid_url="http://127.0.0.1:1"))
    assert main(["--state-dir", str(tmp_path)]) == 2  # no token file, no --token-stdin
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("Error [no_node_credential]: ")
    assert lines[1].startswith("To fix: ")
    assert lines[2] == "Next: grid allocator token write FILE --host-id ID"
    assert "Traceback" not in "\n".join(lines)


class _Refusing(BaseHTTPRequestHandler):
    """A controller (an outside thing) that refuses every request with a fixed body."""

    body: bytes = b""
    status: int = 403

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_args: object) -> None:
        pass


def _refusal_from(status: int, error: dict[str, str]) -> GridError:
    handler = type("H", (_Refusing,), {"status": status, "body": json.dumps(error).encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with AllocatorClient(f"http://127.0.0.1:{server.server_address[1]}") as client:
            with pytest.raises(GridError) as refusal:
                client.healthz()
            return refusal.value
    finally:
        server.shutdown()
        server.server_close()


def test_the_client_keeps_the_servers_code_sentence_fix_and_next_command() -> None:
    body = {
        "error": {
            "code": "wrong_host",
            "message": "the credential is for another host",
            "fix": "use this host's credential",
            "next_command": "grid allocator token write FILE --host-id h1",
        }
    }
    refusal = _refusal_from(403, body)
    assert (refusal.code, refusal.message, refusal.fix, refusal.next_command) == (
        "wrong_host",
        "the credential is for another host",
        "use this host's credential",
        "grid allocator token write FILE --host-id h1",
    )
    assert refusal.details["http_status"] == 403


@pytest.mark.parametrize(("status", "word"), [(401, "credential"), (503, "log"), (422, "request")])
def test_a_bare_refusal_still_gets_a_code_a_sentence_and_a_fix(status: int, word: str) -> None:
    refusal = _refusal_from(status, {})
    assert refusal.code == f"http_{status}"
    assert str(status) in refusal.message
    assert word in refusal.fix


def test_an_unreachable_controller_names_the_command_that_starts_one() -> None:
    client = AllocatorClient("http://127.0.0.1:9", timeout_s=2.0)  # the discard port
    with client, pytest.raises(GridError) as refusal:
        client.healthz()
    assert refusal.value.code == "controller_unreachable"
    assert refusal.value.fix and refusal.value.next_command == "grid up"
