"""A logical fleet on one machine: one real controller and N node agents with real llama.cpp.

Layout of the run folder (default ~/.grid/test, or $GRID_TEST_DIR):
    fleet.json               the settings the fleet was started with
    controller/              the controller's state folder (config.json holds the operator
                             capability, owner-only: the token file for allocator mutations)
    nodes/<host_id>/         each node agent's state folder, with node.token (its host-scoped
                             credential, 0600), node.json, agent.json, engines/...
    weights/                 shipped weights that had to be assembled (gemma)

Every node has its own host id, failure domain, state file, credential, engine port range and
capacity share; the controller is started exactly as `grid up` starts it. `start` is idempotent
for equal settings; `stop` stops the agents gracefully (they drain and stop their children),
then the controller, then signals any recorded child that still runs and is proved to be ours,
and reports anything left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grid.api import (
    CONFIG_NAME,
    load_or_create_settings,
    load_settings,
    start_server,
    stop_server,
    write_settings,
)
from grid.fleet import GridError, atomic_write_text
from grid.lab.logical_fleet_settings import CandidateModel, FleetSettings
from grid.node.agent import (
    AgentProcess,
    CatalogEntry,
    NodeConfig,
    credential_id,
    credential_text,
    read_status,
    reusable,
    running_agent,
    save_config,
    start_agent,
    stop_agent,
)
from grid.node.engines import (
    EngineStateStore,
    find_own_children,
    identity_mismatch,
    is_alive,
    read_identity,
)
from grid.wire import AllocatorClient

RUN_DIR_ENV = "GRID_TEST_DIR"
FLEET_NAME = "fleet.json"
TOKEN_NAME = "node.token"
NODE_TOKEN_TTL_S = 30 * 86_400.0
CONTROLLER_TUNING: dict[str, Any] = {
    "engine": "cpsat",
    "plan_budget_s": 1.0,
    "deterministic": True,
    "periodic_interval_s": 1.0,
    "membership_grace_s": 10.0,
}


def default_run_dir() -> Path:
    configured = os.environ.get(RUN_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".grid" / "test"


@dataclass
class StartReport:
    url: str
    token_file: Path
    started_now: bool
    hosts: list[str]
    ready_hosts: list[str] = field(default_factory=list)


@dataclass
class StopReport:
    agents: dict[str, str]
    controller: str
    killed_children: list[int]
    leftover: list[int]


class LogicalFleet:
    def __init__(self, run_dir: Path | None = None) -> None:
        self.run_dir = (run_dir or default_run_dir()).expanduser().absolute()
        self.controller_dir = self.run_dir / "controller"

    # ------------------------------------------------------------------ layout

    def node_dir(self, host_id: str) -> Path:
        return self.run_dir / "nodes" / host_id

    @staticmethod
    def hosts(settings: FleetSettings) -> list[str]:
        return [settings.host_id(i) for i in range(settings.machines)]

    def node_dirs(self) -> list[Path]:
        root = self.run_dir / "nodes"
        return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def settings(self) -> FleetSettings | None:
        try:
            return FleetSettings.model_validate_json(
                (self.run_dir / FLEET_NAME).read_text(encoding="utf-8")
            )
        except (OSError, ValueError):
            return None

    def ca_file(self) -> str | None:
        """The CA the controller's certificate verifies with (None: plain HTTP on loopback)."""
        try:
            return load_settings(self.controller_dir).ca_file or None
        except GridError:
            return None

    def url(self) -> str | None:
        try:
            return load_settings(self.controller_dir).url
        except GridError:
            return None

    def running(self) -> bool:
        settings = self.settings()
        if settings is None:
            return False
        return all(a is not None for a in self._agents(settings)) and self._controller_healthy()

    def _agents(self, settings: FleetSettings) -> list[AgentProcess | None]:
        return [running_agent(self.node_dir(host_id)) for host_id in self.hosts(settings)]

    def _controller_healthy(self) -> bool:
        url = self.url()
        if url is None:
            return False
        try:
            with AllocatorClient(url, timeout_s=2.0, ca_file=self.ca_file()) as client:
                client.healthz()
        except GridError:
            return False
        return True

    # ------------------------------------------------------------------ start

    def start(self, settings: FleetSettings, *, wait_ready_s: float = 0.0) -> StartReport:
        previous = self.settings()
        if previous is not None and previous != settings and self._anything_running(previous):
            raise GridError(
                "fleet_settings_differ",
                f"a logical fleet with other settings already runs in {self.run_dir}",
                fix="stop it first, or start with the same settings",
                next_command="grid test stop",
            )
        already = previous == settings and self.running()
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._start_controller(settings)
        url = self.url()
        assert url is not None
        operator = load_settings(self.controller_dir).operator_token
        hosts = self.hosts(settings)
        with AllocatorClient(url, operator_token=operator, ca_file=self.ca_file()) as admin:
            for index in range(settings.machines):
                self._start_node(admin, settings, index)
            # A controller that lost its state (quarantine) runs in recommend mode with no
            # profile behind a running fleet: configure it again, never report it READY.
            if not already or not self._configured(settings.model.model_id):
                admin.put_model(settings.model.model_id, self._profile(settings))
                for candidate in settings.candidates:
                    admin.put_model(candidate.model_id, candidate_profile(settings, candidate))
                admin.set_mode("automatic")
        atomic_write_text(self.run_dir / FLEET_NAME, settings.model_dump_json(indent=2) + "\n")
        report = StartReport(url, self.controller_dir / CONFIG_NAME, not already, hosts)
        if wait_ready_s > 0:
            report.ready_hosts = self.wait_ready(settings, wait_ready_s)
        return report

    def _anything_running(self, settings: FleetSettings) -> bool:
        return any(a is not None for a in self._agents(settings)) or self._controller_healthy()

    def _start_controller(self, settings: FleetSettings) -> None:
        if not self._controller_healthy():
            # The fleet's tuning lives in config.json beside the secrets; a port change keeps it.
            current = load_or_create_settings(self.controller_dir, port=settings.port)
            if current.controller != CONTROLLER_TUNING:
                tuned = replace(current, controller=dict(CONTROLLER_TUNING))
                write_settings(self.controller_dir, tuned)
        start_server(self.controller_dir, settings.port, self._listen(settings))

    def _listen(self, settings: FleetSettings) -> dict[str, Any]:
        """TLS with a CA generated for this run folder when machines have distinct addresses,
        else plain HTTP on loopback."""
        # The controller stays on loopback, so /v1 is open without client keys (explicitly).
        if not settings.distinct_addresses:
            return {
                "host": "127.0.0.1",
                "tls_cert": "",
                "tls_key": "",
                "ca_file": "",
                "open_access": True,
            }
        pki = self.run_dir / "pki"
        if not (pki / "ca.pem").exists():
            from grid.api import generate_ca_and_server

            generate_ca_and_server(pki, ["127.0.0.1", "localhost"], common_name="Grid test CA")
        return {
            "host": "127.0.0.1",
            "tls_cert": str(pki / "server.pem"),
            "tls_key": str(pki / "server-key.pem"),
            "ca_file": str(pki / "ca.pem"),
            "open_access": True,
        }

    def _start_node(self, admin: AllocatorClient, settings: FleetSettings, index: int) -> None:
        host_id = settings.host_id(index)
        folder = self.node_dir(host_id)
        if running_agent(folder) is not None:
            return
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        token = reusable(folder / TOKEN_NAME, host_id, time.time())
        listed = admin.node_credentials(host_id) if token is not None else []
        if token is None or not any(  # a revoked or unknown credential is replaced
            r.credential_id == credential_id(token) and r.state == "valid" for r in listed
        ):
            minted = admin.node_credential(host_id, ttl_s=NODE_TOKEN_TTL_S)
            # One file: the token and the reply key the agent verifies every reply with.
            text = credential_text(minted.token, minted.reply_key)
            atomic_write_text(folder / TOKEN_NAME, text)
        url = self.url()
        assert url is not None
        config = NodeConfig(
            grid_url=url,
            host_id=host_id,
            token_file=str(folder / TOKEN_NAME),
            capacity_mb=settings.capacities_mb[index],
            external_memory="none",  # the share was carved out of free memory at start
            disk_share=1.0 / settings.machines,
            failure_domain=settings.failure_domain(index),
            tags=["logical"],
            engine_port_range=settings.engine_ports(index),
            engine_threads=settings.threads,
            catalog=[
                CatalogEntry(model_id=m.model_id, path=m.path, sha256=m.sha256)
                for m in settings.catalog_models()
            ],
            heartbeat_interval_s=settings.heartbeat_s,
            telemetry="logical",
            protection={"debounce_samples": 2, "recovery_cooldown_s": 5.0},
            advertise_address=settings.address(index),
            ca_file=self.ca_file(),
        )
        save_config(folder, config)
        start_agent(folder, token=None)

    def _profile(self, settings: FleetSettings) -> dict[str, Any]:
        model = settings.model
        return {
            "memory_mb": model.memory_mb,
            "runtimes": ["llama.cpp"],
            "artifact_sha256": model.sha256,
            "chat_template": model.chat_template,
            "min_replicas": settings.min_replicas,
            "max_replicas": max(settings.max_replicas, settings.min_replicas),
            "priority": settings.priority,
            "min_residency_s": settings.min_residency_s,
            "scale_down_cooldown_s": settings.scale_down_cooldown_s,
            "workload_scores": dict(settings.model_scores),
        }

    def wait_ready(self, settings: FleetSettings, timeout_s: float) -> list[str]:
        """Hosts where the model is READY, once min_replicas are (or the timeout passes)."""
        deadline = time.monotonic() + timeout_s
        ready: list[str] = []
        while time.monotonic() < deadline:
            ready = self.ready_hosts(settings.model.model_id)
            if len(ready) >= max(1, settings.min_replicas):
                break
            time.sleep(0.5)
        return ready

    def _configured(self, model_id: str, doc: dict[str, Any] | None = None) -> bool:
        """The controller manages the model: automatic mode with its profile."""
        doc = doc if doc is not None else self.controller_status()
        profiles = {p.get("model_id") for p in (doc or {}).get("profiles", [])}
        return doc is not None and doc.get("mode") == "automatic" and model_id in profiles

    def ready_hosts(self, model_id: str) -> list[str]:
        """Hosts where the controller counts the model READY (none while it does not manage
        the model: a node's warm child alone is not a managed replica)."""
        doc = self.controller_status()
        if doc is None or not self._configured(model_id, doc):
            return []
        return sorted(
            h["host_id"]
            for h in doc.get("hosts", [])
            for r in h.get("residencies", [])
            if r.get("model_id") == model_id and r.get("state") == "ready"
        )

    # ------------------------------------------------------------------ status

    def controller_status(self) -> dict[str, Any] | None:
        url = self.url()
        if url is None:
            return None
        try:
            with AllocatorClient(url, timeout_s=5.0, ca_file=self.ca_file()) as client:
                return client.status(history=20).model_dump(mode="json")
        except GridError:
            return None

    def status(self) -> dict[str, Any]:
        settings = self.settings()
        ctl = self.controller_status()
        nodes = []
        for folder in self.node_dirs():
            agent = running_agent(folder)
            report = read_status(folder)
            nodes.append(
                {
                    "host_id": folder.name,
                    "running": agent is not None,
                    "pid": agent.pid if agent is not None else None,
                    "lifecycle": report.lifecycle if report is not None else None,
                    "registered": report.registered if report is not None else None,
                    "last_error": report.last_error if report is not None else None,
                    "residencies": [r.model_dump(mode="json") for r in report.residencies]
                    if report is not None
                    else [],
                }
            )
        return {
            "run_dir": str(self.run_dir),
            "controller_url": self.url(),
            "ca_file": self.ca_file(),
            "settings": settings.model_dump(mode="json") if settings is not None else None,
            "controller": {
                "url": self.url(),
                "running": ctl is not None,
                "mode": ctl.get("mode") if ctl else None,
                "token_file": str(self.controller_dir / CONFIG_NAME),
                "pending_commands": len(ctl.get("pending_commands", [])) if ctl else None,
                "unmet": ctl.get("unmet", []) if ctl else None,
            },
            "hosts": ctl.get("hosts", []) if ctl else [],
            "history": ctl.get("history", []) if ctl else [],
            "nodes": nodes,
        }

    # ------------------------------------------------------------------ stop

    def stop(self, *, timeout_s: float = 60.0) -> StopReport:
        agents: dict[str, str] = {}
        for folder in self.node_dirs():
            try:
                agents[folder.name] = stop_agent(folder, timeout_s=timeout_s)
            except GridError as err:
                agents[folder.name] = err.code
        controller = (
            stop_server(self.controller_dir) if self.controller_dir.exists() else "not_running"
        )
        killed: list[int] = []
        leftover: list[int] = []
        for folder in self.node_dirs():
            for pid, proven in recorded_children(folder / "engines"):
                if proven:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                elif is_alive(pid):
                    leftover.append(pid)  # alive but not provably ours: never signalled
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and any(is_alive(p) for p in killed):
            time.sleep(0.05)
        leftover += [p for p in killed if is_alive(p)]
        return StopReport(agents, controller, killed, leftover)


def candidate_profile(settings: FleetSettings, candidate: CandidateModel) -> dict[str, Any]:
    """A candidate: no replica floor, one replica at most, its workload scores."""
    return {
        "memory_mb": candidate.memory_mb,
        "runtimes": ["llama.cpp"],
        "artifact_sha256": candidate.sha256,
        "chat_template": candidate.chat_template,  # gemma's GGUF carries none
        "min_replicas": 0,
        "max_replicas": 1,
        "min_residency_s": settings.min_residency_s,
        "scale_down_cooldown_s": settings.scale_down_cooldown_s,
        "workload_scores": dict(candidate.workload_scores),
    }


def recorded_children(engines_dir: Path) -> list[tuple[int, bool]]:
    """(pid, proven) of every live child recorded in a node's engine state, and of the node's
    own children found without it (run folder, key-file argv, birth marker: an unreadable or
    lost engine state must never make a running engine look gone)."""
    store = EngineStateStore(engines_dir)
    try:
        records = list(store.read().engines.values())
    except GridError:
        records = []
    out: list[tuple[int, bool]] = []
    for found in find_own_children(store.state_dir, store.key_path):
        if all(r.pid != found.identity.pid for r in records):
            out.append((found.identity.pid, True))
    for record in records:
        if not is_alive(record.pid):
            continue
        birth = record.birth.marker() if record.birth is not None else None
        observed = read_identity(record.pid)
        reason = identity_mismatch(record.executable, tuple(record.argv), birth, observed)
        out.append((record.pid, reason is None))
    return out
