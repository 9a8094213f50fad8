"""The node agent: heartbeats, command admission, one side effect at a time, durable state.

The face of this package (what the CLI, the lab and the tests use):
    config.py     `node.json`: the agent's configuration and model catalog
    credential.py the node credential: token and reply key, read from every path
    process.py    the detached daemon: start, find, stop (`python -m grid.node.agent`)
    main.py       the daemon's entry point: wiring the supervisor, store, telemetry and client
    loop.py       `NodeAgent`: the agent's state and the heartbeat cycle that wires the rest
    link.py       `ControllerLink`: one heartbeat exchange and what the node knows of it
    inbox.py      `CommandInbox`: admission, the durable queue, authority deadlines
    worker.py     `Worker`: one side effect at a time on its own thread
    fence.py      the controller-authority fence (pure)
    admission.py  what a heartbeat's commands may do, at receipt and at start (pure)
    commands.py   the side effects of LOAD, WARM, DRAIN and UNLOAD
    state.py      `agent.json` and `override.json`: what survives a restart
    report.py     what the node tells the controller (the heartbeat body)
    status.py     `status.json`: what the running agent last saw and did
    telemetry.py  where the protection loop's samples come from (host or logical node)
"""

from __future__ import annotations

from grid.fleet.actions import ReceiptStatus
from grid.node.agent.config import (
    CatalogEntry,
    NodeConfig,
    config_path,
    load_config,
    parse_config,
    save_config,
)
from grid.node.agent.credential import (
    credential_id,
    credential_text,
    no_reply_key,
    parse_credential,
    read_credential_file,
    reusable,
    token_claims,
)
from grid.node.agent.fence import CommandFence, FenceVerdict
from grid.node.agent.loop import AgentDeps, HeartbeatResult, NodeAgent
from grid.node.agent.process import (
    AGENT_MODULE,
    AgentProcess,
    log_tail,
    pid_record,
    running_agent,
    start_agent,
    stop_agent,
)
from grid.node.agent.state import (
    AgentState,
    ResidencyRecord,
    clear_override,
    read_override,
    write_override,
)
from grid.node.agent.status import read_status
from grid.node.agent.telemetry import HostTelemetry, LogicalTelemetry, write_knobs

__all__ = [
    "AGENT_MODULE",
    "AgentDeps",
    "AgentProcess",
    "AgentState",
    "CatalogEntry",
    "CommandFence",
    "FenceVerdict",
    "HeartbeatResult",
    "HostTelemetry",
    "LogicalTelemetry",
    "NodeAgent",
    "NodeConfig",
    "ReceiptStatus",
    "ResidencyRecord",
    "clear_override",
    "config_path",
    "credential_id",
    "credential_text",
    "load_config",
    "log_tail",
    "no_reply_key",
    "parse_config",
    "parse_credential",
    "pid_record",
    "read_credential_file",
    "read_override",
    "read_status",
    "reusable",
    "running_agent",
    "save_config",
    "start_agent",
    "stop_agent",
    "token_claims",
    "write_knobs",
    "write_override",
]
