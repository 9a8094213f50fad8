"""The demand tracker: bounded per-model history in, forecasts (DemandEntry) out. Pure.

Only configured, non-retiring model IDs create series; other observations are ignored and
counted, so the permissionless inference endpoint cannot grow this state with arbitrary names.
Every series holds at most `retention_buckets + 1` buckets and every bucket a bounded latency
histogram, whatever the traffic. `now` is always passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from grid.fleet import DemandEntry, Evidence, ModelProfile

from . import correlation
from .buckets import Series, bucket_index
from .config import DemandConfig
from .correlation import Inference, Relation
from .observation import Observation
from .state import TrackerData, dump_state, load_state
from .view import ModelView, Window, read_model

IGNORE_REASONS = ("unknown_model", "retiring_model", "stale", "future")
FUTURE_SKEW_BUCKETS = 1  # an observation may be stamped at most one bucket after `now`


@dataclass(frozen=True)
class ModelForecast:
    """A forecast with what produced it (for status and explanations)."""

    model_id: str
    entry: DemandEntry
    peak_rpm: float
    peak_concurrency: float
    latency_max_ms: float
    active_buckets: int
    inferred_from: Relation | None = None
    capped: bool = False  # inferred demand limited by the target's observed peak


@dataclass(frozen=True)
class Footprint:
    """What the tracker holds: the quantities its bounds are about."""

    series: int
    buckets: int
    max_buckets_per_series: int
    histogram_bins: int
    max_bins_per_bucket: int


class DemandTracker:
    def __init__(
        self,
        models: Iterable[str] = (),
        *,
        retiring: Iterable[str] = (),
        config: DemandConfig | None = None,
    ) -> None:
        self.config = config or DemandConfig()
        self._configured: frozenset[str] = frozenset()
        self._retiring: frozenset[str] = frozenset()
        self._series: dict[str, Series] = {}
        self._watermark: int | None = None  # newest bucket index accepted so far
        self._ignored: dict[str, int] = dict.fromkeys(IGNORE_REASONS, 0)
        self.configure(models, retiring=retiring)

    # ------------------------------------------------------------------------- configuration

    @property
    def configured(self) -> frozenset[str]:
        return self._configured

    @property
    def retiring(self) -> frozenset[str]:
        return self._retiring

    @property
    def ignored(self) -> dict[str, int]:
        return dict(self._ignored)

    @property
    def watermark(self) -> int | None:
        return self._watermark

    def configure(self, models: Iterable[str], *, retiring: Iterable[str] = ()) -> None:
        """Set the model IDs that may hold demand; removed or retiring ones lose their history."""
        self._configured = frozenset(models)
        self._retiring = frozenset(retiring)
        for model_id in list(self._series):
            if not self._tracks(model_id):
                del self._series[model_id]

    def _tracks(self, model_id: str) -> bool:
        return model_id in self._configured and model_id not in self._retiring

    # ------------------------------------------------------------------------- observation

    def observe(self, obs: Observation, now: float | None = None) -> bool:
        """Fold one observation into its bucket; False (and counted) when it is ignored.

        With `now`, an observation stamped more than one bucket in the future is refused, so a
        wrong client clock cannot push the window forward and erase history.
        """
        if obs.model_id in self._retiring:
            return self._ignore("retiring_model")
        if obs.model_id not in self._configured:
            return self._ignore("unknown_model")
        b = self.config.bucket_s
        index = bucket_index(obs.timestamp, b)
        newest = index if self._watermark is None else max(self._watermark, index)
        if now is not None:
            current = bucket_index(now, b)
            if index > current + FUTURE_SKEW_BUCKETS:
                return self._ignore("future")
            newest = max(newest, current)
        oldest = newest - self.config.retention_buckets
        if index < oldest:
            return self._ignore("stale")
        self._advance(newest)
        series = self._series.setdefault(obs.model_id, Series())
        series.fold(obs, b, oldest, newest)
        return True

    def prune(self, now: float) -> None:
        """Move the window up to `now`, dropping buckets that left it (the controller's tick)."""
        current = bucket_index(now, self.config.bucket_s)
        if self._watermark is None or current > self._watermark:
            self._advance(current)

    def _ignore(self, reason: str) -> bool:
        self._ignored[reason] += 1
        return False

    def _advance(self, newest: int) -> None:
        if self._watermark is not None and newest <= self._watermark:
            return
        self._watermark = newest
        oldest = newest - self.config.retention_buckets
        for model_id in list(self._series):
            series = self._series[model_id]
            series.prune(oldest, newest)
            if not series.buckets:
                del self._series[model_id]

    # ------------------------------------------------------------------------- forecasting

    def views(self, now: float) -> dict[str, ModelView]:
        window = Window.at(now, self.config)
        return {
            model_id: read_model(series, window, self.config)
            for model_id, series in sorted(self._series.items())
            if self._tracks(model_id)
        }

    def explain(self, now: float, profiles: Iterable[ModelProfile]) -> dict[str, ModelForecast]:
        """Forecasts for the given profiles (configured, non-retiring ones), with lineage.

        Direct evidence wins whenever the model has its own demand; a quiet model may receive
        inferred demand from current direct sources only (never from another inference).
        """
        wanted = [p for p in profiles if self._tracks(p.model_id)]
        window = Window.at(now, self.config)
        views = self.views(now)
        out: dict[str, ModelForecast] = {}
        direct = {m: v for m, v in views.items() if v.has_demand(self.config)}
        for profile in wanted:
            view = direct.get(profile.model_id)
            if view is not None:
                out[profile.model_id] = _direct(profile.model_id, view)

        sources = sorted(
            (
                correlation.Source(m, v.activity, v.rpm)
                for m, v in direct.items()
                if v.current and v.activity.mask
            ),
            key=lambda s: (-direct[s.model_id].concurrency, -s.rpm_now, s.model_id),
        )[: self.config.max_sources]
        for profile in wanted:
            model_id = profile.model_id
            view = views.get(model_id)
            if model_id in out or view is None or not view.activity.mask or not sources:
                continue
            # An active bit means arrivals in the window, so the observed mean service is real.
            target = correlation.Target(
                model_id, view.activity, view.peak_rpm, view.peak_concurrency, view.mean_service_s
            )
            found = correlation.infer(target, sources, window.n_complete, self.config)
            if found is not None and found.rpm >= self.config.min_rpm:
                out[model_id] = _inferred(model_id, view, found)
        return out

    def forecast(self, now: float, profiles: Iterable[ModelProfile]) -> dict[str, DemandEntry]:
        return {m: f.entry for m, f in self.explain(now, profiles).items()}

    def correlations(self, now: float) -> list[Relation]:
        """Every mature relation among the tracked models (for status), deterministic order."""
        views = self.views(now)
        n = Window.at(now, self.config).n_complete
        found: list[Relation] = []
        active = [(m, v) for m, v in views.items() if v.activity.mask]
        for source, src in active:
            for target, dst in active:
                if source != target:
                    found.extend(
                        correlation.relations(
                            source, target, src.activity, dst.activity, n, self.config
                        )
                    )
        return found

    def footprint(self) -> Footprint:
        buckets = [b for s in self._series.values() for b in s.buckets.values()]
        return Footprint(
            series=len(self._series),
            buckets=len(buckets),
            max_buckets_per_series=max((len(s.buckets) for s in self._series.values()), default=0),
            histogram_bins=sum(len(b.latency) for b in buckets),
            max_bins_per_bucket=max((len(b.latency) for b in buckets), default=0),
        )

    # ------------------------------------------------------------------------- persistence

    def to_state(self) -> dict[str, object]:
        data = TrackerData(
            configured=self._configured,
            retiring=self._retiring,
            watermark=self._watermark,
            ignored=self.ignored,
            series=self._series,
        )
        return dump_state(data, self.config.bucket_s)

    @classmethod
    def from_state(
        cls, state: Mapping[str, object], config: DemandConfig | None = None
    ) -> DemandTracker:
        """Restore from `to_state`; re-applies the configured set and the retention bounds."""
        data = load_state(state, config or DemandConfig())
        tracker = cls(data.configured, retiring=data.retiring, config=config)
        tracker._series = {m: s for m, s in data.series.items() if tracker._tracks(m) and s.buckets}
        if data.watermark is not None:
            tracker._advance(data.watermark)
        for reason in IGNORE_REASONS:
            tracker._ignored[reason] = int(data.ignored.get(reason, 0))
        return tracker


def _direct(model_id: str, view: ModelView) -> ModelForecast:
    entry = DemandEntry(
        offered_concurrency=view.concurrency,
        rpm=view.rpm,
        queue_depth=view.queue_depth,
        p95_ms=view.p95_ms,
        error_rate=view.error_rate,
        trend=view.trend_per_minute,
        evidence=Evidence.DIRECT,
    )
    return ModelForecast(
        model_id=model_id,
        entry=entry,
        peak_rpm=view.peak_rpm,
        peak_concurrency=view.peak_concurrency,
        latency_max_ms=view.latency_max_ms,
        active_buckets=view.activity.active_buckets,
    )


def _inferred(model_id: str, view: ModelView, found: Inference) -> ModelForecast:
    # Old target-local queue, latency and error evidence is not refreshed by an association.
    entry = DemandEntry(
        offered_concurrency=found.concurrency,
        rpm=found.rpm,
        evidence=Evidence.INFERRED,
    )
    return ModelForecast(
        model_id=model_id,
        entry=entry,
        peak_rpm=view.peak_rpm,
        peak_concurrency=view.peak_concurrency,
        latency_max_ms=0.0,
        active_buckets=view.activity.active_buckets,
        inferred_from=found.relation,
        capped=found.capped,
    )
