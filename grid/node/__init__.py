"""The managed host runtime (the node agent side of the allocator).

    agent/       the agent: heartbeat loop, controller link, command inbox and worker, the four
                 commands, admission and the authority fence, durable state, status, config,
                 the daemon (`python -m grid.node.agent`)
    protection/  local host protection: pure evaluate, conditions, telemetry readers
    engines/     the llama.cpp engine supervisor (one Grid-owned child per model)
    artifacts/   the verified artifact cache, resumable transfers, the shipped weights

Each subpackage exports its face in its own `__init__.py`; nothing here imports grid.api.
"""
