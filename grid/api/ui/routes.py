"""The live dashboard on the controller's own port: `GET /ui` and what the page reads.

    GET /ui                 the page (HTML; the fleet table is rendered on the server, so the
                            page names every registered host even before its script runs)
    GET /ui/static/NAME     the page's script and style sheet, shipped in this package
    GET /ui/view.json       the view document (view.py); ETag: the page polls it every second
                            and an unchanged view answers 304
    GET /ui/scenario        the last `grid test scenario --html` report (scenario_report_path)

Everything here is read-only and needs no credential, like GET /allocator/status. The page's
operator actions call the admin routes (routes_allocator.py, actions.py) with the operator
token the operator types into the page: it lives in the page's memory only. No route here
reads or returns a secret, and the page's Content-Security-Policy lets it talk only to this
origin.
"""

from __future__ import annotations

import hashlib
import html
import json
import threading
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response

from grid.api.deps import Service
from grid.api.errors import error_body
from grid.api.ui.paths import scenario_report_path
from grid.api.ui.view import fleet_view
from grid.fleet import GridError
from grid.planner import compute_targets
from grid.runtime.controller import ControllerService

router = APIRouter(prefix="/ui", tags=["dashboard"], include_in_schema=False)

STATIC = ("app.js", "app.css")
CONTENT_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
DEFAULT_HISTORY = 100  # command records in the view the page polls
AGE_BUCKET_S = 5.0  # heartbeat ages in the view move at most this often without other changes
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
# The scenario report is one self-contained file with inline SVG and an inline style sheet.
REPORT_HEADERS = {
    **HEADERS,
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
}


def _static(name: str) -> str:
    return resources.files("grid.api.ui").joinpath("static", name).read_text(encoding="utf-8")


class _ViewCache:
    """The last view built, by the controller facts it was built from: many pollers share one
    build, and the ETag is that key, so an unchanged fleet costs a comparison."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: str = ""
        self.body: bytes = b""

    def get(self, service: ControllerService, history: int) -> tuple[str, bytes]:
        ctl = service.controller
        now = service.clock()
        facts = (
            ctl.dirty_revision,
            ctl.processed_revision,
            ctl.mode.value,
            tuple(sorted(ctl.state.host_drains.items())),
            int(now // AGE_BUCKET_S),
            history,
        )
        key = hashlib.sha256(repr(facts).encode()).hexdigest()[:32]
        with self.lock:
            if key == self.key:
                return key, self.body
        body = json.dumps(build_view(service, now, history), separators=(",", ":")).encode()
        with self.lock:
            self.key, self.body = key, body
        return key, body


_cache = _ViewCache()


def build_view(service: ControllerService, now: float, history: int = 100) -> dict[str, Any]:
    document, snap, drains = service.controller.fleet_facts(now, history)
    status = document.model_dump(mode="json")
    return fleet_view(
        status,
        compute_targets(snap),
        drains,
        headroom_fraction=snap.policy.memory_headroom_fraction,
        demand_headroom=snap.policy.demand_headroom_fraction,
    )


def _fleet_rows(view: dict[str, Any]) -> str:
    """The server-rendered fleet table (the script replaces it with the live one)."""
    rows = []
    for h in view["hosts"]:
        mem = h["memory"]
        models = ", ".join(f"{r['model_id']} ({r['state']})" for r in h["residencies"]) or "—"
        rows.append(
            f'<tr data-host="{html.escape(h["host_id"])}"><td>{html.escape(h["host_id"])}</td>'
            f"<td>{html.escape(h['state'])}</td><td>{mem['used']} / {mem['allocatable']} MB</td>"
            f"<td>{html.escape(models)}</td></tr>"
        )
    if not rows:
        return '<tr><td colspan="4">No host has registered yet.</td></tr>'
    return "\n".join(rows)


@router.get("", response_class=HTMLResponse)
def page(service: Service) -> HTMLResponse:
    # The same cached view the script fetches next (its default history), built once for both.
    view = json.loads(_cache.get(service, DEFAULT_HISTORY)[1])
    text = (
        _static("index.html")
        .replace("{{mode}}", html.escape(str(view["mode"])))
        .replace("{{hosts}}", str(len(view["hosts"])))
        .replace("{{fleet_rows}}", _fleet_rows(view))
    )
    return HTMLResponse(text, headers=HEADERS)


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise GridError(
            "not_found",
            f"the dashboard has no file {name!r}",
            fix="open /ui",
            details={"http_status": 404},
        )
    headers = {**HEADERS, "Cache-Control": "no-cache"}
    return Response(_static(name), media_type=CONTENT_TYPES[Path(name).suffix], headers=headers)


@router.get("/view.json")
def view(
    service: Service,
    history: Annotated[int, Query(ge=0, le=512)] = DEFAULT_HISTORY,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    key, body = _cache.get(service, history)
    etag = f'"{key}"'
    headers = {**HEADERS, "ETag": etag}
    if if_none_match == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


@router.get("/scenario", response_class=HTMLResponse)
def scenario() -> Response:
    path = scenario_report_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        body = error_body(
            "no_scenario_report",
            f"no scenario report at {path}",
            fix="run `grid test scenario --html OUT.html` first",
            next_command="grid test scenario --html report.html",
        )
        return JSONResponse(body, status_code=404, headers=HEADERS)
    return HTMLResponse(text, headers=REPORT_HEADERS)
