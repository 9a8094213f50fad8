"""The launch spec of one child on this node: the profile's launch facts (from the WARM command
or the latest reply) with this host's overrides laid on top (docs/engines.md).

Layers, lowest first: the node's defaults (`engine_threads`, `engine_context`,
`engine_parallel`; applied by the supervisor), the profile's `engine` settings, the node's
`engine_overrides["*"]`, then `engine_overrides[MODEL_ID]`. The runtime is the first of the
profile's runtimes that this node offers (llama.cpp when none matches: the planner never
places a model on a node without one of its runtimes).
"""

from __future__ import annotations

from grid.fleet import EngineSettings, WireLaunch
from grid.node.agent.config import NodeConfig
from grid.node.engines import LLAMA_CPP, LaunchSpec

ALL_MODELS = "*"


def effective_settings(config: NodeConfig, model_id: str, wanted: EngineSettings) -> EngineSettings:
    overrides = config.engine_overrides
    return wanted.merge(overrides.get(ALL_MODELS)).merge(overrides.get(model_id))


def node_launch(
    config: NodeConfig,
    model_id: str,
    launch: WireLaunch | None,
    chat_template: str | None,
    model_path: str = "",
) -> LaunchSpec:
    launch = launch or WireLaunch()
    runtime = next((r for r in launch.runtimes if r in config.runtimes), LLAMA_CPP)
    return LaunchSpec(
        model_id=model_id,
        model_path=model_path,
        runtime=runtime,
        kind=launch.kind,
        pooling=launch.pooling,
        chat_template=chat_template,
        settings=effective_settings(config, model_id, launch.engine),
        gpu_count=launch.gpu_count,
    )
