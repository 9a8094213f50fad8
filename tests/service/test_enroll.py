"""Enrollment on a real controller process: `grid allocator enroll` prints a one-time token, the
exchange returns a host-scoped credential that registers exactly that host; a reused, expired or
unknown token is refused with its code; the book on disk holds no usable token; `grid allocator
join` writes the credential owner-only and starts a node agent that registers."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.errors import GridError
from grid.fleet.wire import NodeUpdate
from grid.wire import AllocatorClient
from tests.service.harness import ControllerProcess
from tests.service.test_tls import Recorder

pytestmark = pytest.mark.service

runner = CliRunner()


def enroll(server: ControllerProcess, host_id: str, *extra: str) -> str:
    result = runner.invoke(
        app,
        ["allocator", "enroll", "--host-id", host_id, "--state-dir", str(server.state_dir),
         "--json", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["host_id"] == host_id
    return str(doc["token"])


def registration(host_id: str) -> NodeUpdate:
    return NodeUpdate.model_validate(
        {"role": "allocator", "host_id": host_id, "resources": {"capacity_mb": 4096}}
    )


def refusal(server: ControllerProcess, token: str) -> GridError:
    with pytest.raises(GridError) as caught, server.public() as anyone:
        anyone.enroll(token)
    return caught.value


def test_token_exchanges_once_for_a_host_credential(controller: ControllerProcess) -> None:
    token = enroll(controller, "worker-01")
    with controller.public() as anyone:
        minted = anyone.enroll(token)
    assert minted.host_id == "worker-01"
    with AllocatorClient(
        controller.url, node_token=minted.token, reply_key=minted.reply_key
    ) as node:
        reply = node.put_node("worker-01.allocator", registration("worker-01"))
        assert reply.host_id == "worker-01"
        with pytest.raises(GridError) as other:  # scoped to its host only
            node.put_node("worker-02.allocator", registration("worker-02"))
        assert other.value.code == "wrong_host"
    used = refusal(controller, token)
    assert used.code == "enrollment_token_used"
    assert used.details["http_status"] == 409 and "grid allocator enroll" in used.fix
    # The book keeps digests only, owner-only.
    book = controller.state_dir / "enrollments.json"
    assert token not in book.read_text() and token.split(".")[1] not in book.read_text()
    assert stat.S_IMODE(book.stat().st_mode) == 0o600


def test_used_token_stays_used_after_a_restart(controller: ControllerProcess) -> None:
    token = enroll(controller, "worker-03")
    with controller.public() as anyone:
        anyone.enroll(token)
    controller.stop()
    controller.start()
    assert refusal(controller, token).code == "enrollment_token_used"


def test_expired_and_unknown_tokens_are_refused(controller: ControllerProcess) -> None:
    token = enroll(controller, "worker-04", "--ttl", "1")
    time.sleep(1.3)
    expired = refusal(controller, token)
    assert expired.code == "enrollment_token_expired" and expired.details["http_status"] == 410
    unknown = refusal(controller, "gridenroll.not-a-token-this-controller-issued")
    assert unknown.code == "enrollment_token_invalid"


def test_enroll_needs_the_operator_capability(controller: ControllerProcess) -> None:
    with pytest.raises(GridError) as caught, controller.public() as anyone:
        anyone.create_enrollment("worker-05")
    assert caught.value.details["http_status"] == 401


def test_enrollment_token_never_goes_over_plain_http_to_a_remote_address() -> None:
    recorder = Recorder()
    try:
        with (
            AllocatorClient(f"http://0.0.0.0:{recorder.port}", timeout_s=1) as api,
            pytest.raises(GridError) as caught,
        ):
            api.enroll("gridenroll.secret-enrollment-token")
        assert caught.value.code == "insecure_transport"
        time.sleep(0.6)
        assert recorder.connections == 0 and bytes(recorder.received) == b""
    finally:
        recorder.close()


def test_join_writes_the_credential_owner_only_and_starts_the_node(
    controller: ControllerProcess, tmp_path: Path
) -> None:
    token = enroll(controller, "worker-06")
    token_file = tmp_path / "enroll.txt"
    token_file.write_text(token + "\n")
    node_dir = tmp_path / "node"
    result = runner.invoke(
        app,
        ["allocator", "join", controller.url, "--enrollment-token", str(token_file),
         "--node-dir", str(node_dir), "--telemetry", "logical", "--dedicated"],
    )  # fmt: skip
    try:
        assert result.exit_code == 0, result.output
        credential = node_dir / "node.token"
        assert stat.S_IMODE(credential.stat().st_mode) == 0o600
        secret = credential.read_text().splitlines()[0]
        assert secret not in result.output and token not in result.output
        deadline = time.monotonic() + 30
        hosts: list[str] = []
        while time.monotonic() < deadline and "worker-06" not in hosts:
            with controller.admin() as admin:
                hosts = [h["host_id"] for h in admin.status().model_dump(mode="json")["hosts"]]
            time.sleep(0.3)
        assert "worker-06" in hosts
        again = runner.invoke(
            app, ["allocator", "join", controller.url, "--enrollment-token", str(token_file),
                  "--node-dir", str(tmp_path / "node2")],
        )  # fmt: skip
        assert again.exit_code != 0 and "enrollment_token_used" in again.output
    finally:
        runner.invoke(app, ["allocator", "node", "stop", "--node-dir", str(node_dir)])
