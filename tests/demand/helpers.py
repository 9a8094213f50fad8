"""Builders shared by the demand tests (plain data, no fakes needed: the tracker is pure)."""

from __future__ import annotations

from grid.demand import DemandConfig, DemandTracker, Observation
from grid.fleet.models import ModelProfile

BUCKET_S = 60.0


def profile(model_id: str, **overrides: object) -> ModelProfile:
    return ModelProfile.model_validate({"model_id": model_id, "memory_mb": 1024, **overrides})


def profiles(*model_ids: str) -> list[ModelProfile]:
    return [profile(m) for m in model_ids]


def obs(model_id: str, timestamp: float, **fields: object) -> Observation:
    return Observation.model_validate({"model_id": model_id, "timestamp": timestamp, **fields})


def fill_bucket(
    tracker: DemandTracker,
    model_id: str,
    bucket: int,
    count: int,
    *,
    service_time_s: float = 1.0,
    **fields: object,
) -> None:
    """`count` requests completing in the middle of `bucket`, each served inside that bucket."""
    completion = bucket * BUCKET_S + 45.0
    for _ in range(count):
        tracker.observe(obs(model_id, completion, service_time_s=service_time_s, **fields))


def concurrency_series(tracker: DemandTracker, model_id: str, values: list[float]) -> None:
    """Bucket i gets offered concurrency values[i]: 2 x value requests of 30 s each."""
    for bucket, value in enumerate(values):
        fill_bucket(tracker, model_id, bucket, round(2 * value), service_time_s=30.0)


def correlation_config(**overrides: object) -> DemandConfig:
    # level_alpha=1: the level is the last complete bucket, so a model is quiet one bucket
    # after its last request and the scenarios stay short and hand-checkable.
    base: dict[str, object] = {"level_alpha": 1.0, "retention_buckets": 20}
    base.update(overrides)
    return DemandConfig(**base)  # type: ignore[arg-type]
