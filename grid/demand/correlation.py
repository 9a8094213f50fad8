"""Model-level correlations learned from bucket activity, and the inferred demand they imply.

Activity is a bitmask over the complete buckets of the window (bit i: the model had at least
one arrival in bucket window_first + i). Two relations are learned:

- co-activity (a group edge, symmetric): both models active in the same buckets; the
  association is |both| / |either| (Jaccard);
- next-bucket (a directional pair A -> B): A active in bucket t, B active in t + 1; the
  transition share is |A at t and B at t+1| / |A at t|, counting only buckets t whose next
  bucket is complete, so an unfinished bucket is never a failed transition.

Either relation needs at least `min_support_buckets` supporting buckets and a share of at least
`association_threshold`. Its rate ratio is the target's historical request rate over the
source's in the supporting buckets. For a quiet target, each current source with a mature
relation suggests `share x ratio x source rate`; the target takes the maximum over at most
`max_sources` sources (never the sum), capped at `inferred_peak_factor` x the target's own
observed peak. Sources are models with direct demand only, so inference never propagates
transitively.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .config import DemandConfig


class RelationKind(StrEnum):
    CO_ACTIVE = "co_active"
    NEXT_BUCKET = "next_bucket"


@dataclass(frozen=True)
class Activity:
    """One model's activity over the `n_buckets` complete buckets of the window."""

    mask: int
    rpm: Sequence[float]  # per complete bucket, oldest first

    @property
    def active_buckets(self) -> int:
        return self.mask.bit_count()


@dataclass(frozen=True)
class Relation:
    source: str
    target: str
    kind: RelationKind
    support: int  # supporting buckets
    share: float  # association (co-active) or transition share (next bucket)
    rate_ratio: float  # target rate / source rate in the supporting buckets


@dataclass(frozen=True)
class Inference:
    rpm: float
    concurrency: float
    relation: Relation
    capped: bool


def _bits(mask: int) -> Iterable[int]:
    index = 0
    while mask:
        if mask & 1:
            yield index
        mask >>= 1
        index += 1


def _ratio(target_rates: Iterable[float], source_rates: Iterable[float]) -> float:
    source_total = sum(source_rates)
    return sum(target_rates) / source_total if source_total > 0 else 0.0


def co_activity(
    source: str, target: str, src: Activity, dst: Activity, config: DemandConfig
) -> Relation | None:
    both = src.mask & dst.mask
    support = both.bit_count()
    either = (src.mask | dst.mask).bit_count()
    if support < config.min_support_buckets or either == 0:
        return None
    share = support / either
    if share < config.association_threshold:
        return None
    hits = list(_bits(both))
    ratio = _ratio((dst.rpm[i] for i in hits), (src.rpm[i] for i in hits))
    return Relation(source, target, RelationKind.CO_ACTIVE, support, share, ratio)


def next_bucket(
    source: str, target: str, src: Activity, dst: Activity, n_buckets: int, config: DemandConfig
) -> Relation | None:
    if n_buckets < 2:
        return None
    has_complete_next = (1 << (n_buckets - 1)) - 1
    departures = src.mask & has_complete_next
    transitions = departures & (dst.mask >> 1)
    support = transitions.bit_count()
    tries = departures.bit_count()
    if support < config.min_support_buckets or tries == 0:
        return None
    share = support / tries
    if share < config.association_threshold:
        return None
    hits = list(_bits(transitions))
    ratio = _ratio((dst.rpm[i + 1] for i in hits), (src.rpm[i] for i in hits))
    return Relation(source, target, RelationKind.NEXT_BUCKET, support, share, ratio)


def relations(
    source: str,
    target: str,
    src: Activity,
    dst: Activity,
    n_buckets: int,
    config: DemandConfig,
) -> list[Relation]:
    found = [
        co_activity(source, target, src, dst, config),
        next_bucket(source, target, src, dst, n_buckets, config),
    ]
    return [r for r in found if r is not None]


@dataclass(frozen=True)
class Source:
    model_id: str
    activity: Activity
    rpm_now: float  # the source's current direct forecast


@dataclass(frozen=True)
class Target:
    model_id: str
    activity: Activity
    peak_rpm: float
    peak_concurrency: float
    mean_service_s: float


def infer(
    target: Target, sources: Sequence[Source], n_buckets: int, config: DemandConfig
) -> Inference | None:
    """The strongest suggestion for a quiet target over the given sources (max, not sum)."""
    best: Inference | None = None
    for source in sources[: config.max_sources]:
        if source.model_id == target.model_id:
            continue
        for relation in relations(
            source.model_id, target.model_id, source.activity, target.activity, n_buckets, config
        ):
            raw_rpm = relation.share * relation.rate_ratio * source.rpm_now
            rpm = min(raw_rpm, config.inferred_peak_factor * target.peak_rpm)
            raw_concurrency = rpm / 60.0 * target.mean_service_s
            concurrency = min(
                raw_concurrency, config.inferred_peak_factor * target.peak_concurrency
            )
            capped = rpm < raw_rpm or concurrency < raw_concurrency
            if best is None or (rpm, concurrency) > (best.rpm, best.concurrency):
                best = Inference(rpm, concurrency, relation, capped)
    return best


def groups(edges: Iterable[Relation]) -> list[list[str]]:
    """Co-activity groups for reporting (connected components of co-active edges).

    Reporting only: inference uses each direct edge on its own, never a path through a group.
    """
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for edge in edges:
        if edge.kind is RelationKind.CO_ACTIVE:
            a, b = find(edge.source), find(edge.target)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for node in parent:
        members.setdefault(find(node), []).append(node)
    return sorted(sorted(group) for group in members.values() if len(group) > 1)
