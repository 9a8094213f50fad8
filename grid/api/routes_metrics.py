"""GET /metrics: Prometheus text exposition of the controller's counters and gauges."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from grid.api.deps import Service
from grid.runtime.controller import percentile

router = APIRouter(tags=["metrics"])

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _line(name: str, value: float, labels: dict[str, str] | None = None) -> str:
    if labels:
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        return f"{name}{{{inner}}} {value}"
    return f"{name} {value}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request, service: Service) -> PlainTextResponse:
    ctl = service.controller
    clients = request.app.state.client_keys.counts()  # per client key name (client_keys.py)
    now = service.clock()
    m = ctl.metrics_view(now)  # read in one go inside the controller
    samples = list(m.tick_ms)
    lines = [
        "# HELP grid_allocator_mode Current mode (1 for the active one).",
        "# TYPE grid_allocator_mode gauge",
        *(
            _line("grid_allocator_mode", 1.0 if m.mode == mode else 0.0, {"mode": mode})
            for mode in ("observe", "recommend", "automatic")
        ),
        "# TYPE grid_allocator_ticks_total counter",
        _line("grid_allocator_ticks_total", m.ticks),
        "# TYPE grid_allocator_tick_failures_total counter",
        _line("grid_allocator_tick_failures_total", m.tick_failures),
        "# TYPE grid_allocator_tick_duration_ms summary",
        *(
            _line("grid_allocator_tick_duration_ms", v, {"quantile": q})
            for q, v in (("0.5", percentile(samples, 0.5)), ("0.95", percentile(samples, 0.95)))
            if v is not None
        ),
        _line("grid_allocator_tick_duration_ms_count", len(samples)),
        "# TYPE grid_allocator_commands_issued_total counter",
        _line("grid_allocator_commands_issued_total", m.issued),
        "# TYPE grid_allocator_commands_delivered_total counter",
        _line("grid_allocator_commands_delivered_total", m.delivered),
        "# TYPE grid_allocator_acknowledgements_total counter",
        *(_line("grid_allocator_acknowledgements_total", n, {"result": r}) for r, n in m.acks),
        "# TYPE grid_allocator_observations_total counter",
        _line("grid_allocator_observations_total", m.observations_accepted, {"result": "accepted"}),
        _line("grid_allocator_observations_total", m.observations_ignored, {"result": "ignored"}),
        "# TYPE grid_allocator_hosts gauge",
        _line("grid_allocator_hosts", m.hosts),
        "# TYPE grid_allocator_profiles gauge",
        _line("grid_allocator_profiles", m.profiles),
        "# TYPE grid_allocator_open_commands gauge",
        _line("grid_allocator_open_commands", m.open_commands),
        "# TYPE grid_allocator_unmet_replicas gauge",
        _line("grid_allocator_unmet_replicas", m.unmet_replicas),
        "# TYPE grid_allocator_revision gauge",
        *(_line("grid_allocator_revision", v, {"kind": k}) for k, v in m.revisions),
        "# TYPE grid_allocator_lease_ttl_seconds gauge",
        _line("grid_allocator_lease_ttl_seconds", m.lease_ttl_s),
        "# TYPE grid_allocator_warnings gauge",
        _line("grid_allocator_warnings", m.warnings),
        "# HELP grid_client_requests_total /v1 requests by client key name.",
        "# TYPE grid_client_requests_total counter",
        *(
            _line("grid_client_requests_total", n, {"key": name})
            for name, n in sorted(clients.items())
        ),
    ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type=CONTENT_TYPE)
