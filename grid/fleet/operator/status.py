"""The allocator status document as typed operator messages (GET /allocator/status).

The controller builds a `StatusDocument` (grid/runtime/controller/status.py); the HTTP route
adds the router's side (relay tunnels, route failures, client keys) as an `AllocatorStatus`;
the client (grid/wire) parses the same model and the CLI renderers read its fields. Field
names and order are the JSON document's keys: `model_dump(mode="json")` is the wire body.
A key that only some documents carry (a host's `reachability` for an operator, a forecast's
`inferred_from`) is left out, not sent as null, when it is absent.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grid.fleet.actions import Action, ActionRecord, Mode, ReconcileResult, Tombstone, Urgency
from grid.fleet.models import DemandEntry, Host, ModelProfile, Plan, Unsatisfied
from grid.fleet.prefetch import CacheEviction, PrefetchAdvisory, PrefetchSkip
from grid.fleet.wire import WireCommand
from grid.fleet.workloads import Outcome, PortfolioReport, WorkloadForecast


def _absent(value: object) -> bool:
    return value is None


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatusWarning(_Doc):
    code: str
    message: str


class Suspicion(_Doc):
    """A report the controller did not believe (grid.runtime.controller.trust)."""

    code: str
    message: str
    count: int
    first_at: float
    last_at: float


class LeaseSummary(_Doc):
    held: bool
    term: int | None
    expires_at: float | None
    ttl_s: float
    max_term: int


class Authority(_Doc):
    """Who may mutate: role (leader, standby, ...), term, controller id, leader URL."""

    role: str
    term: int
    controller_id: str
    leader_url: str | None


class Revisions(_Doc):
    dirty: int
    processed: int
    success: int
    safety: int
    success_safety: int


class GraceSummary(_Doc):
    active: bool
    until: float | None
    restored: bool


class TickSummary(_Doc):
    """One controller tick (the controller's TickReport, grid/runtime/controller/reports.py)."""

    ok: bool
    at: float
    revision: int
    duration_ms: float = 0.0
    generation: str = ""
    new_generation: bool = False
    engine: str = ""
    solver_status: str = ""
    reused_plan: bool = False  # inputs unchanged since the last solve: its plan was kept
    # reused | solved (in this tick) | adopted (a background plan) | carried (the plan in use,
    # still valid, while the background solves the new inputs): see plan_worker.py
    plan_source: str = ""
    plan_age_s: float = 0.0  # seconds since the snapshot the plan acted on was solved for
    issued: list[str] = Field(default_factory=list)
    withdrawn: list[str] = Field(default_factory=list)
    error: str = ""


class TickLatency(_Doc):
    p50: float | None
    p95: float | None
    samples: int


class ResidencyRow(_Doc):
    model_id: str
    state: str  # a residency state, or "stale" (a silent host), or "warming" (route unproven)
    memory_mb: int
    ownership: str
    active_requests: int | None  # None: the node does not know (an external endpoint)


class HostRow(_Doc):
    """One host as status shows it: its figures, why it refuses work, what it holds."""

    host_id: str
    state: str  # the reported state, or "stale" past the route lease
    reported_state: str
    ownership: str
    failure_domain: str
    capacity_mb: int
    reserved_mb: int
    external_mb: int
    allocatable_mb: int
    live_mb: int
    max_models: int | None
    heartbeat_age_s: float
    refusals: list[str]
    problems: list[str]
    suspicions: list[Suspicion]
    refused_routes: dict[str, str]
    address: str | None
    node_records: int
    reachability: list[str] | None = Field(default=None, exclude_if=_absent)  # operators only
    residencies: list[ResidencyRow]
    cached_models: list[str]


class Inferred(_Doc):
    """The relation a quiet model's demand was inferred from."""

    source: str
    kind: str
    support: int
    share: float


class ModelForecastRow(DemandEntry):
    """A model's demand entry with what produced it."""

    peak_rpm: float
    active_buckets: int
    inferred_from: Inferred | None = Field(default=None, exclude_if=_absent)
    capped: bool | None = Field(default=None, exclude_if=_absent)


class ExternalRow(_Doc):
    name: str
    url: str
    runtime: str
    serving: list[str]
    healthy: bool
    code: str
    reason: str


class DemandSummary(_Doc):
    ignored: dict[str, int]
    series: int


class WorkflowEdge(_Doc):
    source: str
    target: str
    count: int
    departures: int
    confidence: float


class WorkloadsSection(_Doc):
    """Workload demand, learned workflow edges, outcome evidence and the plan's portfolio."""

    vocabulary: list[str]
    forecasts: dict[str, WorkloadForecast]
    ignored: dict[str, int]
    edges: list[WorkflowEdge]
    outcomes: list[Outcome]
    portfolio: PortfolioReport | None


class PredictionRow(_Doc):
    model_id: str
    source: str
    target: str
    confidence: float
    offered_concurrency: float
    lead_s: float | None
    edge: str  # "source->target"


class CacheRow(_Doc):
    host_id: str
    model_id: str
    sha256: str
    size_mb: int
    age_s: float
    warmed: bool


class PrefetchSection(_Doc):
    enabled: bool
    reserve_mb: int
    predictions: list[PredictionRow]
    advisories: list[PrefetchAdvisory]
    evictions: list[CacheEviction]
    skipped: list[PrefetchSkip]
    cache: list[CacheRow]


class PendingCommand(WireCommand):
    """An open command as its node receives it, with its delivery record."""

    model_config = ConfigDict(extra="forbid")
    status: str
    delivered_at: float | None
    priority: int
    urgency: Urgency


class WithdrawnRecord(ActionRecord):
    message: str


class SafetyError(_Doc):
    """Destructive commands held at delivery (and whether their markers could be removed)."""

    at: float
    action_ids: list[str]
    message: str


class TimingRow(_Doc):
    phase: str
    host_id: str
    model_id: str
    artifact_sha256: str | None
    mean_s: float
    samples: int
    authoritative: bool
    age_s: float


class Counters(_Doc):
    ticks: int
    tick_failures: int
    commands_issued: int
    commands_delivered: int
    acknowledgements: dict[str, int]
    observations_accepted: int
    observations_ignored: int


class StatusDocument(_Doc):
    """What the controller knows and decided, for operators (`grid allocator status`)."""

    schema_version: int = 1
    now: float
    controller_id: str
    mode: Mode
    durable: bool
    state_path: str
    warnings: list[StatusWarning]
    suspicious_hosts: dict[str, list[Suspicion]]
    lease: LeaseSummary
    authority: Authority
    revisions: Revisions
    grace: GraceSummary
    last_tick: TickSummary | None
    last_success_at: float | None
    tick_latency_ms: TickLatency
    hosts: list[HostRow]
    snapshots: list[Host]
    profiles: list[ModelProfile]
    tombstones: list[Tombstone]
    forecasts: dict[str, ModelForecastRow]
    externals: list[ExternalRow]
    demand: DemandSummary
    workloads: WorkloadsSection
    prefetch: PrefetchSection
    plan: Plan | None
    plan_generation: str | None
    unmet: list[Unsatisfied]
    reconciliation: ReconcileResult | None
    proposed_actions: list[Action]
    pending_commands: list[PendingCommand]
    delivered_pending_action_ids: list[str]
    withdrawn_destructive: list[WithdrawnRecord]
    delivery_safety_error: SafetyError | None
    history: list[ActionRecord]
    timings: list[TimingRow]
    counters: Counters


class RelayTunnel(_Doc):
    """A node's live relay tunnel (no secret: host, peer address, age, counts)."""

    host_id: str
    connected: bool
    peer: str
    connected_for_s: float
    requests: int
    open_streams: int


class RouteFailure(_Doc):
    engine_id: str
    model_id: str
    code: str
    message: str
    at: float


class ClientKeyRow(_Doc):
    """A /v1 client key: never the key or its digest."""

    name: str
    prefix: str
    created_at: float
    revoked_at: float | None
    requests: int
    last_used_at: float | None


class ClientKeys(_Doc):
    open_access: bool
    keys: list[ClientKeyRow]
    requests: dict[str, int]


class AllocatorStatus(StatusDocument):
    """The status document as the HTTP route serves it: the controller's, plus the router's
    side (docs/addressing.md "Relay": live tunnels, each route's last failure) and the keys."""

    relay: list[RelayTunnel]
    route_failures: list[RouteFailure]
    client_keys: ClientKeys
