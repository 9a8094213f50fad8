"""Where the agent's protection loop gets its samples.

- `host`: the machine's real readings (`grid.node.protection.telemetry.TelemetryReader`).
- `logical`: a logical node of the single-machine fleet. Several logical nodes share one
  machine, so machine-wide CPU, load and terminal idleness say nothing about one partition; they
  are left unknown (the policy ignores unknown sensors by default). Memory pressure is the real
  machine's, because it is real for every partition. `telemetry.json` in the node's state folder
  may set user_active, thermal_state, memory_percent, battery_percent or on_ac_power, which is
  how the lab marks one partition user-active.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from grid.fleet import atomic_write_text, read_json_file
from grid.node.protection import (
    HostPaths,
    LocalOverride,
    Telemetry,
    TelemetryReader,
    read_memory_percent,
)

KNOBS_NAME = "telemetry.json"
LOGICAL_KNOBS = frozenset(
    {"user_active", "thermal_state", "memory_percent", "battery_percent", "on_ac_power"}
)


class TelemetrySource(Protocol):
    def read(self, override: LocalOverride | None) -> Telemetry: ...


class HostTelemetry:
    def __init__(self, *, dedicated: bool) -> None:
        self._reader = TelemetryReader(dedicated=dedicated)

    def read(self, override: LocalOverride | None) -> Telemetry:
        return self._reader.read(override)


class LogicalTelemetry:
    def __init__(self, state_dir: Path, *, dedicated: bool = False) -> None:
        self.state_dir = state_dir
        self.dedicated = dedicated
        self._paths = HostPaths()

    def knobs(self) -> dict[str, Any]:
        try:
            data = read_json_file(self.state_dir / KNOBS_NAME)
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if k in LOGICAL_KNOBS}

    def read(self, override: LocalOverride | None) -> Telemetry:
        fields: dict[str, Any] = {
            "user_active": False,
            "on_ac_power": True,
            "memory_percent": read_memory_percent(self._paths),
            "network_up": True,
        }
        fields.update(self.knobs())
        try:
            return Telemetry(**fields, override=override, dedicated=self.dedicated)
        except ValidationError:
            # A knob file with a bad value is ignored rather than crashing the loop.
            base = {k: v for k, v in fields.items() if k not in LOGICAL_KNOBS}
            return Telemetry(**base, override=override, dedicated=self.dedicated)


def write_knobs(state_dir: Path, knobs: dict[str, Any]) -> None:
    """Set logical-telemetry knobs (the lab's way to mark a partition user-active)."""
    unknown = set(knobs) - LOGICAL_KNOBS
    if unknown:
        raise ValueError(f"unknown telemetry knobs: {sorted(unknown)}")
    atomic_write_text(state_dir / KNOBS_NAME, json.dumps(knobs) + "\n")
