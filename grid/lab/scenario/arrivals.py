"""The run's request trace: every arrival of the run, generated once from the seed (pure).

Every strategy replays exactly this list (`digest` proves it). Each request carries its body's
workload word as the REAL classifier decided it (grid/demand/classify.py, `classify_request`
on the generated body and endpoint family: a pure function of the body, so it is computed
once per request and reused by every strategy) and its base device time (seconds of service on
a perf-1.0 machine).

Named traffic: operations tooling sends `general` text naming the baseline model (direct
demand); everything else asks for `auto`.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from grid.demand import EndpointFamily, RequestShape, classify_request
from grid.lab.scenario.personas import User, body, intended

BASE_SERVICE_S: Mapping[str, float] = {
    "coding": 8.0,
    "research": 10.0,
    "marketing": 6.0,
    "sales": 5.0,
    "design": 6.0,
    "general": 4.0,
    "embedding": 0.5,
    "image": 12.0,
    "video": 60.0,
}
OPS_PROMPTS = (
    "Summarize last night's on-call incidents in three bullet points.",
    "Reply with the status of the nightly backup job in one line.",
)


@dataclass(frozen=True)
class Request:
    minute: int
    offset_s: float  # seconds into the minute
    user_id: str  # the session (affinity key) of the request
    family: EndpointFamily
    requested: str  # "auto" or the named model
    shape: RequestShape  # the classifier's two words
    service_s: float  # base device seconds
    body_bytes: int

    @property
    def workload(self) -> str:
        return self.shape.workload

    @property
    def units(self) -> float:
        """Demand in concurrency-minutes (base device seconds / 60)."""
        return self.service_s / 60.0


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def generate(
    users: list[User],
    minutes: int,
    seed: int,
    curves: Mapping[str, list[float]],
    baseline: str,
) -> list[list[Request]]:
    """Arrivals per minute (sorted by offset, then user)."""
    rng = random.Random(f"arrivals:{seed}")
    shapes: dict[tuple[str, str], RequestShape] = {}
    out: list[list[Request]] = []
    ops_rate = 1.0 + len(users) / 100.0
    for t in range(minutes):
        minute: list[Request] = []
        for user in users:
            word = intended(user, t, rng)
            for _ in range(_poisson(rng, user.persona.rate_per_min * curves[word][t])):
                family, doc = body(word, rng)
                minute.append(_request(t, rng, user.user_id, family, doc, word, shapes))
        for _ in range(_poisson(rng, ops_rate * curves["general"][t])):
            text = rng.choice(OPS_PROMPTS)
            doc = {"model": baseline, "messages": [{"role": "user", "content": text}]}
            minute.append(_request(t, rng, "ops", "chat", doc, "general", shapes))
        minute.sort(key=lambda r: (r.offset_s, r.user_id))
        out.append(minute)
    return out


def _request(
    t: int,
    rng: random.Random,
    user_id: str,
    family: str,
    doc: Mapping[str, object],
    word: str,
    shapes: dict[tuple[str, str], RequestShape],
) -> Request:
    fam = EndpointFamily(family)
    text = repr(doc)
    key = (family, text)
    shape = shapes.get(key)
    if shape is None:
        shape = shapes[key] = classify_request(doc, fam)
    base = BASE_SERVICE_S.get(shape.workload, BASE_SERVICE_S[word])
    return Request(
        minute=t,
        offset_s=round(rng.random() * 60.0, 3),
        user_id=user_id,
        family=fam,
        requested=str(doc.get("model", "auto")),
        shape=shape,
        service_s=round(base * (0.5 + rng.random()), 3),
        body_bytes=len(text),
    )


class TraceHash:
    """A running SHA-256 over arrivals in the order they are fed."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, r: Request) -> None:
        self._h.update(
            f"{r.minute}|{r.offset_s}|{r.user_id}|{r.family}|{r.requested}|{r.workload}|"
            f"{r.service_s}\n".encode()
        )

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def digest(minutes: list[list[Request]]) -> str:
    """A SHA-256 over every generated arrival."""
    h = TraceHash()
    for reqs in minutes:
        for r in reqs:
            h.add(r)
    return h.hexdigest()


__all__ = ["BASE_SERVICE_S", "Request", "TraceHash", "digest", "generate"]
