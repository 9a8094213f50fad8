"""Engine kinds behind one adapter interface: llama.cpp (chat and embedding mode) and vLLM.

The supervisor (llamacpp.py) owns the process: spawn, identity proof, adoption, drain, stop.
An adapter owns what differs between engine kinds (docs/engines.md):
- `binary()`: the executable, or `runtime_not_installed` with the command it would run;
- `argv(...)`: the exact command line from the launch spec (the profile's kind, pooling and
  engine settings after the host's overrides); the engine key travels in a 0600 file only;
- `identity(...)`: the flags a recorded argv must carry for a child to be provably ours;
- `ready_path`, `metrics_path`, `activity`: health and metrics;
- `memory_mb(...)`: what a replica of this spec holds (vLLM preallocates its share of each
  tensor-parallel device).
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

from grid.fleet import EngineSettings, GridError, flags_problem_for
from grid.node.engines.binary import llama_server_binary
from grid.node.engines.probes import Activity, ActivityState, auth_headers, probe_activity

LLAMA_CPP = "llama.cpp"
VLLM = "vllm"
VLLM_ENV = "GRID_VLLM"  # an operator-configured vllm executable wins over PATH
DEFAULT_GPU_UTILIZATION = 0.9


@dataclass(frozen=True)
class LaunchSpec:
    """What one child is started with: the model, its kind and the effective settings."""

    model_id: str
    model_path: str
    runtime: str = LLAMA_CPP
    kind: str = "text"  # text | embedding | ...
    pooling: str | None = None
    chat_template: str | None = None
    settings: EngineSettings = field(default_factory=EngineSettings)
    gpu_count: int = 0  # tensor-parallel devices (vLLM)


@dataclass(frozen=True)
class Where:
    """Where a child listens and the files that carry its key."""

    host: str
    port: int
    key_file: Path
    run_dir: Path


class EngineAdapter(Protocol):
    runtime: str
    ready_path: str
    metrics_path: str

    def binary(self, configured: Path | None, spec: LaunchSpec, where: Where) -> Path: ...

    def argv(self, binary: Path, spec: LaunchSpec, where: Where) -> list[str]: ...

    def prepare(self, spec: LaunchSpec, where: Where, engine_key: str) -> None: ...

    def identity(self, spec_path: str, model_id: str, where: Where) -> dict[str, str]: ...

    def activity(
        self, client: httpx.Client, base_url: str, key: str, timeout_s: float
    ) -> Activity: ...

    def memory_mb(self, spec: LaunchSpec, devices_mb: list[int], declared_mb: int) -> int: ...


def _settings_flags(kind: str, settings: EngineSettings) -> list[str]:
    flags = list(settings.extra_flags or [])
    problem = flags_problem_for(kind, flags)
    if problem is not None:
        raise GridError(
            "engine_flag_refused",
            f"the engine settings ask {kind} for a flag it does not allow: {problem}",
            fix="remove the flag from the profile's engine.extra_flags or the host override",
            next_command="grid allocator model list",
        )
    return flags


class LlamaCppAdapter:
    runtime = LLAMA_CPP
    ready_path = "/v1/models"
    metrics_path = "/metrics"

    def binary(self, configured: Path | None, spec: LaunchSpec, where: Where) -> Path:
        return configured if configured is not None else llama_server_binary()

    def argv(self, binary: Path, spec: LaunchSpec, where: Where) -> list[str]:
        s = spec.settings
        embedding = spec.kind == "embedding"
        return [
            str(binary),
            "-m", spec.model_path,
            "--alias", spec.model_id,
            "--host", where.host,
            "--port", str(where.port),
            "--api-key-file", str(where.key_file),
            "--slots",
            "--metrics",
            "-c", str(s.context or 1024),
            "-t", str(s.threads or 1),
            "-np", str(s.parallel or 1),
            "-ngl", str(s.gpu_layers if s.gpu_layers is not None else 0),
            "--no-webui",
            *(["--embeddings"] if embedding else []),
            *(["--pooling", spec.pooling] if embedding and spec.pooling else []),
            *(["--chat-template", spec.chat_template] if spec.chat_template else []),
            *_settings_flags(self.runtime, s),
        ]  # fmt: skip

    def prepare(self, spec: LaunchSpec, where: Where, engine_key: str) -> None:
        return None  # the key file is shared by every llama.cpp child of the node

    def identity(self, spec_path: str, model_id: str, where: Where) -> dict[str, str]:
        return {
            "-m": spec_path,
            "--alias": model_id,
            "--port": str(where.port),
            "--api-key-file": str(where.key_file),
        }

    def activity(self, client: httpx.Client, base_url: str, key: str, timeout_s: float) -> Activity:
        return probe_activity(client, base_url, key, timeout_s)

    def memory_mb(self, spec: LaunchSpec, devices_mb: list[int], declared_mb: int) -> int:
        return declared_mb  # llama.cpp maps the weights and its context: the profile's figure


def vllm_config_path(where: Where, model_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)
    return where.run_dir / f"vllm-{safe}.yaml"


class VllmAdapter:
    """vLLM's OpenAI server (`vllm serve`). The key goes in a 0600 `--config` YAML file (vLLM
    reads CLI options from it), never in argv or the child's environment."""

    runtime = VLLM
    ready_path = "/health"
    metrics_path = "/metrics"

    def binary(self, configured: Path | None, spec: LaunchSpec, where: Where) -> Path:
        found = os.environ.get(VLLM_ENV) or shutil.which("vllm")
        path = Path(found) if found else None
        if path is None or not (path.is_file() and os.access(path, os.X_OK)):
            command = " ".join(self.argv(Path("vllm"), spec, where))
            raise GridError(
                "runtime_not_installed",
                f"vLLM is not installed on this host; Grid would run: {command}",
                fix="install vLLM on a CUDA host (pip install vllm) or set $GRID_VLLM, "
                "or remove vllm from this node's --runtime list",
                details={"command": command},
                next_command="pip install vllm",
            )
        return path

    def argv(self, binary: Path, spec: LaunchSpec, where: Where) -> list[str]:
        s = spec.settings
        utilization = s.gpu_memory_utilization or DEFAULT_GPU_UTILIZATION
        return [
            str(binary), "serve", spec.model_path,
            "--served-model-name", spec.model_id,
            "--host", where.host,
            "--port", str(where.port),
            "--config", str(vllm_config_path(where, spec.model_id)),
            "--tensor-parallel-size", str(max(1, spec.gpu_count)),
            "--gpu-memory-utilization", f"{utilization:g}",
            *(["--max-model-len", str(s.context)] if s.context else []),
            *(["--max-num-seqs", str(s.parallel)] if s.parallel else []),
            *(["--task", "embed"] if spec.kind == "embedding" else []),
            *_settings_flags(self.runtime, s),
        ]  # fmt: skip

    def prepare(self, spec: LaunchSpec, where: Where, engine_key: str) -> None:
        path = vllm_config_path(where, spec.model_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(f'api-key: "{engine_key}"\n')

    def identity(self, spec_path: str, model_id: str, where: Where) -> dict[str, str]:
        return {
            "serve": spec_path,
            "--served-model-name": model_id,
            "--port": str(where.port),
            "--config": str(vllm_config_path(where, model_id)),
        }

    def activity(self, client: httpx.Client, base_url: str, key: str, timeout_s: float) -> Activity:
        """Running and waiting requests from vLLM's Prometheus metrics."""
        try:
            reply = client.get(
                f"{base_url}{self.metrics_path}", headers=auth_headers(key), timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            return Activity(ActivityState.UNKNOWN, reason=f"/metrics unreachable: {exc}")
        if reply.status_code != 200:
            return Activity(ActivityState.UNKNOWN, reason=f"/metrics answered {reply.status_code}")
        return vllm_activity(parse_prometheus(reply.text))

    def memory_mb(self, spec: LaunchSpec, devices_mb: list[int], declared_mb: int) -> int:
        """vLLM preallocates `gpu_memory_utilization` of each of its tensor-parallel devices
        (the largest ones, as the planner's GPU rows assume); never below the declared size."""
        utilization = spec.settings.gpu_memory_utilization or DEFAULT_GPU_UTILIZATION
        used = sorted(devices_mb, reverse=True)[: max(1, spec.gpu_count)]
        return max(declared_mb, math.ceil(utilization * sum(used)))


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition: metric name (labels summed) -> value; odd lines skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines()[:20_000]:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name_part, _, value_part = line.rpartition(" ")
        name = name_part.split("{", 1)[0].strip()
        try:
            value = float(value_part)
        except ValueError:
            continue
        if name and math.isfinite(value):
            out[name] = out.get(name, 0.0) + value
    return out


def vllm_activity(metrics: dict[str, float]) -> Activity:
    running = metrics.get("vllm:num_requests_running")
    waiting = metrics.get("vllm:num_requests_waiting", 0.0)
    if running is None:
        return Activity(ActivityState.UNKNOWN, reason="/metrics has no vllm:num_requests_running")
    busy = int(running + waiting)
    return Activity(ActivityState.BUSY if busy else ActivityState.IDLE, processing=busy)


ADAPTERS: dict[str, EngineAdapter] = {LLAMA_CPP: LlamaCppAdapter(), VLLM: VllmAdapter()}


def adapter_for(runtime: str) -> EngineAdapter:
    adapter = ADAPTERS.get(runtime)
    if adapter is None:
        raise GridError(
            "runtime_not_supported",
            f"this node has no engine adapter for runtime {runtime!r}",
            fix=f"use one of {', '.join(sorted(ADAPTERS))} in the profile's runtimes",
            next_command="grid allocator model list",
        )
    return adapter
