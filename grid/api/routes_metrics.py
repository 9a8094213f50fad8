"""GET /metrics: Prometheus text exposition of the controller's counters and gauges."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from grid.api.deps import Service
from grid.runtime.controller.status import percentile

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
    with ctl.lock:
        c = ctl.counters
        samples = list(c.tick_ms)
        open_records = ctl.book.open_records()
        lines = [
            "# HELP grid_allocator_mode Current mode (1 for the active one).",
            "# TYPE grid_allocator_mode gauge",
            *(
                _line("grid_allocator_mode", 1.0 if ctl.mode.value == m else 0.0, {"mode": m})
                for m in ("observe", "recommend", "automatic")
            ),
            "# TYPE grid_allocator_ticks_total counter",
            _line("grid_allocator_ticks_total", c.ticks),
            "# TYPE grid_allocator_tick_failures_total counter",
            _line("grid_allocator_tick_failures_total", c.tick_failures),
            "# TYPE grid_allocator_tick_duration_ms summary",
            *(
                _line("grid_allocator_tick_duration_ms", v, {"quantile": q})
                for q, v in (("0.5", percentile(samples, 0.5)), ("0.95", percentile(samples, 0.95)))
                if v is not None
            ),
            _line("grid_allocator_tick_duration_ms_count", len(samples)),
            "# TYPE grid_allocator_commands_issued_total counter",
            _line("grid_allocator_commands_issued_total", c.issued),
            "# TYPE grid_allocator_commands_delivered_total counter",
            _line("grid_allocator_commands_delivered_total", c.delivered),
            "# TYPE grid_allocator_acknowledgements_total counter",
            *(
                _line("grid_allocator_acknowledgements_total", n, {"result": r})
                for r, n in sorted(c.acks.items())
            ),
            "# TYPE grid_allocator_observations_total counter",
            _line(
                "grid_allocator_observations_total", c.observations_accepted, {"result": "accepted"}
            ),
            _line(
                "grid_allocator_observations_total", c.observations_ignored, {"result": "ignored"}
            ),
            "# TYPE grid_allocator_hosts gauge",
            _line("grid_allocator_hosts", len(ctl.registry.hosts)),
            "# TYPE grid_allocator_profiles gauge",
            _line("grid_allocator_profiles", len(ctl.profiles)),
            "# TYPE grid_allocator_open_commands gauge",
            _line("grid_allocator_open_commands", len(open_records)),
            "# TYPE grid_allocator_unmet_replicas gauge",
            _line(
                "grid_allocator_unmet_replicas",
                sum(u.missing_replicas for u in ctl.last_plan.unsatisfied) if ctl.last_plan else 0,
            ),
            "# TYPE grid_allocator_revision gauge",
            *(
                _line("grid_allocator_revision", v, {"kind": k})
                for k, v in (
                    ("dirty", ctl.dirty_revision),
                    ("processed", ctl.processed_revision),
                    ("success", ctl.success_revision),
                    ("safety", ctl.safety_revision),
                )
            ),
            "# TYPE grid_allocator_lease_ttl_seconds gauge",
            _line("grid_allocator_lease_ttl_seconds", round(ctl.lease_ttl(now), 3)),
            "# TYPE grid_allocator_warnings gauge",
            _line("grid_allocator_warnings", len(ctl.warnings)),
            "# HELP grid_client_requests_total /v1 requests by client key name.",
            "# TYPE grid_client_requests_total counter",
            *(
                _line("grid_client_requests_total", n, {"key": name})
                for name, n in sorted(clients.items())
            ),
        ]
    return PlainTextResponse("\n".join(lines) + "\n", media_type=CONTENT_TYPE)
