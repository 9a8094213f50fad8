"""Engine kinds behind one adapter (issue 21, parts 2 and 4): argv from the launch spec, the
vLLM refusal without a runtime, memory accounting, metrics, and the settings layers.

Oracles are hand-worked command lines and amounts; the real llama.cpp children run in
tests/e2e/test_engines.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from grid.fleet.engine_settings import EngineSettings
from grid.fleet.errors import GridError
from grid.fleet.models import ModelProfile
from grid.fleet.wire import WireLaunch
from grid.node.agent.config import NodeConfig
from grid.node.agent.engine_launch import node_launch
from grid.node.engines import LlamaCppConfig, LlamaCppSupervisor
from grid.node.engines.adapters import (
    LaunchSpec,
    VllmAdapter,
    Where,
    adapter_for,
    parse_prometheus,
    vllm_activity,
)
from grid.node.engines.probes import ActivityState

pytestmark = pytest.mark.unit
GB = 1024


def _where(tmp_path: Path) -> Where:
    return Where(host="127.0.0.1", port=39111, key_file=tmp_path / "engine.key", run_dir=tmp_path)


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_an_embedding_profile_runs_llama_cpp_in_embedding_mode(tmp_path: Path) -> None:
    spec = LaunchSpec("emb", "/w/m.gguf", kind="embedding", pooling="mean",
                      settings=EngineSettings(threads=2, context=512, gpu_layers=0))  # fmt: skip
    argv = adapter_for("llama.cpp").argv(Path("/bin/llama-server"), spec, _where(tmp_path))
    assert "--embeddings" in argv
    assert _flag(argv, "--pooling") == "mean"
    assert (_flag(argv, "-t"), _flag(argv, "-c"), _flag(argv, "-ngl")) == ("2", "512", "0")
    chat = adapter_for("llama.cpp").argv(
        Path("/bin/llama-server"), LaunchSpec("m", "/w/m.gguf"), _where(tmp_path)
    )
    assert "--embeddings" not in chat and "--pooling" not in chat


def test_pooling_belongs_to_embedding_profiles() -> None:
    with pytest.raises(ValidationError, match="pooling"):
        ModelProfile(model_id="m", memory_mb=1, pooling="mean")
    assert ModelProfile(model_id="e", memory_mb=1, kind="embedding", pooling="cls").pooling == "cls"


def test_vllm_refuses_to_start_without_a_runtime_and_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRID_VLLM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm anywhere on it
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF")
    supervisor = LlamaCppSupervisor(LlamaCppConfig(state_dir=tmp_path / "engines"))
    settings = EngineSettings(context=8192, gpu_memory_utilization=0.8)
    spec = LaunchSpec("big", str(weights), runtime="vllm", gpu_count=2, settings=settings)
    with pytest.raises(GridError) as caught:
        supervisor.warm("big", weights, spec=spec)
    err = caught.value
    assert err.code == "runtime_not_installed"
    command = err.details["command"]
    assert isinstance(command, str) and command in err.message
    words = command.split()
    assert words[:3] == ["vllm", "serve", str(weights)]
    assert _flag(words, "--tensor-parallel-size") == "2"
    assert _flag(words, "--max-model-len") == "8192"
    assert _flag(words, "--gpu-memory-utilization") == "0.8"
    assert _flag(words, "--served-model-name") == "big"
    assert supervisor.engine_key not in command  # the key is only in the 0600 config file
    assert supervisor.statuses() == {}  # nothing was started or recorded
    supervisor.close()


def test_vllm_key_travels_in_an_owner_only_config_file(tmp_path: Path) -> None:
    adapter, where = VllmAdapter(), _where(tmp_path)
    spec = LaunchSpec("big", "/models/big", runtime="vllm")
    adapter.prepare(spec, where, "k" * 32)
    argv = adapter.argv(Path("/usr/bin/vllm"), spec, where)
    config = Path(_flag(argv, "--config"))
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert "k" * 32 in config.read_text() and "k" * 32 not in " ".join(argv)


def test_vllm_memory_is_its_share_of_each_tensor_parallel_device() -> None:
    # 0.9 of two 80 GB devices (the largest two of three): 147,456 MB, above the declared 40 GB
    spec = LaunchSpec("big", "/m", runtime="vllm", gpu_count=2)
    assert VllmAdapter().memory_mb(spec, [80 * GB, 24 * GB, 80 * GB], 40 * GB) == 147456
    low = LaunchSpec("s", "/m", runtime="vllm", gpu_count=1,
                     settings=EngineSettings(gpu_memory_utilization=0.25))  # fmt: skip
    assert VllmAdapter().memory_mb(low, [48 * GB], 1000) == 12288


def test_vllm_activity_reads_its_prometheus_metrics() -> None:
    text = (
        "# HELP vllm:num_requests_running Number of requests running\n"
        'vllm:num_requests_running{model_name="big"} 2.0\n'
        'vllm:num_requests_waiting{model_name="big"} 1.0\n'
        "garbage line\n"
    )
    metrics = parse_prometheus(text)
    assert metrics["vllm:num_requests_running"] == 2.0
    busy = vllm_activity(metrics)
    assert (busy.state, busy.processing) == (ActivityState.BUSY, 3)
    assert vllm_activity(parse_prometheus("vllm:num_requests_running 0\n")).idle
    assert vllm_activity({}).state is ActivityState.UNKNOWN  # silence is never idle


@pytest.mark.parametrize("flags", [["--port", "1"], ["--api-key", "x"], ["--batch-size", "-9"],
                                   ["--host"], ["--model", "/etc/passwd"]])  # fmt: skip
def test_extra_flags_come_from_the_allow_list(flags: list[str]) -> None:
    with pytest.raises(ValidationError):
        EngineSettings(extra_flags=flags)


def _node(**fields: object) -> NodeConfig:
    return NodeConfig.model_validate({"grid_url": "http://127.0.0.1:1", "host_id": "h", **fields})


def test_host_overrides_sit_above_the_profile_and_the_model_override_wins() -> None:
    profile = ModelProfile(
        model_id="m", memory_mb=1, engine={"threads": 2, "context": 4096, "parallel": 2}
    )
    node = _node(engine_overrides={"*": {"threads": 8}, "m": {"context": 2048}})
    spec = node_launch(node, "m", WireLaunch.of(profile), None)
    assert spec.settings == EngineSettings(threads=8, context=2048, parallel=2)
    other = node_launch(node, "x", WireLaunch.of(ModelProfile(model_id="x", memory_mb=1)), None)
    assert other.settings == EngineSettings(threads=8)


def test_the_runtime_is_the_first_profile_runtime_the_node_offers() -> None:
    launch = WireLaunch(runtimes=["vllm", "llama.cpp"])
    assert node_launch(_node(), "m", launch, None).runtime == "llama.cpp"
    assert node_launch(_node(runtimes=["vllm"]), "m", launch, None).runtime == "vllm"


def test_the_node_defaults_sit_under_the_profile(tmp_path: Path) -> None:
    from grid.node.engines.launch import build_argv

    config = LlamaCppConfig(state_dir=tmp_path, threads=3, context_size=999)
    spec = LaunchSpec("m", "/w/m.gguf", settings=EngineSettings(context=2048))
    argv = build_argv(config, Path("/b"), "m", Path("/w/m.gguf"), 39100, tmp_path / "k", spec=spec)
    assert (_flag(argv, "-t"), _flag(argv, "-c")) == ("3", "2048")


def test_gpu_devices_are_read_from_nvidia_smi_and_reported_on_the_wire() -> None:
    from grid.node.agent.report import MemoryReading, resources_block
    from grid.node.engines.devices import parse_memory_totals
    from grid.runtime.controller.wire import build_host

    assert parse_memory_totals("81559\n81559\n[N/A]\n") == [81559, 81559]
    node = _node(capacity_mb=1000, gpu_memory_mb=[81559, 40960])
    block = resources_block(node, MemoryReading(2000, 1500), None)
    assert (block.gpu_count, block.gpu_memory_mb) == (2, [81559, 40960])
    host, problems = build_host("h", block, None, now=0.0)
    assert problems == [] and host.devices_mb == [81559, 40960]
    bare = resources_block(
        _node(capacity_mb=1000, gpu_memory_mb=[]), MemoryReading(2000, 1500), None
    )
    assert "gpu_count" not in bare.model_dump(exclude_unset=True)  # the wire is as before
