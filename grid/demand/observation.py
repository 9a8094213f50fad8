"""One request's bounded lifecycle features, as the Grid boundary reports them.

Only aggregate-safe features exist here: no prompt, response, tool argument, API key or user
identity field can be set (unknown fields are refused), and free-form text is limited to the
model names and a workload word from a small configured vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet import GridError

from .config import DEFAULT_WORKLOADS

MAX_SECONDS = 86_400.0  # a day: longer service or queue times are reporting errors
MAX_UNITS = 1e12


class Modality(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    VIDEO = "video"
    EMBEDDING = "embedding"


class EndpointFamily(StrEnum):
    CHAT = "chat"
    COMPLETIONS = "completions"
    RESPONSES = "responses"
    EMBEDDINGS = "embeddings"
    IMAGES = "images"
    VIDEO = "video"
    OTHER = "other"


class Outcome(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    # Refused by the router before any engine saw it (503, no ready route): an arrival, so
    # demand, but no engine error; it raises no error rate and is no model's outcome.
    NO_ROUTE = "no_route"


ENGINE_FAILURES = frozenset({Outcome.ERROR, Outcome.TIMEOUT})


class Observation(BaseModel):
    """A completed or failed request, attributed to the model the caller named.

    `model_id` is the requested model; for automatic traffic it is not a configured model ID
    and creates no model demand. `served_model_id` is outcome evidence only: the router's
    fallback choice never becomes direct demand for the model that happened to serve.
    `timestamp` is the completion time; the request occupied the engine for `service_time_s`
    before it, after waiting `queue_wait_s` in a queue.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False, protected_namespaces=()
    )

    model_id: str = Field(min_length=1, max_length=256)
    served_model_id: str | None = Field(default=None, min_length=1, max_length=256)
    endpoint_family: EndpointFamily = EndpointFamily.CHAT
    modality: Modality = Modality.TEXT
    input_units: float = Field(default=0.0, ge=0, le=MAX_UNITS)
    output_units: float = Field(default=0.0, ge=0, le=MAX_UNITS)
    workload: str = Field(default="general", pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    service_time_s: float = Field(default=0.0, ge=0, le=MAX_SECONDS)
    queue_wait_s: float = Field(default=0.0, ge=0, le=MAX_SECONDS)
    queue_depth: int = Field(default=0, ge=0, le=1_000_000)  # requests waiting behind it
    outcome: Outcome = Outcome.OK
    timestamp: float = Field(ge=0, le=1e11)

    @property
    def failed(self) -> bool:
        """An engine error or timeout (a request no engine saw is not a failure of one)."""
        return self.outcome in ENGINE_FAILURES

    @property
    def latency_s(self) -> float:
        """What the caller waited: queue plus service."""
        return self.queue_wait_s + self.service_time_s


def parse_observation(
    data: Mapping[str, object], workloads: Iterable[str] = DEFAULT_WORKLOADS
) -> Observation:
    """Validate a raw observation (for example a JSON body) into an `Observation`.

    Raises GridError `invalid_observation` (with the field path) or `unknown_workload`.
    """
    try:
        obs = Observation.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first.get("loc", ()))
        raise GridError(
            "invalid_observation",
            f"observation field {path or '(body)'} is invalid: {first.get('msg', 'bad value')}",
            fix="send only the documented observation fields, with finite non-negative numbers",
            path=path,
        ) from None
    vocabulary = tuple(workloads)
    if obs.workload not in vocabulary:
        raise GridError(
            "unknown_workload",
            f"workload {obs.workload!r} is not in the configured vocabulary",
            fix=f"use one of: {', '.join(vocabulary)}",
            path="workload",
        )
    return obs
