"""GridError -> HTTP response, one JSON shape: {"error": {code, message, fix}}; under /v1 the
OpenAI shape {"error": {message, type, code}} (grid/api/openai_errors.py) for every error.

Error bodies never echo what the caller sent (a request may carry a credential), and an
unexpected exception becomes a bare 500 with the code `internal_error`, never a traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from grid.api.openai_errors import framework_error, is_openai_path, openai_body
from grid.fleet import GridError

log = logging.getLogger("grid.api")

STATUS_BY_CODE: dict[str, int] = {
    "unauthorized": 401,
    "invalid_operator_token": 403,
    "invalid_node_credential": 403,
    "expired_node_credential": 403,
    "wrong_host": 403,
    "unknown_model": 404,
    "not_registered": 409,
    "lease_held": 409,
    "lease_unavailable": 503,
    "automatic_refused": 409,
    "too_many_node_records": 409,
    "state_write_failed": 503,
}


def status_for(err: GridError) -> int:
    explicit = err.details.get("http_status")
    if isinstance(explicit, int):
        return explicit
    return STATUS_BY_CODE.get(err.code, 422)


def error_body(
    code: str, message: str, fix: str = "", next_command: str = ""
) -> dict[str, dict[str, str]]:
    body = {"code": code, "message": message}
    if fix:
        body["fix"] = fix
    if next_command:
        body["next_command"] = next_command
    return {"error": body}


def _body(
    request: Request, status: int, code: str, message: str, fix: str, next_command: str = ""
) -> object:
    """Grid's shape, or OpenAI's under /v1 (grid/api/openai_errors.py)."""
    if is_openai_path(request.url.path):
        return openai_body(status, code, message, fix)
    return error_body(code, message, fix, next_command)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GridError)
    async def _grid_error(request: Request, err: GridError) -> JSONResponse:
        status = status_for(err)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        retry = err.details.get("retry_after_s")
        if status == 429 and isinstance(retry, int):
            headers = {"Retry-After": str(retry)}
        body = _body(request, status, err.code, err.message, err.fix, err.next_command)
        return JSONResponse(body, status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        message = f"{where}: {first.get('msg', 'invalid value')}"
        fix = "send the documented fields and types"
        return JSONResponse(_body(request, 422, "invalid_request", message, fix), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if is_openai_path(request.url.path):
            body = framework_error(exc.status_code, request.method, request.url.path)
            return JSONResponse(body, exc.status_code, headers=exc.headers)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        fix = {
            404: "check the path: the controller's routes are listed in README.md",
            405: "use the method the route takes (GET reads, PUT and POST change)",
        }.get(exc.status_code, "check the request against the routes in README.md")
        body = error_body(code, str(exc.detail), fix, "grid allocator status")
        # The framework's headers travel (a 405 names the methods the route takes in `Allow`).
        return JSONResponse(body, exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s while serving a request", type(exc).__name__)
        message = "the controller hit an internal error"
        fix = "retry; if it repeats, read the controller's log (GRID_DEBUG=1 shows the traceback)"
        body = _body(request, 500, "internal_error", message, fix, "grid allocator status")
        return JSONResponse(body, 500)
