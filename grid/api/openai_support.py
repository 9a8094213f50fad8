"""Helpers of the OpenAI proxy: the request facts it may read, its error shape, observations.

Of a request body the proxy reads only `model`, `stream` and the max-tokens hint; the body is
forwarded unchanged and nothing of it (nor of the answer) is kept. The observation folded into
the demand tracker holds bounded numbers: the model, the endpoint family, text modality,
approximate input/output units, service time and outcome.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, replace

from fastapi.responses import JSONResponse

from grid.demand import EndpointFamily, Modality, Observation, Outcome
from grid.fleet.errors import GridError
from grid.router.usage import Usage
from grid.runtime.controller.service import ControllerService

log = logging.getLogger("grid.proxy")

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_TOKENS_HINT = 1_000_000
BYTES_PER_UNIT = 4.0  # approximate text units (tokens) when the engine reports no usage


@dataclass(frozen=True)
class RequestFacts:
    model_id: str
    family: EndpointFamily
    stream: bool
    max_tokens: int | None
    body_bytes: int
    outcome: Outcome = Outcome.OK
    service_time_s: float = 0.0
    input_units: float = 0.0
    output_units: float = 0.0

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


def read_facts(body: bytes, family: EndpointFamily) -> RequestFacts:
    """The few fields routing needs; GridError `invalid_request` for an unusable body.

    The body's size was already bounded while it was read (MAX_BODY_BYTES).
    """
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _invalid("the request body is not valid JSON") from None
    if not isinstance(document, dict):
        raise _invalid("the request body must be a JSON object")
    model = document.get("model")
    if not isinstance(model, str) or not 1 <= len(model) <= 256 or not model.isprintable():
        raise _invalid("`model` must name a model (1 to 256 printable characters)")
    hint = document.get("max_completion_tokens", document.get("max_tokens"))
    return RequestFacts(
        model_id=model,
        family=family,
        stream=document.get("stream") is True,
        max_tokens=_hint(hint),
        body_bytes=len(body),
    )


def openai_error(status: int, code: str, message: str, fix: str = "") -> JSONResponse:
    """OpenAI's error shape (`message`, `type`, `code`) plus Grid's `fix`; never echoes input."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    error: dict[str, str] = {"message": message, "type": kind, "code": code}
    if fix:
        error["fix"] = fix
    return JSONResponse({"error": error}, status_code=status)


def observation_of(facts: RequestFacts, timestamp: float) -> Observation:
    return Observation(
        model_id=facts.model_id,
        # A request the router refused was served by no model: no outcome evidence.
        served_model_id=None if facts.outcome is Outcome.NO_ROUTE else facts.model_id,
        endpoint_family=facts.family,
        modality=Modality.TEXT,
        input_units=min(facts.input_units, 1e12),
        output_units=min(facts.output_units, 1e12),
        service_time_s=min(facts.service_time_s, 86_400.0),
        outcome=facts.outcome,
        timestamp=timestamp,
    )


def observe_quietly(service: ControllerService, facts: RequestFacts) -> None:
    """Fold one request into demand; runs after the response and can never fail it."""
    try:
        ctl = service.controller
        if facts.model_id not in ctl.profiles:
            return  # only configured model ids create demand
        now = service.clock()
        result = ctl.observe([observation_of(facts, now)], now)
        if result.get("accepted"):
            service.notify()
    except Exception as exc:  # best effort by contract: observation never reaches the client
        log.warning("a request observation was dropped: %s", type(exc).__name__)
