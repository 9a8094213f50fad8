"""Fixtures of the end-to-end tests: the real llama-server binary and the real shipped weights.

Outside CI a missing engine or weight package skips these tests with the install command; in CI
(`CI` set) it fails them, because CI installs both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from grid.fleet.errors import GridError
from grid.node.agent.config import CatalogEntry
from grid.node.artifacts import (
    GEMMA3_270M_MODEL_ID,
    GEMMA3_270M_SHA256,
    SMOLLM2_MODEL_ID,
    SMOLLM2_SHA256,
    gemma3_270m_path,
    smollm2_path,
)
from grid.node.engines.binary import llama_server_binary
from tests.e2e.fleet_helpers import EngineNode
from tests.service.harness import FAST_CONTROLLER, ControllerProcess


def _required(make: Callable[[], Any]) -> Any:
    try:
        return make()
    except GridError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{exc.message} {exc.fix}")


@pytest.fixture(scope="session")
def llama_server() -> Path:
    path: Path = _required(llama_server_binary)
    return path


@pytest.fixture(scope="session")
def smollm2_entry() -> CatalogEntry:
    path: Path = _required(smollm2_path)
    return CatalogEntry(model_id=SMOLLM2_MODEL_ID, path=str(path), sha256=SMOLLM2_SHA256)


@pytest.fixture(scope="session")
def gemma_entry(tmp_path_factory: pytest.TempPathFactory) -> CatalogEntry:
    folder = tmp_path_factory.mktemp("gemma")
    path: Path = _required(lambda: gemma3_270m_path(folder))
    return CatalogEntry(model_id=GEMMA3_270M_MODEL_ID, path=str(path), sha256=GEMMA3_270M_SHA256)


# Demand expires within a few seconds of the last request, so scale-down is observable.
E2E_CONTROLLER = {**FAST_CONTROLLER, "demand": {"bucket_s": 1.0, "retention_buckets": 3}}


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerProcess]:
    server = ControllerProcess(tmp_path / "ctl", dict(E2E_CONTROLLER))
    server.start()
    try:
        yield server
    finally:
        server.stop()


NodeFactory = Callable[..., EngineNode]
_PORT_BLOCKS = iter(range(39700, 39990, 10))


@pytest.fixture
def make_node(
    tmp_path: Path, controller: ControllerProcess, llama_server: Path
) -> Iterator[NodeFactory]:
    nodes: list[EngineNode] = []

    def make(host_id: str, catalog: list[CatalogEntry], **extra: Any) -> EngineNode:
        low = next(_PORT_BLOCKS)
        node = EngineNode(
            tmp_path / "nodes",
            controller,
            host_id,
            catalog=catalog,
            ports=(low, low + 9),
            llama_server=llama_server,
            **extra,
        )
        nodes.append(node)
        return node

    try:
        yield make
    finally:
        for node in nodes:
            node.cleanup()
