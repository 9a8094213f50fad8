"""The body of PUT /allocator/models/{id}: a partial model profile.

Only the fields given travel (`given()`); the controller fills the rest with the profile's
defaults and validates the whole as a snapshot's `models[0]` (ranges, ceilings and cross-field
rules stay in `ModelProfile`, written once). This model checks names and types only, and refuses
what it cannot read with the profile's own error: an unknown field names the closest known one
(`unknown_field`), a wrong type is `invalid_value` at its field path.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    JsonValue,
    ModelWrapValidatorHandler,
    ValidationError,
    model_validator,
)

from grid.fleet.engine_settings import EngineSettings
from grid.fleet.errors import GridError
from grid.fleet.schema import unknown_field_fix
from grid.fleet.snapshot import snapshot_error_from
from grid.fleet.workloads import Modality

# Where a profile's fields live in a snapshot: the closest-field search looks there.
_PROFILE_LOC: tuple[int | str, ...] = ("models", 0)


def profile_refusal(exc: ValidationError) -> GridError:
    """A profile body's first validation error, worded as the controller words it."""
    err = snapshot_error_from(exc)
    fix = err.fix
    if err.code == "unknown_field":
        first = next(e for e in exc.errors() if e.get("type") == "extra_forbidden")
        fix = unknown_field_fix((*_PROFILE_LOC, *first.get("loc", ())), err.path)
    return GridError(err.code, err.message, fix=fix, path=err.path)


class ProfileUpdate(BaseModel):
    """The fields of a `ModelProfile` (docs/snapshot.md), each optional. `model_id`, when
    given, must match the path."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model_id: str | None = None
    memory_mb: int | None = None
    runtime_memory_mb: dict[str, int] | None = None
    runtimes: list[str] | None = None
    backends: list[str] | None = None
    priority: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    pinned_hosts: list[str] | None = None
    allowed_hosts: list[str] | None = None
    denied_hosts: list[str] | None = None
    required_tags: list[str] | None = None
    forbidden_tags: list[str] | None = None
    data_tier: str | None = None
    max_colocated_models: int | None = None
    colocation_excludes: list[str] | None = None
    min_failure_domains: int | None = None
    artifact_size_mb: int | None = None
    artifact_sha256: str | None = None
    artifact_source: str | None = None
    chat_template: str | None = None
    workload_scores: dict[str, float] | None = None
    kind: Modality | None = None
    pooling: Literal["mean", "cls", "last", "rank", "none"] | None = None
    engine: EngineSettings | None = None
    min_gpu_count: int | None = None
    min_gpu_memory_mb: int | None = None
    target_utilization: float | None = None
    replica_concurrency: float | None = None
    expected_service_time_s: float | None = None
    latency_slo_ms: float | None = None
    load_estimate_s: float | None = None
    warm_estimate_s: float | None = None
    min_residency_s: float | None = None
    scale_down_cooldown_s: float | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_as_a_profile(
        cls, data: Any, handler: ModelWrapValidatorHandler[ProfileUpdate]
    ) -> ProfileUpdate:
        if not isinstance(data, dict | ProfileUpdate):
            raise GridError(
                "invalid_profile",
                "a model profile must be a JSON object",
                fix="send the profile fields as a JSON object",
            )
        try:
            return handler(data)
        except ValidationError as exc:
            raise profile_refusal(exc) from None

    def given(self) -> dict[str, JsonValue]:
        """The fields that were given, as JSON (what goes on the wire)."""
        return self.model_dump(mode="json", exclude_unset=True)
