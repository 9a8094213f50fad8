"""`grid up --install-service [--tls]` and `grid node install-service`: systemd units (written,
never started here), the fleet CA `--tls` makes, and the unit's command really serving."""

from __future__ import annotations

import json
import os
import shlex
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from typer.testing import CliRunner

from grid.cli.main import app
from grid.cli.service_units import install_unit, unit_text
from tests.service.harness import REPO, free_port

pytestmark = pytest.mark.service


def _unit(path: Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith("#"):
            key, _sep, value = line.partition("=")
            fields[key] = value
    return fields


def _serve(exec_start: str, url: str, verify: ssl.SSLContext | bool = True) -> None:
    """Run the unit's ExecStart as systemd would, until /healthz answers; then stop it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(shlex.split(exec_start), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the unit's command exited"
            try:
                if httpx.get(f"{url}/healthz", timeout=1, verify=verify).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("the unit's command never served /healthz")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_up_install_service_writes_a_unit_that_serves(tmp_path: Path) -> None:
    state, units, port = tmp_path / "ctl", tmp_path / "units", free_port()
    args = ["up", "--state-dir", str(state), "--port", str(port), "--install-service",
            "--unit-dir", str(units)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    unit = _unit(units / "grid-controller.service")
    assert unit["ExecStart"] == f"{sys.executable} -m grid.api.server --state-dir {state}"
    assert unit["Restart"] == "on-failure" and unit["WantedBy"] == "default.target"
    assert "systemctl --user daemon-reload && systemctl --user enable --now" in result.output
    assert not (state / "server.pid").exists()  # written, not started
    token = json.loads((state / "config.json").read_text())["operator_token"]
    assert token not in (units / "grid-controller.service").read_text()
    _serve(unit["ExecStart"], f"http://127.0.0.1:{port}")


def test_up_tls_makes_the_fleet_ca_and_a_certificate_for_the_controller(tmp_path: Path) -> None:
    state, units, port = tmp_path / "ctl", tmp_path / "units", free_port()
    args = ["up", "--state-dir", str(state), "--port", str(port), "--tls", "--install-service",
            "--unit-dir", str(units)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads((state / "config.json").read_text())
    ca = state / "pki" / "ca.pem"
    assert config["ca_file"] == str(ca) and config["tls_cert"] == str(state / "pki/server.pem")
    assert (state / "pki" / "server-key.pem").stat().st_mode & 0o077 == 0
    cert = x509.load_pem_x509_certificate((state / "pki" / "server.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    exec_start = _unit(units / "grid-controller.service")["ExecStart"]
    _serve(
        exec_start, f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(ca))
    )
    again = CliRunner().invoke(app, args)  # the CA is made once, not replaced
    assert again.exit_code == 0 and (state / "pki" / "ca.pem").read_bytes() == ca.read_bytes()


def test_node_install_service_needs_recorded_settings(tmp_path: Path) -> None:
    node, units = tmp_path / "node", tmp_path / "units"
    missing = CliRunner().invoke(
        app, ["node", "install-service", "--node-dir", str(node), "--unit-dir", str(units)]
    )
    assert missing.exit_code == 2 and "no_node_config" in missing.output
    assert not (units / "grid-node.service").exists()


def test_node_unit_runs_the_agent_of_its_folder(tmp_path: Path) -> None:
    path, command = install_unit("grid-node.service", tmp_path / "node", tmp_path / "u")
    unit = _unit(path)
    folder = tmp_path / "node"
    assert unit["ExecStart"] == f"{sys.executable} -m grid.node.agent --state-dir {folder}"
    assert unit["KillMode"] == "mixed" and int(unit["TimeoutStopSec"]) >= 60
    assert command == (
        "systemctl --user daemon-reload && systemctl --user enable --now grid-node.service"
    )
    system = unit_text("x", "grid.node.agent", folder, stop_timeout_s=90, user=False)
    assert "WantedBy=multi-user.target" in system.splitlines()
