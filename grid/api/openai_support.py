"""Helpers of the OpenAI proxy: the request facts it may read, its error shape, observations.

Of a request body the proxy reads `model`, `stream` and the max-tokens hint, and the request
classifier (grid/demand/classify.py) reads a bounded prefix of the prompt in memory to name
one workload word; only that word and the modality are kept (`RequestShape`). A request whose
`model` is `auto` or absent is automatic: the proxy routes it by workload and forwards the body
with `model` set to the model chosen; any other body is forwarded unchanged. Nothing of the
body (nor of the answer) is kept. The observation folded into the controller holds bounded
numbers: the requested and served model, the endpoint family, workload word and modality,
approximate input/output units, service time, queue depth and outcome.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field, replace

from fastapi.responses import JSONResponse

from grid.api.openai_errors import openai_body
from grid.demand import (
    ClassifierConfig,
    EndpointFamily,
    Modality,
    Observation,
    Outcome,
    RequestOutcome,
    RequestShape,
    classify_request,
    observation_from,
)
from grid.fleet import GridError
from grid.router import Usage
from grid.runtime.controller import ControllerService

log = logging.getLogger("grid.proxy")

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_TOKENS_HINT = 1_000_000
BYTES_PER_UNIT = 4.0  # approximate text units (tokens) when the engine reports no usage
AUTO_MODEL = "auto"  # `model: "auto"` (or no model): Grid picks the model by workload


@dataclass(frozen=True)
class Served:
    """The engine that answered: its model, artifact revision and (host, engine) IDs."""

    model_id: str
    artifact_sha256: str | None
    host_id: str
    engine_id: str
    queued: int = 0


@dataclass(frozen=True)
class RequestFacts:
    model_id: str  # as requested; AUTO_MODEL for automatic requests
    family: EndpointFamily
    stream: bool
    max_tokens: int | None
    body_bytes: int
    shape: RequestShape = field(default=RequestShape("general", Modality.TEXT))
    auto: bool = False
    affinity_digest: str | None = None
    served: Served | None = None
    outcome: Outcome = Outcome.OK
    service_time_s: float = 0.0
    input_units: float = 0.0
    output_units: float = 0.0

    def served_by(self, served: Served) -> RequestFacts:
        return replace(self, served=served)

    def finished(self, outcome: Outcome, elapsed_s: float, usage: Usage | None) -> RequestFacts:
        prompt = usage.prompt_tokens if usage is not None else None
        completion = usage.completion_tokens if usage is not None else None
        return replace(
            self,
            outcome=outcome,
            service_time_s=max(0.0, elapsed_s),
            input_units=float(prompt) if prompt is not None else self.body_bytes / BYTES_PER_UNIT,
            output_units=float(completion or 0),
        )


def _invalid(message: str) -> GridError:
    return GridError(
        "invalid_request",
        message,
        fix='send a JSON object such as {"model": "...", "messages": [...]}',
        details={"http_status": 400},
    )


def _hint(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return int(min(value, MAX_TOKENS_HINT))


def _document(body: bytes) -> dict[str, object]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _invalid("the request body is not valid JSON") from None
    if not isinstance(document, dict):
        raise _invalid("the request body must be a JSON object")
    return document


def read_facts(
    body: bytes, family: EndpointFamily, classifier: ClassifierConfig | None = None
) -> RequestFacts:
    """The few fields routing needs and the request's workload word; GridError
    `invalid_request` for an unusable body (nothing is recorded for it).

    The body's size was already bounded while it was read (MAX_BODY_BYTES). The classifier
    never raises: an odd prompt is `general` work.
    """
    document = _document(body)
    model = document.get("model", AUTO_MODEL)
    if model is None:
        model = AUTO_MODEL
    if not isinstance(model, str) or not 1 <= len(model) <= 256 or not model.isprintable():
        raise _invalid('`model` must name a model (1 to 256 printable characters), or be "auto"')
    hint = document.get("max_completion_tokens", document.get("max_tokens"))
    shape = (
        classify_request(document, family, classifier)
        if classifier is not None
        else classify_request(document, family)
    )
    return RequestFacts(
        model_id=model,
        family=family,
        stream=document.get("stream") is True,
        max_tokens=_hint(hint),
        body_bytes=len(body),
        shape=shape,
        auto=model == AUTO_MODEL,
    )


def bind_model(body: bytes, model_id: str) -> bytes:
    """An automatic request's body with `model` set to the model Grid chose for it."""
    document = _document(body)  # read_facts already accepted it
    document["model"] = model_id
    return json.dumps(document, ensure_ascii=False).encode()


def openai_error(status: int, code: str, message: str, fix: str = "") -> JSONResponse:
    """OpenAI's error shape (`message`, `type`, `code`) plus Grid's `fix`; never echoes input."""
    return JSONResponse(openai_body(status, code, message, fix), status_code=status)


def observation_of(facts: RequestFacts, timestamp: float) -> Observation:
    served = facts.served
    # A request the router refused was served by no model: no outcome evidence.
    no_engine = served is None or facts.outcome is Outcome.NO_ROUTE
    return observation_from(
        facts.shape,
        facts.family,
        RequestOutcome(
            requested_model=facts.model_id,
            served_model=None if no_engine or served is None else served.model_id,
            outcome=facts.outcome,
            service_time_s=facts.service_time_s,
            queue_depth=served.queued if served is not None else 0,
            input_units=facts.input_units,
            output_units=facts.output_units,
            body_bytes=facts.body_bytes,
            timestamp=timestamp,
        ),
    )


def observe_quietly(service: ControllerService, facts: RequestFacts) -> None:
    """Fold one request into demand; runs after the response and can never fail it.

    A named request for a configured model is demand for it; an automatic one is workload
    demand (the model that served it gets outcome evidence, never demand). A named request for
    a model Grid does not serve was answered 404 and is not recorded.
    """
    try:
        ctl = service.controller
        if not facts.auto and facts.model_id not in ctl.profiles:
            return
        now = service.clock()
        served = facts.served
        recorded = ctl.observe_request(
            observation_of(facts, now),
            now,
            served_sha256=served.artifact_sha256 if served is not None else None,
            affinity_digest=facts.affinity_digest,
        )
        # Unserved demand (no route, an engine failure) wakes the controller at once; served
        # requests are folded in by its next periodic pass, so a busy router does not replan
        # on every request.
        if recorded and facts.outcome is not Outcome.OK:
            service.notify()
    except Exception as exc:  # best effort by contract: observation never reaches the client
        log.warning("a request observation was dropped: %s", type(exc).__name__)
