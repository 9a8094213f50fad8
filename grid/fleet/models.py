"""The vocabulary: one pydantic class per concept, used by every layer.

Schema v1 of DESIGN.md. Missing optional fields take the spec's defaults; numbers must be
finite and non-negative; unknown fields and enum values are refused (see `snapshot.py` for the
error codes and field paths).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from grid.fleet.engine_settings import EngineSettings
from grid.fleet.prefetch import Prediction, PredictiveEntry, PrefetchPolicy, PrefetchReport
from grid.fleet.workloads import (
    DEFAULT_WORKLOAD_VOCABULARY,
    Modality,
    Outcome,
    PortfolioPolicy,
    PortfolioReport,
    WorkloadForecast,
    check_workload_words,
)

SCHEMA_VERSION = 1

# Ceilings (docs/value-ceilings.md): every amount the planner multiplies or sums stays far inside
# the solver's 64-bit coefficients. Above one, the refusal is `value_too_large` at the field.
MAX_MB = 1024**3  # 1 PiB in MB (1024**5 bytes / 1024**2)
MAX_PRIORITY = 1_000_000
MAX_COUNT = 100_000  # replica counts and model slots
# A model id travels in every command (`WireCommand.model_id`): longer ones are refused here.
MAX_MODEL_ID = 256

CEILING_ERROR = "value_too_large"
# A template name: letters, digits, `_ . -`, not starting with `-` (it becomes one argv value).
CHAT_TEMPLATE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _ceiling(limit: int, what: str) -> tuple[BeforeValidator, AfterValidator]:
    """Refuse a number above `limit` before it is coerced (1e20 is a float) and after."""

    def check(value: object) -> object:
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value > limit
        ):
            raise PydanticCustomError(
                CEILING_ERROR,
                "{shown} is above the ceiling of {limit} ({what})",
                {"shown": repr(value), "limit": limit, "what": what},
            )
        return value

    return BeforeValidator(check), AfterValidator(check)


MB = Annotated[int, *_ceiling(MAX_MB, "1 PiB in MB")]  # whole megabytes, at most 1 PiB
Priority = Annotated[int, *_ceiling(MAX_PRIORITY, "the highest administrator priority")]
Count = Annotated[int, *_ceiling(MAX_COUNT, "the most replicas or model slots")]
NonNegative = Annotated[float, Field(ge=0)]
Attempts = Annotated[int, Field(ge=0, le=1_000_000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)


class HostState(StrEnum):
    """Lifecycle decided by the host's local protection loop (only the first two take work)."""

    ACCEPTING = "accepting"
    THROTTLED = "throttled"
    DRAINING = "draining"
    PAUSED = "paused"
    UNHEALTHY = "unhealthy"
    QUARANTINED = "quarantined"


ADMITTING_STATES = frozenset({HostState.ACCEPTING, HostState.THROTTLED})


class ResidencyState(StrEnum):
    CACHED = "cached"  # weights on disk only: no memory, no slot
    LOADING = "loading"
    WARMING = "warming"
    READY = "ready"
    DRAINING = "draining"
    FAILED = "failed"


# States whose process (or claimed memory) is live on the host.
LIVE_STATES = frozenset(
    {
        ResidencyState.LOADING,
        ResidencyState.WARMING,
        ResidencyState.READY,
        ResidencyState.DRAINING,
        ResidencyState.FAILED,
    }
)
# States the planner may keep as an incumbent replica (zero incremental memory).
REUSABLE_STATES = frozenset({ResidencyState.LOADING, ResidencyState.WARMING, ResidencyState.READY})


class Ownership(StrEnum):
    MANAGED = "managed"  # Grid-owned process: Grid may actuate it
    MANUAL = "manual"  # operator-managed: inventory only
    EXTERNAL = "external"  # discovered engine: inventory only


class Evidence(StrEnum):
    DIRECT = "direct"
    INFERRED = "inferred"  # correlation-only: may use spare capacity, never evicts


class Residency(_Strict):
    model_id: str = Field(min_length=1)
    memory_mb: MB = Field(default=0, ge=0)
    state: ResidencyState = ResidencyState.READY
    managed: bool = True
    ownership: Ownership | None = None  # defaults from `managed` (external when False)
    runtime: str | None = None
    artifact_sha256: str | None = None
    loaded_at: float | None = Field(default=None, ge=0)
    last_used_at: float | None = Field(default=None, ge=0)
    active_requests: int | None = Field(default=0, ge=0)  # None: unknown (fails safe)

    @property
    def owner(self) -> Ownership:
        if self.ownership is not None:
            return self.ownership
        return Ownership.MANAGED if self.managed else Ownership.EXTERNAL

    @property
    def is_managed(self) -> bool:
        return self.owner is Ownership.MANAGED


class Host(_Strict):
    host_id: str = Field(min_length=1)
    state: HostState = HostState.ACCEPTING
    throttle_fraction: float = Field(default=1.0, ge=0.0, le=1.0)
    capacity_mb: MB = Field(ge=0)
    reserved_mb: MB = Field(default=0, ge=0)
    external_mb: MB = Field(default=0, ge=0)
    runtimes: list[str] = Field(default_factory=lambda: ["llama.cpp"])
    backends: list[str] = Field(default_factory=list)
    failure_domain: str | None = None  # None: the host is its own domain
    tags: list[str] = Field(default_factory=list)
    data_tiers: list[str] = Field(default_factory=lambda: ["public", "internal"])
    max_models: Count = Field(default=0, ge=0)  # 0: unlimited
    disk_free_mb: MB | None = Field(default=None, ge=0)  # None: unknown
    cached_models: list[str] = Field(default_factory=list)
    memory_bandwidth_gbps: float = Field(default=0.0, ge=0)
    compute_gflops: float = Field(default=0.0, ge=0)
    measured_tokens_per_s: dict[str, float] = Field(default_factory=dict)
    # Placement-score inputs (docs/placement-score.md): the operator's preference for the host
    # (0-10, higher preferred), its load (the heartbeat's active tasks and queue), the measured
    # request latency per model, and failed LOAD/WARM attempts in a row per model.
    priority: int = Field(default=0, ge=0, le=10)
    active_tasks: Count = Field(default=0, ge=0)
    queue_depth: Count = Field(default=0, ge=0)
    measured_latency_ms: dict[str, NonNegative] = Field(default_factory=dict)
    start_failures: dict[str, Attempts] = Field(default_factory=dict)
    last_heartbeat: float | None = Field(default=None, ge=0)
    ownership: Ownership = Ownership.MANAGED  # manual hosts receive no Grid placements
    actuator_capabilities: list[str] = Field(
        default_factory=lambda: ["load", "warm", "drain", "unload"]
    )
    # Models with a live child-engine route on this host (the node envelope's `routes`).
    # None: the snapshot carries no route inventory (a hand-written fleet), so READY rows stand
    # as reported; a list: a managed READY row without its route is inventory, not replacement
    # proof (invariant 4).
    routes: list[str] | None = None
    residencies: list[Residency] = Field(default_factory=list)
    # Artifacts this managed node downloaded because of a predictive prefetch (provenance).
    predictive_cache: list[PredictiveEntry] = Field(default_factory=list)
    # GPUs as the node counts them (docs/snapshot.md "GPUs"): the device count and each
    # device's memory. A bare number for `gpu_memory_mb` means that much on every device.
    gpu_count: Count = Field(default=0, ge=0)
    gpu_memory_mb: list[Annotated[MB, Field(ge=0)]] = Field(default_factory=list, max_length=4096)

    @model_validator(mode="before")
    @classmethod
    def _gpu_devices(cls, data: object) -> object:
        return gpu_devices(data)

    @property
    def domain(self) -> str:
        return self.failure_domain or f"host:{self.host_id}"

    @property
    def devices_mb(self) -> list[int]:
        """Each GPU's memory, one entry per device (0: a device of unreported memory)."""
        listed = list(self.gpu_memory_mb)
        return listed + [0] * max(0, self.gpu_count - len(listed))

    @property
    def hardware_tokens_per_s(self) -> float:
        """The hardware prior of a model's token throughput here, before any measurement."""
        return self.memory_bandwidth_gbps / 10 + self.compute_gflops / 1000


def gpu_devices(data: object) -> object:
    """Normalise a host's GPU fields: `gpu_memory_mb` as one number per device, `gpu_count`
    defaulting to the number of devices listed; a count and a list that disagree are refused."""
    if not isinstance(data, dict) or "gpu_memory_mb" not in data:
        return data
    memory, count = data["gpu_memory_mb"], data.get("gpu_count")
    out = dict(data)
    if isinstance(memory, int | float) and not isinstance(memory, bool):
        devices = count if isinstance(count, int) and not isinstance(count, bool) else 1
        out["gpu_memory_mb"] = [memory] * max(devices, 0)
        out.setdefault("gpu_count", max(devices, 0))
    elif isinstance(memory, list):
        if count is None:
            out["gpu_count"] = len(memory)
        elif count != len(memory):
            raise PydanticCustomError(
                "gpu_count_mismatch",
                "gpu_count {count} does not match the {n} devices in gpu_memory_mb",
                {"count": count, "n": len(memory)},
            )
    return out


class ModelProfile(_Strict):
    model_id: str = Field(min_length=1, max_length=MAX_MODEL_ID)
    memory_mb: MB = Field(ge=0)
    runtime_memory_mb: dict[str, MB] = Field(default_factory=dict)
    runtimes: list[str] = Field(default_factory=lambda: ["llama.cpp"])
    backends: list[str] = Field(default_factory=list)  # empty: any backend
    priority: Priority = Field(default=0, ge=0)
    min_replicas: Count = Field(default=0, ge=0)
    max_replicas: Count = Field(default=1, ge=0)
    pinned_hosts: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(default_factory=list)  # empty: any host
    denied_hosts: list[str] = Field(default_factory=list)
    required_tags: list[str] = Field(default_factory=list)
    forbidden_tags: list[str] = Field(default_factory=list)
    data_tier: str = "internal"
    max_colocated_models: Count = Field(default=0, ge=0)  # 0: unlimited; counts the model itself
    colocation_excludes: list[str] = Field(default_factory=list)
    min_failure_domains: Count = Field(default=1, ge=0)
    artifact_size_mb: MB = Field(default=0, ge=0)
    artifact_sha256: str | None = None
    artifact_source: str | None = None
    # A llama.cpp built-in chat template (`--chat-template NAME`, e.g. gemma, chatml) for GGUFs
    # that carry none; None: the template embedded in the GGUF.
    chat_template: str | None = Field(default=None, pattern=CHAT_TEMPLATE_PATTERN)
    workload_scores: dict[str, float] = Field(default_factory=dict)
    # What the model serves (docs/engines.md): `embedding` models answer /v1/embeddings only
    # (llama.cpp runs with --embeddings and `pooling`, None: the model's own pooling).
    kind: Modality = Modality.TEXT
    pooling: Literal["mean", "cls", "last", "rank", "none"] | None = None
    # The engine's settings for this model; a host may override them (docs/engines.md).
    engine: EngineSettings = Field(default_factory=EngineSettings)
    # Tensor-parallel GPUs one replica needs and consumes, each with at least this much memory
    # (min_gpu_memory_mb alone means one such device).
    min_gpu_count: Count = Field(default=0, ge=0)
    min_gpu_memory_mb: MB = Field(default=0, ge=0)
    target_utilization: float = Field(default=0.75, gt=0.0, le=1.0)
    replica_concurrency: float = Field(default=1.0, gt=0.0)
    expected_service_time_s: float = Field(default=2.0, ge=0)
    latency_slo_ms: float | None = Field(default=None, gt=0)
    load_estimate_s: float = Field(default=60.0, ge=0)
    warm_estimate_s: float = Field(default=20.0, ge=0)
    min_residency_s: float = Field(default=300.0, ge=0)
    scale_down_cooldown_s: float = Field(default=600.0, ge=0)

    @field_validator("artifact_sha256")
    @classmethod
    def _canonical_sha(cls, value: str | None) -> str | None:
        if value is None:
            return None
        lowered = value.lower()
        if len(lowered) != 64 or any(c not in "0123456789abcdef" for c in lowered):
            raise ValueError("artifact_sha256 must be 64 hexadecimal characters")
        return lowered

    @model_validator(mode="after")
    def _pooling_for_embeddings(self) -> ModelProfile:
        if self.pooling is not None and self.kind is not Modality.EMBEDDING:
            raise ValueError("pooling applies to profiles of kind embedding only")
        return self

    @property
    def gpu_demand(self) -> tuple[int, int]:
        """(devices, MB per device) one replica consumes; (0, 0) for a model without GPUs."""
        count = max(self.min_gpu_count, 1 if self.min_gpu_memory_mb > 0 else 0)
        return count, self.min_gpu_memory_mb if count else 0

    @field_validator("workload_scores")
    @classmethod
    def _scores_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for name, score in value.items():
            if not 0.0 < score <= 1.0:
                raise ValueError(f"workload score {name}={score} must be in (0, 1]")
        return value


class DemandEntry(_Strict):
    offered_concurrency: float = Field(default=0.0, ge=0)
    rpm: float = Field(default=0.0, ge=0)
    queue_depth: float = Field(default=0.0, ge=0)
    p95_ms: float = Field(default=0.0, ge=0)
    error_rate: float = Field(default=0.0, ge=0, le=1)
    trend: float = 0.0
    evidence: Evidence = Evidence.DIRECT
    desired_replicas: Count | None = Field(default=None, ge=0)  # overrides the forecast


class LearnedStartup(_Strict):
    """One host's learned startup phases for a model's current artifact (the controller fills
    it from acknowledged durations, already blended with the priors). None: the profile's
    configured estimate for that phase."""

    load_s: float | None = Field(default=None, ge=0)  # a real artifact fetch and load
    warm_s: float | None = Field(default=None, ge=0)


class Policy(_Strict):
    memory_headroom_fraction: float = Field(default=0.05, ge=0.0, lt=1.0)
    heartbeat_stale_s: float = Field(default=90.0, gt=0)
    heartbeat_future_skew_s: float = Field(default=30.0, ge=0)
    demand_headroom_fraction: float = Field(default=0.2, ge=0)
    max_evictions_per_plan: int = Field(default=64, ge=0)
    predictive_disk_reserve_mb: MB = Field(default=10240, ge=0)
    max_performance_boost: float = Field(default=8.0, ge=1.0)
    # A failed LOAD or WARM of a model on a host lowers that pair's placement score by this much
    # per attempt in a row, at most the cap, for `start_failure_window_s` (a healthy peer is
    # tried instead; the failed host stays the fallback when it is the only one).
    start_failure_penalty: int = Field(default=1000, ge=0)
    start_failure_penalty_cap: int = Field(default=2000, ge=0)
    start_failure_window_s: float = Field(default=1800.0, ge=0)
    error_rate_threshold: float = Field(default=0.05, ge=0, le=1)
    # Reconciler governors and retry timing (issue 3).
    max_concurrent_mutations: int = Field(default=8, ge=1)  # fleet-wide open actions
    max_host_mutations: int = Field(default=2, ge=1)  # open actions per host
    artifact_fanout: int = Field(default=2, ge=1)  # concurrent loads of one exact artifact
    retry_backoff_base_s: float = Field(default=15.0, gt=0)
    retry_backoff_cap_s: float = Field(default=600.0, gt=0)
    observation_timeout_s: float = Field(default=120.0, gt=0)  # success awaiting a heartbeat
    reconcile_interval_s: float = Field(default=5.0, gt=0)  # when a blocked action is retried
    # Workload words and the portfolio rules (issue 9; grid/fleet/workloads.py).
    workload_vocabulary: list[str] = Field(
        default_factory=lambda: list(DEFAULT_WORKLOAD_VOCABULARY)
    )
    portfolio: PortfolioPolicy = Field(default_factory=PortfolioPolicy)
    # The predictive artifact cache (issue 23; grid/fleet/prefetch.py).
    prefetch: PrefetchPolicy = Field(default_factory=PrefetchPolicy)


class FleetSnapshot(_Strict):
    schema_version: Literal[1] = 1
    now: float = Field(ge=0)
    policy: Policy = Field(default_factory=Policy)
    hosts: list[Host] = Field(default_factory=list)
    models: list[ModelProfile] = Field(default_factory=list)
    demand: dict[str, DemandEntry] = Field(default_factory=dict)
    # Action records for the reconciler (issue 3); the planner ignores them.
    history: list[dict[str, object]] = Field(default_factory=list)
    # Workload forecasts and outcome evidence (issue 9; grid/fleet/workloads.py).
    workloads: dict[str, WorkloadForecast] = Field(default_factory=dict)
    outcomes: list[Outcome] = Field(default_factory=list)
    # Learned workflow predictions for the predictive cache (issue 23; grid/fleet/prefetch.py).
    predictions: list[Prediction] = Field(default_factory=list)

    @model_validator(mode="after")
    def _workload_words(self) -> FleetSnapshot:
        # Raises SnapshotError with the field path.
        check_workload_words(
            self.policy.workload_vocabulary, self.models, self.workloads, self.outcomes
        )
        return self

    def host(self, host_id: str) -> Host | None:
        return next((h for h in self.hosts if h.host_id == host_id), None)

    def model(self, model_id: str) -> ModelProfile | None:
        return next((m for m in self.models if m.model_id == model_id), None)

    # Learned startup timings, model_id -> host_id -> phases (absent: the configured priors).
    learned_startup: dict[str, dict[str, LearnedStartup]] = Field(default_factory=dict)

    def startup_s(self, model: ModelProfile, host_id: str, *, cached: bool) -> float:
        """Seconds until a new replica of `model` on `host_id` is READY: the warm, plus the
        artifact load unless the weights are cached there (or a copy is already loading).

        One rule for every path that orders or scores cold starts: a host's own learned
        timings, never another host's; a host without any keeps the configured estimates.
        """
        learned = self.learned_startup.get(model.model_id, {}).get(host_id)
        warm = model.warm_estimate_s
        load = model.load_estimate_s
        if learned is not None:
            warm = learned.warm_s if learned.warm_s is not None else warm
            load = learned.load_s if learned.load_s is not None else load
        return warm + (0.0 if cached else load)


# ----------------------------------------------------------------------------- plan output


class Assignment(BaseModel):
    model_id: str
    host_id: str
    memory_mb: MB
    runtime: str
    existing: bool = False
    reasons: list[str] = Field(default_factory=list)


class Binding(BaseModel):
    constraint: str  # constraint family: memory, live_memory, slots, colocation, ...
    host_id: str | None = None
    detail: str = ""


class Unsatisfied(BaseModel):
    model_id: str
    code: str
    missing_replicas: int
    message: str
    binding: list[Binding] = Field(default_factory=list)
    would_fit_if: str = ""
    host_id: str | None = None


class Preemption(BaseModel):
    victim_model_id: str
    host_id: str
    beneficiary_model_id: str
    reason: str = ""
    # A repack: the victim keeps serving from this host, and drains only once it is READY there.
    relocated_to: str | None = None


class LevelValue(BaseModel):
    level: str
    value: float
    bound: float


class SolverReport(BaseModel):
    engine: str
    status: str
    wall_ms: float
    objective: list[LevelValue] = Field(default_factory=list)
    message: str = ""


class Plan(BaseModel):
    schema_version: Literal[1] = 1
    assignments: list[Assignment] = Field(default_factory=list)
    desired_replicas: dict[str, int] = Field(default_factory=dict)
    unsatisfied: list[Unsatisfied] = Field(default_factory=list)
    preemptions: list[Preemption] = Field(default_factory=list)
    solver: SolverReport
    portfolio: PortfolioReport | None = None  # absent when the snapshot has no workloads
    prefetch: PrefetchReport | None = None  # absent without predictions or predictive entries

    @model_serializer(mode="wrap")
    def _omit_empty_portfolio(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        out: dict[str, object] = handler(self)
        for optional in ("portfolio", "prefetch"):
            if optional in out and out[optional] is None:
                del out[optional]
        return out

    def placed(self, model_id: str) -> list[Assignment]:
        return [a for a in self.assignments if a.model_id == model_id]
