"""One real three-member etcd cluster per test module (tests/ha/cluster.py); each test works
under its own key prefix, so tests share members without sharing state."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from grid.runtime.controller.etcd import EtcdClient, parse_store_url
from tests.ha.cluster import EtcdCluster, etcd_available

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    if not etcd_available():
        why = "etcd is not installed (scripts/install.sh installs Debian's etcd-server)"
        if os.environ.get("CI"):
            pytest.fail(why)  # CI installs it: a missing etcd is a broken install there
        pytest.skip(why)
    root: Path = tmp_path_factory.mktemp("etcd")
    running = EtcdCluster(root).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def store_url(cluster: EtcdCluster) -> str:
    return f"{cluster.store_url}/t{secrets.token_hex(4)}"


@pytest.fixture
def client(store_url: str) -> Iterator[EtcdClient]:
    made = EtcdClient(parse_store_url(store_url))
    try:
        yield made
    finally:
        made.close()


# The real llama-server binary and the shipped SmolLM2 weights (tests/e2e/conftest.py).
from tests.e2e.conftest import llama_server, smollm2_entry  # noqa: E402

__all__ = ["llama_server", "smollm2_entry"]
