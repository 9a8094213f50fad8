"""One error body on the OpenAI boundary (/v1): `{"error": {"message", "type", "code"}}`.

Every error under /v1 has this shape: Grid's refusals, request validation, the framework's
404/405, an unexpected failure, and an engine's own error reply (llama.cpp answers
`{"error": {"code": 400, ...}}` with a numeric code: it is rewritten with a string code, the
engine's message kept). `fix`, when there is one, is Grid's addition. Bodies never echo what
the caller sent.
"""

from __future__ import annotations

import json
from typing import Any

OPENAI_PREFIX = "/v1"
ENDPOINTS = (
    "GET /v1/models, GET /v1/models/{id}, POST /v1/chat/completions, POST /v1/completions, "
    "POST /v1/embeddings"
)
ENGINE_CODES = {
    400: "invalid_request",
    401: "engine_unauthorized",
    404: "not_found",
    413: "request_too_large",
    429: "rate_limited",
    501: "not_supported",
    503: "engine_unavailable",
}
MAX_ENGINE_MESSAGE = 500


def is_openai_path(path: str) -> bool:
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 429:
        return "rate_limit_error"
    return "invalid_request_error" if status < 500 else "server_error"


def openai_body(status: int, code: str, message: str, fix: str = "") -> dict[str, Any]:
    error: dict[str, str] = {"message": message, "type": error_type(status), "code": code}
    if fix:
        error["fix"] = fix
    return {"error": error}


def framework_error(status: int, method: str, path: str) -> dict[str, Any]:
    """The body for a route the framework refused (no such path, wrong method)."""
    if status == 404:
        return openai_body(
            404, "not_found", f"{path} is not an endpoint of this Grid", f"use one of {ENDPOINTS}"
        )
    if status == 405:
        return openai_body(
            405, "method_not_allowed", f"{method} is not allowed on {path}", f"use {ENDPOINTS}"
        )
    return openai_body(status, "http_error", f"HTTP {status} on {path}")


def engine_error(content: bytes, status: int) -> bytes:
    """An engine's error reply in the one shape: its message kept, a string code."""
    message = ""
    try:
        doc = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message = error["message"]
    elif isinstance(error, str):
        message = error
    message = " ".join(message.split())[:MAX_ENGINE_MESSAGE]
    code = ENGINE_CODES.get(status, "engine_error")
    text = f"the engine answered HTTP {status}" + (f": {message}" if message else "")
    return json.dumps(openai_body(status, code, text)).encode()
