"""Route builders for the router tests."""

from __future__ import annotations

from typing import Any

from grid.fleet.models import HostState, ResidencyState
from grid.router import Route

NOW = 1_785_300_000.0
TTL = 60.0


def route(host_id: str, port: int = 39100, model_id: str = "m", **overrides: Any) -> Route:
    fields: dict[str, Any] = {
        "host_id": host_id,
        "model_id": model_id,
        "port": port,
        "host_state": HostState.ACCEPTING,
        "residency_state": ResidencyState.READY,
        "lease_at": NOW - 1.0,
    }
    fields.update(overrides)
    return Route(**fields)
