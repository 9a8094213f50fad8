"""Persistence of the demand tracker: a versioned, JSON-ready dict, validated on load.

Loading re-applies the configured model set and the retention bounds, so a state file written
with a longer retention, or naming models that were removed since, cannot grow the tracker.
A state with a different bucket length is refused: its buckets cannot be re-cut exactly.

It works on the tracker's data, not on the tracker: `tracker.py` imports this module, never the
other way round (`TrackerData` is what crosses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet import GridError

from .buckets import Bucket, Series
from .config import DemandConfig
from .histogram import LATENCY_BINS

# Saved demand-side state (this history, outcome evidence, workloads, workflows) is restored
# only by the controller, which drops a part that does not load, starts it empty and records a
# warning: the next command shows that warning.
RESTORE_NEXT_COMMAND = "grid allocator status"

STATE_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class BucketState(_Strict):
    index: int
    arrivals: int = Field(ge=0)
    errors: int = Field(ge=0)
    service_s: float = Field(ge=0)
    busy_s: float = Field(ge=0)
    queue_s: float = Field(ge=0)
    queue_depth_sum: float = Field(ge=0)
    input_units: float = Field(ge=0)
    output_units: float = Field(ge=0)
    latency: list[tuple[int, int]] = Field(max_length=LATENCY_BINS)


class TrackerState(_Strict):
    version: Literal[1]
    bucket_s: float = Field(gt=0)
    watermark: int | None
    configured: list[str]
    retiring: list[str]
    ignored: dict[str, int]
    series: dict[str, list[BucketState]]


@dataclass(frozen=True)
class TrackerData:
    """The tracker's persistent facts (the tracker re-applies its bounds when it restores)."""

    configured: frozenset[str]
    retiring: frozenset[str]
    watermark: int | None
    ignored: Mapping[str, int]
    series: Mapping[str, Series]


def dump_state(data: TrackerData, bucket_s: float) -> dict[str, object]:
    series: dict[str, object] = {}
    for model_id, s in sorted(data.series.items()):
        series[model_id] = [
            {
                "index": index,
                "arrivals": b.arrivals,
                "errors": b.errors,
                "service_s": b.service_s,
                "busy_s": b.busy_s,
                "queue_s": b.queue_s,
                "queue_depth_sum": b.queue_depth_sum,
                "input_units": b.input_units,
                "output_units": b.output_units,
                "latency": [[k, v] for k, v in sorted(b.latency.items())],
            }
            for index, b in sorted(s.buckets.items())
        ]
    return {
        "version": STATE_VERSION,
        "bucket_s": bucket_s,
        "watermark": data.watermark,
        "configured": sorted(data.configured),
        "retiring": sorted(data.retiring),
        "ignored": dict(data.ignored),
        "series": series,
    }


def _invalid(message: str) -> GridError:
    return GridError(
        "invalid_demand_state",
        message,
        fix="nothing to undo: the controller drops the demand state and rebuilds the history "
        "from new observations; `grid allocator status` shows the warning",
        next_command=RESTORE_NEXT_COMMAND,
    )


def _bucket(state: BucketState) -> Bucket:
    latency: dict[int, int] = {}
    for index, count in state.latency:
        if not 0 <= index < LATENCY_BINS or count < 1:
            raise _invalid(f"latency bin {index} with count {count} is out of range")
        latency[index] = latency.get(index, 0) + count
    return Bucket(
        arrivals=state.arrivals,
        errors=min(state.errors, state.arrivals),
        service_s=state.service_s,
        busy_s=state.busy_s,
        queue_s=state.queue_s,
        queue_depth_sum=state.queue_depth_sum,
        input_units=state.input_units,
        output_units=state.output_units,
        latency=latency,
    )


def load_state(state: Mapping[str, object], config: DemandConfig) -> TrackerData:
    try:
        parsed = TrackerState.model_validate(dict(state))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first.get("loc", ()))
        raise _invalid(f"demand state field {path or '(root)'}: {first.get('msg')}") from None
    if parsed.bucket_s != config.bucket_s:
        raise GridError(
            "demand_state_incompatible",
            f"demand state uses {parsed.bucket_s} s buckets, the tracker {config.bucket_s} s",
            fix="keep the bucket length to keep the history; otherwise the controller drops it "
            "(`grid allocator status` shows the warning)",
            next_command=RESTORE_NEXT_COMMAND,
        )
    return TrackerData(
        configured=frozenset(parsed.configured),
        retiring=frozenset(parsed.retiring),
        watermark=parsed.watermark,
        ignored=parsed.ignored,
        series={
            model_id: Series(buckets={b.index: _bucket(b) for b in buckets})
            for model_id, buckets in parsed.series.items()
        },
    )
