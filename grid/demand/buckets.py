"""Per-model bounded history: fixed time buckets of aggregate counts and timings.

A completed request counts as one arrival in the bucket of its completion time. Its engine
time (service) is spread over the buckets it actually covered, and its queue wait over the
buckets before that, so busy seconds / bucket length is the time-averaged number of requests
in service (offered concurrency: arrival rate x mean service time) and queue seconds / bucket
length the time-averaged number waiting (Little's law), even for a ten-minute video job.
A burst folds into its bucket; nothing is kept per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import histogram
from .observation import Observation


@dataclass(slots=True)
class Bucket:
    arrivals: int = 0
    errors: int = 0  # error and timeout outcomes
    service_s: float = 0.0  # sum of service times of the requests completed here
    busy_s: float = 0.0  # engine time spent inside this bucket (spread)
    queue_s: float = 0.0  # queue time spent inside this bucket (spread)
    queue_depth_sum: float = 0.0  # reported queue depths of the requests completed here
    input_units: float = 0.0
    output_units: float = 0.0
    latency: histogram.Histogram = field(default_factory=dict)

    def is_empty(self) -> bool:
        return self.arrivals == 0 and self.busy_s == 0.0 and self.queue_s == 0.0


@dataclass(frozen=True)
class BucketRates:
    """One bucket turned into rates over `span_s` seconds (the bucket, or its elapsed part)."""

    rpm: float
    concurrency: float
    queue: float


def bucket_index(timestamp: float, bucket_s: float) -> int:
    return math.floor(timestamp / bucket_s)


@dataclass
class Series:
    """One configured model's buckets, indexed by bucket number (timestamp // bucket_s)."""

    buckets: dict[int, Bucket] = field(default_factory=dict)

    def fold(self, obs: Observation, bucket_s: float, oldest: int, newest: int) -> None:
        """Add one observation; only buckets in [oldest, newest] are touched."""
        index = bucket_index(obs.timestamp, bucket_s)
        if oldest <= index <= newest:
            bucket = self._bucket(index)
            bucket.arrivals += 1
            bucket.errors += 1 if obs.failed else 0
            bucket.service_s += obs.service_time_s
            bucket.queue_depth_sum += obs.queue_depth
            bucket.input_units += obs.input_units
            bucket.output_units += obs.output_units
            histogram.add(bucket.latency, obs.latency_s * 1000.0)
        service_start = obs.timestamp - obs.service_time_s
        self._spread("busy_s", service_start, obs.timestamp, bucket_s, oldest, newest)
        queue_start = service_start - obs.queue_wait_s
        self._spread("queue_s", queue_start, service_start, bucket_s, oldest, newest)

    def _bucket(self, index: int) -> Bucket:
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = Bucket()
        return bucket

    def _spread(
        self, attr: str, start: float, end: float, bucket_s: float, oldest: int, newest: int
    ) -> None:
        if end <= start:
            return
        first = max(bucket_index(start, bucket_s), oldest)
        last = min(bucket_index(end, bucket_s), newest)
        for index in range(first, last + 1):
            overlap = min(end, (index + 1) * bucket_s) - max(start, index * bucket_s)
            if overlap > 0:
                bucket = self._bucket(index)
                setattr(bucket, attr, getattr(bucket, attr) + overlap)

    def prune(self, oldest: int, newest: int) -> None:
        """Drop buckets outside [oldest, newest]; the series keeps at most newest-oldest+1."""
        for index in [i for i in self.buckets if i < oldest or i > newest]:
            del self.buckets[index]

    def rates(self, index: int, span_s: float) -> BucketRates:
        bucket = self.buckets.get(index)
        if bucket is None or span_s <= 0:
            return BucketRates(0.0, 0.0, 0.0)
        little_queue = bucket.queue_s / span_s
        reported_queue = bucket.queue_depth_sum / bucket.arrivals if bucket.arrivals else 0.0
        return BucketRates(
            rpm=bucket.arrivals * 60.0 / span_s,
            concurrency=bucket.busy_s / span_s,
            queue=max(little_queue, reported_queue),
        )

    def arrivals(self, index: int) -> int:
        bucket = self.buckets.get(index)
        return bucket.arrivals if bucket is not None else 0
