"""GridError -> HTTP response, one JSON shape: {"error": {code, message, fix}}.

Error bodies never echo what the caller sent (a request may carry a credential), and an
unexpected exception becomes a bare 500 with the code `internal_error`, never a traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from grid.fleet.errors import GridError

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


def error_body(code: str, message: str, fix: str = "") -> dict[str, dict[str, str]]:
    body = {"code": code, "message": message}
    if fix:
        body["fix"] = fix
    return {"error": body}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GridError)
    async def _grid_error(_request: Request, err: GridError) -> JSONResponse:
        status = status_for(err)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(error_body(err.code, err.message, err.fix), status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        message = f"{where}: {first.get('msg', 'invalid value')}"
        return JSONResponse(
            error_body("invalid_request", message, "send the documented fields and types"), 422
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s while serving a request", type(exc).__name__)
        return JSONResponse(
            error_body("internal_error", "the controller hit an internal error"), 500
        )
