"""Workload forecasts: unbound and `auto` traffic per workload word, kept apart from model demand.

Pure, and the same arithmetic as named-model demand: the forecast is a `DemandTracker` whose
series are the vocabulary's words instead of model IDs, so the bounded buckets, the EWMA level,
the confidence-weighted positive trend, the stale/future guards and the persisted state are
the model tracker's own (grid/demand/buckets.py, smoothing.py, view.py). Nothing is copied.

Per word the snapshot gets `WorkloadForecast` (grid/fleet/workloads.py):
- `offered_concurrency` = arrival rate x measured service time + queued work. The first term is
  measured as the model tracker measures it: each request's service time is spread over the
  buckets it covered, so busy seconds / bucket length is the time-averaged number in service,
  which Little's law equates to arrivals per second x mean service time; the EWMA of that per
  bucket is the level. The second term is the smoothed queue (`queue_depth`, concurrency units).
- `observations` = requests completed in the demand window (the retained complete buckets and
  the current one), `rpm` the smoothed arrival rate, `failure_rate` the error share of the
  recent buckets, `modality` the modality of the word's newest request.

Which requests feed it is the caller's rule (`feeds_workload`): a request that names a
configured model is direct demand for that model only; every other request (`auto`, an unbound
or unknown name) is workload demand only. The model that happened to serve an automatic request
gets outcome evidence (grid/demand/evidence.py), never direct demand.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from grid.fleet import GridError, WorkloadForecast
from grid.fleet import Modality as FleetModality

from .config import DemandConfig
from .observation import Modality, Observation
from .state import RESTORE_NEXT_COMMAND
from .tracker import DemandTracker, Footprint

STATE_VERSION = 1
WORD_MODALITY: Mapping[str, Modality] = {
    "image": Modality.IMAGE,
    "video": Modality.VIDEO,
    "embedding": Modality.EMBEDDING,
}


def feeds_workload(obs: Observation, configured_models: Collection[str]) -> bool:
    """True when the request is workload demand (it named no configured model)."""
    return obs.model_id not in configured_models


@dataclass(frozen=True)
class WorkloadReading:
    """One word's forecast with the trend behind it (for status and explanations)."""

    workload: str
    forecast: WorkloadForecast
    trend_per_minute: float  # positive, confidence-weighted concurrency change per minute
    peak_concurrency: float
    mean_service_s: float


class WorkloadTracker:
    """Bounded per-word history: at most len(vocabulary) series of retention + 1 buckets."""

    def __init__(self, config: DemandConfig | None = None) -> None:
        self.config = config or DemandConfig()
        self._tracker = DemandTracker(self.config.workloads, config=self.config)
        self._modality: dict[str, Modality] = {}
        self._unknown = 0

    @property
    def vocabulary(self) -> tuple[str, ...]:
        return self.config.workloads

    @property
    def ignored(self) -> dict[str, int]:
        counts = self._tracker.ignored
        counts.pop("unknown_model", None)
        counts.pop("retiring_model", None)
        return {"unknown_workload": self._unknown, **counts}

    def observe(self, obs: Observation, now: float | None = None) -> bool:
        """Fold one request into its word's series; False (and counted) when it is ignored."""
        if obs.workload not in self.vocabulary:
            self._unknown += 1
            return False
        as_series = obs.model_copy(update={"model_id": obs.workload})
        if not self._tracker.observe(as_series, now):
            return False
        self._modality[obs.workload] = obs.modality
        return True

    def prune(self, now: float) -> None:
        self._tracker.prune(now)

    def readings(self, now: float) -> dict[str, WorkloadReading]:
        """Every word with demand or requests in the window, in word order."""
        out: dict[str, WorkloadReading] = {}
        for word, view in self._tracker.views(now).items():
            if not (view.has_demand(self.config) or view.arrivals):
                continue
            modality = self._modality.get(word, WORD_MODALITY.get(word, Modality.TEXT))
            forecast = WorkloadForecast(
                offered_concurrency=view.concurrency + view.queue_depth,
                observations=view.arrivals,
                rpm=view.rpm,
                queue_depth=view.queue_depth,
                failure_rate=view.error_rate,
                modality=FleetModality(modality.value),
            )
            out[word] = WorkloadReading(
                workload=word,
                forecast=forecast,
                trend_per_minute=view.trend_per_minute,
                peak_concurrency=view.peak_concurrency,
                mean_service_s=view.mean_service_s,
            )
        return out

    def forecast(self, now: float) -> dict[str, WorkloadForecast]:
        """The snapshot's `workloads` mapping at `now`."""
        return {word: r.forecast for word, r in self.readings(now).items()}

    def footprint(self) -> Footprint:
        return self._tracker.footprint()

    # ------------------------------------------------------------------------- persistence

    def to_state(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "tracker": self._tracker.to_state(),
            "modality": {w: m.value for w, m in sorted(self._modality.items())},
            "unknown": self._unknown,
        }

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], config: DemandConfig | None = None
    ) -> WorkloadTracker:
        """Restore; the configured vocabulary and bounds win over what the state names."""
        out = cls(config)
        if state.get("version") != STATE_VERSION or not isinstance(state.get("tracker"), dict):
            raise GridError(
                "invalid_workload_state",
                "the workload demand state has an unknown version or shape",
                fix="nothing to undo: the controller drops the workload state and rebuilds the "
                "history from new requests; `grid allocator status` shows the warning",
                next_command=RESTORE_NEXT_COMMAND,
            )
        restored = DemandTracker.from_state(state["tracker"], out.config)
        restored.configure(out.vocabulary)
        out._tracker = restored
        modality = state.get("modality")
        if isinstance(modality, dict):
            values = {m.value for m in Modality}
            out._modality = {
                w: Modality(m) for w, m in modality.items() if w in out.vocabulary and m in values
            }
        unknown = state.get("unknown")
        out._unknown = unknown if isinstance(unknown, int) and unknown >= 0 else 0
        return out
