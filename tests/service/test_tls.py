"""TLS on the controller: a real `python -m grid.api.server` serving HTTPS on loopback with a CA
generated here (the `cryptography` package), verified by the real client; a wrong CA and an
expired certificate are refused before any request is sent; credentials never go over plain
HTTP to a non-loopback address (a listening socket records what arrives); a non-loopback bind
without TLS is refused."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.api.settings import load_or_create_settings, load_settings, write_settings
from grid.api.tls import check_bind, generate_ca_and_server
from grid.fleet.errors import GridError
from grid.wire import AllocatorClient
from tests.service.harness import REPO, free_port

pytestmark = pytest.mark.service


def _start(state_dir: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env["PYTHONPATH"] = str(REPO)
    log = open(state_dir / "server.log", "ab")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "grid.api.server", "--state-dir", str(state_dir)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
    )  # fmt: skip


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, "server exited"
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.2)
    raise AssertionError("server did not listen")


@pytest.fixture
def tls_controller(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """(https URL, CA file, state folder) of a controller on 127.0.0.2 serving TLS."""
    issued = generate_ca_and_server(tmp_path / "pki", ["127.0.0.2"])
    state = tmp_path / "ctl"
    base = load_or_create_settings(state, port=free_port())
    settings = replace(
        base,
        host="127.0.0.2",
        tls_cert=str(issued.cert_file),
        tls_key=str(issued.key_file),
        ca_file=str(issued.ca_file),
    )
    write_settings(state, settings)
    proc = _start(state)
    try:
        _wait_listening("127.0.0.2", settings.port, proc)
        yield settings.url, issued.ca_file, state
    finally:
        proc.terminate()
        proc.wait(10)


def test_https_controller_verified_with_its_ca(tls_controller: tuple[str, Path, Path]) -> None:
    url, ca_file, state = tls_controller
    assert url.startswith("https://127.0.0.2:")
    token = load_settings(state).operator_token
    with AllocatorClient(url, operator_token=token, ca_file=ca_file) as api:
        assert api.healthz().ok is True
        assert "hosts" in api.status().model_dump(mode="json")


def test_wrong_ca_is_refused_before_sending(
    tls_controller: tuple[str, Path, Path], tmp_path: Path
) -> None:
    url, _ca, state = tls_controller
    other = generate_ca_and_server(tmp_path / "other", ["127.0.0.2"], common_name="Other CA")
    token = load_settings(state).operator_token
    with (
        pytest.raises(GridError) as caught,
        AllocatorClient(url, operator_token=token, ca_file=other.ca_file) as api,
    ):
        api.status().model_dump(mode="json")
    assert caught.value.code == "controller_certificate_untrusted"
    assert "no request was sent" in caught.value.message
    assert caught.value.fix and "--ca-file" in caught.value.fix
    # The system store does not know the private CA either.
    with pytest.raises(GridError) as system, AllocatorClient(url, ca_file="") as api:
        api.healthz()
    assert system.value.code == "controller_certificate_untrusted"


def test_expired_certificate_is_refused(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    issued = generate_ca_and_server(
        tmp_path / "pki",
        ["127.0.0.3"],
        not_before=now - dt.timedelta(days=10),
        not_after=now - dt.timedelta(days=1),
    )
    state = tmp_path / "ctl"
    base = load_or_create_settings(state, port=free_port())
    write_settings(
        state,
        replace(
            base, host="127.0.0.3", tls_cert=str(issued.cert_file), tls_key=str(issued.key_file)
        ),
    )
    proc = _start(state)
    try:
        _wait_listening("127.0.0.3", base.port, proc)
        url = f"https://127.0.0.3:{base.port}"
        with pytest.raises(GridError) as caught, AllocatorClient(url, ca_file=issued.ca_file) as c:
            c.healthz()
        assert caught.value.code == "controller_certificate_untrusted"
        assert "expired" in caught.value.message
    finally:
        proc.terminate()
        proc.wait(10)


class Recorder:
    """A plain TCP listener on 127.0.0.1 that keeps every byte any connection sends."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.received = bytearray()
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.settimeout(0.5)
            with conn, contextlib.suppress(OSError):
                while chunk := conn.recv(4096):
                    self.received.extend(chunk)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def test_no_credential_over_plain_http_to_a_non_loopback_address() -> None:
    """0.0.0.0 is not a loopback literal, yet on Linux a connection to it reaches this
    machine's listeners: so the recorder would see anything the client sent."""
    recorder = Recorder()
    try:
        # The recorder is reachable at that address (a credential-free request arrives) ...
        with (
            contextlib.suppress(GridError),
            AllocatorClient(f"http://0.0.0.0:{recorder.port}", timeout_s=1) as anonymous,
        ):
            anonymous.healthz()
        time.sleep(0.6)
        assert b"GET /healthz" in recorder.received
        before = len(recorder.received)
        for kwargs in ({"operator_token": "op-secret-1"}, {"node_token": "node-secret-2"}):
            with pytest.raises(GridError) as caught:
                AllocatorClient(f"http://0.0.0.0:{recorder.port}", timeout_s=1, **kwargs)
            assert caught.value.code == "insecure_transport"
        time.sleep(0.6)
        assert len(recorder.received) == before  # ... but nothing more arrived
        assert b"secret" not in bytes(recorder.received)
    finally:
        recorder.close()


@pytest.mark.parametrize("host", ["10.20.30.40", "0.0.0.0", "grid.example.internal"])
def test_non_loopback_bind_without_tls_is_refused(host: str) -> None:
    with pytest.raises(GridError) as caught:
        check_bind(host, tls=False, insecure_http=False)
    assert caught.value.code == "insecure_bind"
    check_bind(host, tls=True, insecure_http=False)
    check_bind(host, tls=False, insecure_http=True)
    check_bind("127.0.0.5", tls=False, insecure_http=False)


def test_grid_up_refuses_plain_http_on_a_public_address(tmp_path: Path) -> None:
    from grid.cli.main import app

    result = CliRunner().invoke(
        app, ["up", "--state-dir", str(tmp_path / "ctl"), "--host", "0.0.0.0", "--port", "1"]
    )
    assert result.exit_code != 0
    assert "insecure_bind" in result.output
    assert "To fix" in result.output or "Fix" in result.output
    assert not (tmp_path / "ctl" / "server.pid").exists()


def test_grid_up_with_tls_and_the_local_cli_verifies_with_the_recorded_ca(tmp_path: Path) -> None:
    from grid.cli.main import app

    issued = generate_ca_and_server(tmp_path / "pki", ["127.0.0.6"])
    state = str(tmp_path / "ctl")
    port = str(free_port())
    runner = CliRunner()
    up = runner.invoke(
        app,
        ["up", "--state-dir", state, "--host", "127.0.0.6", "--port", port,
         "--tls-cert", str(issued.cert_file), "--tls-key", str(issued.key_file),
         "--ca-file", str(issued.ca_file)],
    )  # fmt: skip
    try:
        assert up.exit_code == 0, up.output
        assert f"https://127.0.0.6:{port}" in up.output
        status = runner.invoke(app, ["allocator", "status", "--state-dir", state, "--json"])
        assert status.exit_code == 0, status.output
        assert json.loads(status.output)["mode"]
        # Another client without the CA: refused before sending, also for `grid chat`.
        url = f"https://127.0.0.6:{port}"
        chat = runner.invoke(
            app, ["chat", "-m", "m", "hi", "--grid", url], env={"GRID_CA_FILE": ""}
        )
        assert chat.exit_code != 0 and "controller_certificate_untrusted" in chat.output
        ok = runner.invoke(
            app, ["models", "--grid", url, "--json"], env={"GRID_CA_FILE": str(issued.ca_file)}
        )
        assert ok.exit_code == 0 and json.loads(ok.output)["served"] == []
    finally:
        runner.invoke(app, ["down", "--state-dir", state, "--node-dir", str(tmp_path / "none")])


def test_local_node_start_next_to_a_tls_controller_needs_no_flags(tmp_path: Path) -> None:
    """node start on the controller's machine verifies the TLS controller with the CA `grid up`
    recorded; `grid down` knows that node as its own and stops it first."""
    from grid.cli.main import app

    issued = generate_ca_and_server(tmp_path / "pki", ["127.0.0.1"])
    state, node = str(tmp_path / "ctl"), str(tmp_path / "node")
    runner = CliRunner()
    up = runner.invoke(
        app,
        ["up", "--state-dir", state, "--port", str(free_port()), "--tls-cert",
         str(issued.cert_file), "--tls-key", str(issued.key_file), "--ca-file",
         str(issued.ca_file)],
    )  # fmt: skip
    try:
        assert up.exit_code == 0, up.output
        started = runner.invoke(
            app,
            ["allocator", "node", "start", "--state-dir", state, "--node-dir", node,
             "--host-id", "tls-local", "--telemetry", "logical"],
        )  # fmt: skip
        assert started.exit_code == 0, started.output
        deadline = time.monotonic() + 20
        hosts: list[str] = []
        while time.monotonic() < deadline and "tls-local" not in hosts:
            status = runner.invoke(app, ["allocator", "status", "--state-dir", state, "--json"])
            hosts = [h["host_id"] for h in json.loads(status.output)["hosts"]]
            time.sleep(0.3)
        assert "tls-local" in hosts
    finally:
        down = runner.invoke(app, ["down", "--state-dir", state, "--node-dir", node])
    assert "Stopped the node agent of host tls-local" in down.output


@pytest.mark.parametrize("case", ["expired", "wrong_name", "unknown_ca"])
def test_grid_up_with_a_certificate_its_clients_refuse_fails_fast_with_the_cause(
    tmp_path: Path, case: str
) -> None:
    """Issue 22, item 7: `grid up` with an expired, self-signed or wrong-name certificate waited
    30 s, said `server_timeout`, and left the controller running. Now it stops that controller
    and names the TLS cause at once."""
    from grid.cli.main import app

    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    issued = generate_ca_and_server(
        tmp_path / "pki",
        ["127.0.0.8" if case == "wrong_name" else "127.0.0.6"],
        not_before=past - dt.timedelta(days=1) if case == "expired" else None,
        not_after=past if case == "expired" else None,
    )
    state = tmp_path / "ctl"
    args = ["up", "--state-dir", str(state), "--host", "127.0.0.6", "--port", str(free_port())]
    args += ["--tls-cert", str(issued.cert_file), "--tls-key", str(issued.key_file)]
    if case != "unknown_ca":  # without --ca-file the system store knows no such CA
        args += ["--ca-file", str(issued.ca_file)]
    started = time.monotonic()
    up = CliRunner().invoke(app, args, env={"GRID_CA_FILE": ""})
    waited = time.monotonic() - started
    assert up.exit_code != 0
    assert "server_certificate_rejected" in up.output, up.output
    cause = {"expired": "expired", "wrong_name": "127.0.0.6", "unknown_ca": "issuer"}[case]
    assert cause in up.output.replace("\n", " "), up.output
    assert "server_timeout" not in up.output and waited < 25  # not the 30 s start timeout
    assert not (state / "server.pid").exists()
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    alive = [
        p for p in pids if str(state.resolve()) in _cmdline(p) and "grid.api.server" in _cmdline(p)
    ]
    assert alive == []  # the controller was stopped again


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
