"""`python -m grid.node.agent --state-dir DIR`: the node agent process.

`grid allocator node start` runs this detached (see `process.py`); tests and the logical
fleet run it the same way. The node credential (its token and reply key, `credential.py`)
comes from the token file named in node.json or, with `--token-stdin`, from stdin (how the
CLI hands over GRID_ALLOCATOR_NODE_TOKEN): never from argv or this process's environment, and
it is never logged. Without a reply key the agent does not start: it takes signed replies only.

Signals: SIGTERM or SIGINT stop gracefully (fence, finish the running action, drain and stop
owned children without cutting requests); SIGUSR1 stops the same way but cuts busy children.
SIGKILL leaves children running; a restarted agent adopts the ones it can prove.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from grid.fleet import GridError
from grid.node.agent.config import NodeConfig, load_config
from grid.node.agent.credential import (
    MAX_CREDENTIAL_TEXT,
    no_reply_key,
    parse_credential,
    read_credential_file,
)
from grid.node.agent.link import FailoverClient, NodeClient
from grid.node.agent.loop import AgentDeps, NodeAgent
from grid.node.agent.telemetry import HostTelemetry, LogicalTelemetry, TelemetrySource
from grid.node.agent.tunnel import RelayTunnel
from grid.node.artifacts import ArtifactStore
from grid.node.engines import (
    EngineState,
    LlamaCppConfig,
    LlamaCppSupervisor,
    detect_gpu_memory_mb,
)
from grid.wire import AllocatorClient

log = logging.getLogger("grid.node")
ENGINES_DIR = "engines"
ARTIFACTS_DIR = "artifacts"


def refusal_text(err: GridError) -> str:
    """A refusal as the CLI shows it: code and sentence, `To fix:` and the next command."""
    lines = [f"Error [{err.code}]: {err.message}"]
    if err.fix:
        lines.append(f"To fix: {err.fix}")
    if err.next_command:
        lines.append(f"Next: {err.next_command}")
    return "\n".join(lines)


def read_credential(config: NodeConfig, *, from_stdin: bool) -> tuple[str, str]:
    """The token and its reply key, from stdin (the whole credential text) or the token file
    named in node.json (`credential.py`). Both are required: a node takes signed replies only."""
    if from_stdin:
        token, key = parse_credential(sys.stdin.read(MAX_CREDENTIAL_TEXT))
        source = "stdin"
    elif config.token_file:
        try:
            token, key = read_credential_file(config.token_file)
        except OSError as exc:
            raise GridError(
                "token_file_unreadable",
                f"cannot read the node credential file {config.token_file} ({exc.strerror})",
                fix="check the --token-file path and its permissions",
                next_command=f"ls -l {config.token_file}",
            ) from None
        source = config.token_file
    else:
        raise GridError(
            "no_node_credential",
            "the node agent has no credential",
            fix="set GRID_ALLOCATOR_NODE_TOKEN or pass --token-file to `node start`",
            next_command="grid allocator token write FILE --host-id ID",
        )
    if not token:
        raise GridError(
            "no_node_credential",
            f"the node credential from {source} is empty",
            fix="write a credential with `grid allocator token write FILE --host-id ID`",
            next_command="grid allocator token write FILE --host-id ID",
        )
    if key is None:
        raise no_reply_key(source)
    return token, key


def engine_config(config: NodeConfig, state_dir: Path) -> LlamaCppConfig:
    return LlamaCppConfig(
        state_dir=state_dir / ENGINES_DIR,
        binary=Path(config.llama_server) if config.llama_server else None,
        port_range=config.engine_port_range,
        host=config.engine_address,  # loopback only: reached over the relay tunnel
        context_size=config.engine_context,
        threads=config.engine_threads,
        parallel=config.engine_parallel,
        ready_timeout_s=config.ready_timeout_s,
        stop_grace_s=config.stop_grace_s,
    )


def build_agent(config: NodeConfig, state_dir: Path, token: str, reply_key: str) -> NodeAgent:
    if config.gpu_memory_mb is None:  # not listed by the operator: what nvidia-smi reports
        config = config.model_copy(update={"gpu_memory_mb": detect_gpu_memory_mb()})
    supervisor = LlamaCppSupervisor(engine_config(config, state_dir))
    artifacts = ArtifactStore(state_dir / ARTIFACTS_DIR, hf_base_url=config.hf_base_url)
    telemetry: TelemetrySource
    if config.telemetry == "logical":
        telemetry = LogicalTelemetry(state_dir, dedicated=config.dedicated)
    else:
        telemetry = HostTelemetry(dedicated=config.dedicated)
    clients = [
        AllocatorClient(
            url,
            node_token=token,
            timeout_s=config.request_timeout_s,
            reply_key=reply_key,  # every reply must carry the controller's signature
            ca_file=config.ca_file,
        )
        for url in config.controller_urls
    ]
    client: NodeClient = clients[0] if len(clients) == 1 else FailoverClient(list(clients))

    def child_pids() -> list[int]:
        return [s.pid for s in supervisor.statuses().values() if s.pid is not None and s.proven]

    deps = AgentDeps(supervisor, artifacts, telemetry, client, child_pids)
    return NodeAgent(config, state_dir, deps)


def start_tunnels(
    config: NodeConfig, token: str, supervisor: LlamaCppSupervisor
) -> list[RelayTunnel]:
    """The relay tunnels of this host, dialling out (grid/node/agent/tunnel.py): one to each
    controller it lists, so a standby of a controller cluster reaches this host's engines too
    (docs/high-availability.md). A request reaches an engine only if the supervisor has it
    proven and ready on that port."""

    def resolve(model_id: str, port: int) -> str | None:
        status = supervisor.status(model_id)
        if (
            status is None
            or not status.proven
            or status.state is not EngineState.READY
            or status.port != port
        ):
            return None
        return status.base_url or supervisor.base_url(port)

    tunnels = [
        RelayTunnel(
            grid_url=url,
            host_id=config.host_id,
            token=token,
            resolve=resolve,
            engine_key=lambda: supervisor.engine_key,
            ca_file=config.ca_file,
        )
        for url in config.controller_urls
    ]
    for tunnel in tunnels:
        tunnel.start()
    return tunnels


def tunnels_status(tunnels: list[RelayTunnel]) -> Callable[[], dict[str, Any]]:
    """The relay's status for node status: the first controller's tunnel, and with several
    controllers every tunnel under `tunnels`."""

    def snapshot() -> dict[str, Any]:
        first = tunnels[0].snapshot()
        if len(tunnels) > 1:
            first["tunnels"] = [t.snapshot() for t in tunnels]
        return first

    return snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grid-node-agent")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--token-stdin", action="store_true")
    parser.add_argument("--instance", default="")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # request lines add nothing here
    state_dir: Path = args.state_dir.absolute()
    try:
        config = load_config(state_dir)
        token, reply_key = read_credential(config, from_stdin=args.token_stdin)
        agent = build_agent(config, state_dir, token, reply_key)
        supervisor = agent.deps.supervisor
        assert isinstance(supervisor, LlamaCppSupervisor)
        tunnels = start_tunnels(config, token, supervisor) if config.relay else []
    except GridError as err:
        print(refusal_text(err), file=sys.stderr)
        return 2
    agent.instance = args.instance
    if tunnels:
        agent.tunnel_status = tunnels_status(tunnels)
    stop = threading.Event()
    force = threading.Event()

    def graceful(_signum: int, _frame: FrameType | None) -> None:
        stop.set()
        agent.wake()

    def forced(_signum: int, _frame: FrameType | None) -> None:
        force.set()
        graceful(_signum, _frame)

    signal.signal(signal.SIGTERM, graceful)
    signal.signal(signal.SIGINT, graceful)
    signal.signal(signal.SIGUSR1, forced)
    log.info(
        "node agent for host %s (node %s) talking to %s",
        config.host_id,
        config.record_id,
        ", ".join(config.controller_urls),
    )
    try:
        agent.run(stop, force_stop=force.is_set)
    finally:
        for tunnel in tunnels:
            tunnel.stop()
        agent.deps.supervisor.close()
        agent.deps.artifacts.close()
        agent.deps.client.close()
    log.info("node agent stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
