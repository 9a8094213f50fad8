"""Issue 22, item 7 on the command line against a real controller: node credentials listed and
revoked (`grid allocator node-credential list / revoke`), a node start on the controller's
machine reusing its credential instead of minting another, a credential without its reply key
refused before anything starts, and `--ca-file` on every admin command."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli import node_start
from grid.cli.main import app
from grid.node.agent import credential_id, parse_credential
from tests.service.harness import ControllerProcess, mint

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("credcli")) / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def cli(
    server: ControllerProcess, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    clean = {k: "" for k in os.environ if k.startswith("GRID_ALLOCATOR")}
    result = CliRunner().invoke(
        app, [*args, "--state-dir", str(server.state_dir)], env={**clean, **(env or {})}
    )
    return result.exit_code, result.output


def listed(server: ControllerProcess, host_id: str) -> list[dict[str, object]]:
    code, out = cli(server, "allocator", "node-credential", "list", "--host-id", host_id, "--json")
    assert code == 0, out
    rows: list[dict[str, object]] = json.loads(out)["credentials"]
    return rows


def test_list_and_revoke_by_id_and_by_host(server: ControllerProcess) -> None:
    first, second = mint(server, "host-c1"), mint(server, "host-c1")
    rows = listed(server, "host-c1")
    assert sorted(r["credential_id"] for r in rows) == sorted(
        [credential_id(first), credential_id(second)]
    )
    assert {r["state"] for r in rows} == {"valid"}
    assert first not in json.dumps(rows)  # ids, never tokens
    code, out = cli(server, "allocator", "node-credential", "revoke", credential_id(first))
    assert code == 0 and "Revoked 1 credential" in out, out
    states = {r["credential_id"]: r["state"] for r in listed(server, "host-c1")}
    assert states == {credential_id(first): "revoked", credential_id(second): "valid"}
    code, out = cli(server, "allocator", "node-credential", "revoke", "--host-id", "host-c1")
    assert code == 0, out
    assert {r["state"] for r in listed(server, "host-c1")} == {"revoked"}
    code, table = cli(server, "allocator", "node-credential", "list")
    assert code == 0 and "host-c1" in table and "revoked" in table
    code, out = cli(server, "allocator", "node-credential", "revoke")
    assert code == 2 and "invalid_option" in out
    code, out = cli(server, "allocator", "node-credential", "revoke", "no-such-id")
    assert code == 2 and "unknown_node_credential" in out


def test_a_local_node_start_reuses_its_credential_until_it_is_revoked(
    server: ControllerProcess, tmp_path: Path
) -> None:
    """Before: every agent start minted another 30-day credential."""
    folder = tmp_path / "node"
    target = node_start._local_credential(folder, "host-reuse", None, server.state_dir)
    text = target.read_text()
    token, key = parse_credential(text)
    assert token and key  # one file: the token and its reply key
    again = node_start._local_credential(folder, "host-reuse", None, server.state_dir)
    assert again == target and target.read_text() == text
    assert len(listed(server, "host-reuse")) == 1
    with server.admin() as admin:
        admin.revoke_node_credentials(credential_id=credential_id(token))
    node_start._local_credential(folder, "host-reuse", None, server.state_dir)
    fresh = parse_credential(target.read_text())[0]
    assert fresh != token
    assert {r["credential_id"]: r["state"] for r in listed(server, "host-reuse")} == {
        credential_id(token): "revoked",
        credential_id(fresh): "valid",
    }


def test_a_credential_without_its_reply_key_starts_nothing(
    server: ControllerProcess, tmp_path: Path
) -> None:
    token = mint(server, "host-nokey")
    folder = tmp_path / "node"
    args = ["allocator", "node", "start", "--node-dir", str(folder), "--grid", server.url]
    code, out = cli(server, *args, env={"GRID_ALLOCATOR_NODE_TOKEN": token})
    assert code == 2 and "no_reply_key" in out and '"$(cat node.token)"' in out
    assert token not in out
    assert not (folder / "agent.pid").exists()
    bare = tmp_path / "bare.token"
    bare.write_text(token + "\n")
    code, out = cli(server, *args, "--token-file", str(bare))
    assert code == 2 and "no_reply_key" in out


ADMIN_COMMANDS = [
    ["allocator", "model", "set"],
    ["allocator", "model", "remove"],
    ["allocator", "model", "list"],
    ["allocator", "mode"],
    ["allocator", "tick"],
    ["allocator", "status"],
    ["allocator", "apply"],
    ["allocator", "enroll"],
    ["allocator", "token", "write"],
    ["allocator", "node-credential", "list"],
    ["allocator", "node-credential", "revoke"],
]


@pytest.mark.parametrize("command", ADMIN_COMMANDS, ids=" ".join)
def test_every_admin_command_takes_a_ca_file(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "--ca-file" in result.output
