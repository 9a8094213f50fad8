"""POST /v1/embeddings: routed, observed (tokens in, device time) and planned like any model.

The same proxy as chat and completions (routes_openai.py): a named embedding model's READY
engines (llama.cpp with --embeddings, vLLM, an external endpoint), `auto` routed by the
`embedding` workload; a model of another kind is refused with 400 `model_not_embedding`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from grid.api.deps import Service
from grid.api.routes_openai import _proxy
from grid.demand import EndpointFamily

router = APIRouter(prefix="/v1", tags=["openai"])


@router.post("/embeddings", response_model=None)
async def embeddings(request: Request, service: Service) -> Response:
    return await _proxy(request, service, EndpointFamily.EMBEDDINGS, "/v1/embeddings")
