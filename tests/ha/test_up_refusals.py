"""`grid up --store` refuses a wrong etcd URL, an unreachable cluster, a refused TLS handshake
and a missing CA with exit 2, a code and the fix, and starts nothing (no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grid.api.tls import generate_ca_and_server
from tests.ha.cluster import EtcdCluster, free_ports

pytestmark = pytest.mark.service
REPO = Path(__file__).resolve().parents[2]


def up(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    folder = tmp_path / "ctl"
    return subprocess.run(
        [sys.executable, "-m", "grid", "up", "--state-dir", str(folder), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def refused(result: subprocess.CompletedProcess[str], code: str, tmp_path: Path) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"[{code}]" in result.stderr
    assert "To fix:" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "ctl" / "server.pid").exists()


@pytest.mark.parametrize(
    "store",
    ["http://127.0.0.1:2379", "etcd://", "etcd://127.0.0.1", "etcd://127.0.0.1:99999",
     "etcd://user:pw@127.0.0.1:2379"],
)  # fmt: skip
def test_a_wrong_store_url_is_refused(tmp_path: Path, store: str) -> None:
    refused(up(tmp_path, "--store", store), "invalid_store_url", tmp_path)


def test_a_cluster_nobody_answers_is_refused(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    refused(up(tmp_path, "--store", f"etcd://127.0.0.1:{port}"), "etcd_unreachable", tmp_path)


def test_a_missing_ca_is_refused(tmp_path: Path, cluster: EtcdCluster) -> None:
    result = up(tmp_path, "--store", cluster.store_url, "--etcd-ca-file", str(tmp_path / "no.pem"))
    refused(result, "etcd_ca_missing", tmp_path)


def test_a_refused_tls_handshake_is_refused(tmp_path: Path, cluster: EtcdCluster) -> None:
    issued = generate_ca_and_server(tmp_path / "pki", ["127.0.0.1"])
    result = up(tmp_path, "--store", cluster.store_url, "--etcd-ca-file", str(issued.ca_file))
    refused(result, "etcd_tls_failed", tmp_path)  # the members speak plain HTTP


def test_etcd_files_without_a_store_are_refused(tmp_path: Path) -> None:
    result = up(tmp_path, "--etcd-ca-file", str(tmp_path))
    refused(result, "etcd_files_without_store", tmp_path)
