"""Two refusals of the OpenAI proxy added with engine kinds and external endpoints (issue 21).

- `kind_refusal`: a request to an endpoint its model cannot serve: chat or completions to a
  profile of kind `embedding` (`model_is_embedding`), embeddings to any other kind
  (`model_not_embedding`); 400, nothing routed, no demand recorded.
- `external_failure`: an external endpoint whose TLS certificate does not verify
  (`engine_tls_failed`) or that answered a request with non-OpenAI JSON
  (`external_not_openai`): the request gets 502 with an OpenAI error body, the route's breaker
  counts a failure and the endpoint is marked unhealthy with the reason until a probe passes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse, Response
from starlette.background import BackgroundTask

from grid.api.externals import mark_failed
from grid.api.openai_support import RequestFacts, observe_quietly, openai_error
from grid.api.proxy_state import ProxyState, Upstream
from grid.demand import EndpointFamily, Outcome
from grid.fleet import Modality, ModelProfile

if TYPE_CHECKING:
    from grid.runtime.controller import ControllerService

FAILURE_TEXT = {
    "engine_tls_failed": "its TLS certificate does not verify against the configured CA; "
    "nothing was sent over plain http",
    "external_not_openai": "it answered with JSON that is not an OpenAI response",
}


def kind_refusal(
    profiles: dict[str, ModelProfile], model_id: str, family: EndpointFamily
) -> JSONResponse | None:
    profile = profiles.get(model_id)
    if profile is None:
        return None
    embedding = profile.kind is Modality.EMBEDDING
    if embedding and family is not EndpointFamily.EMBEDDINGS:
        return openai_error(
            400,
            "model_is_embedding",
            f"model {model_id!r} is an embedding model; it answers POST /v1/embeddings only",
            fix="send the input to /v1/embeddings, or pick a chat model from GET /v1/models",
        )
    if family is EndpointFamily.EMBEDDINGS and not embedding:
        return openai_error(
            400,
            "model_not_embedding",
            f"model {model_id!r} is a {profile.kind.value} model, not an embedding model",
            fix="name a model whose profile has kind embedding",
        )
    return None


def external_failure(
    proxy: ProxyState,
    chosen: Upstream,
    service: ControllerService,
    facts: RequestFacts,
    started: float,
    code: str,
) -> Response:
    elapsed = time.perf_counter() - started
    proxy.finish(chosen, None, service.clock(), latency_s=elapsed, completion_tokens=None)
    name = chosen.route.host_id
    reason = f"the external endpoint {name} failed a request: {FAILURE_TEXT[code]}"
    mark_failed(service, name, code, reason)
    response = openai_error(
        502,
        code,
        f"the external endpoint serving model {facts.model_id!r} failed: {FAILURE_TEXT[code]}",
        fix="fix the endpoint (or its --ca-file); `grid node list-external` shows its health",
    )
    response.background = BackgroundTask(
        observe_quietly, service, facts.finished(Outcome.ERROR, elapsed, None)
    )
    return response
