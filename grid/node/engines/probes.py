"""Authenticated probes of a llama-server child: readiness and slot activity.

`parse_slots` is pure; anything it cannot read with certainty is UNKNOWN, and callers treat
UNKNOWN like BUSY where safety is at stake (a drain never concludes "idle" from silence).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import httpx


class ActivityState(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Activity:
    state: ActivityState
    processing: int = 0  # slots with is_processing true (0 when unknown)
    slots: int = 0
    reason: str = ""

    @property
    def idle(self) -> bool:
        return self.state is ActivityState.IDLE


def _unknown(reason: str) -> Activity:
    return Activity(state=ActivityState.UNKNOWN, reason=reason)


def parse_slots(payload: object) -> Activity:
    """Activity from the JSON body of `GET /slots`: a non-empty list of slot objects.

    Each slot must carry a boolean `is_processing`; one malformed slot makes the whole answer
    unknown, because a slot we cannot read may be the one doing work.
    """
    if not isinstance(payload, list):
        return _unknown("/slots did not return a list")
    if not payload:
        return _unknown("/slots returned no slots")
    processing = 0
    for index, slot in enumerate(payload):
        if not isinstance(slot, dict):
            return _unknown(f"slot {index} is not an object")
        flag = slot.get("is_processing")
        if not isinstance(flag, bool):
            return _unknown(f"slot {index} has no boolean is_processing")
        processing += int(flag)
    state = ActivityState.BUSY if processing else ActivityState.IDLE
    return Activity(state=state, processing=processing, slots=len(payload))


def auth_headers(engine_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {engine_key}"}


def probe_ready(client: httpx.Client, base_url: str, engine_key: str, timeout_s: float) -> bool:
    """True when `GET /v1/models` answers 200 with the key (the model is loaded)."""
    try:
        response = client.get(
            f"{base_url}/v1/models", headers=auth_headers(engine_key), timeout=timeout_s
        )
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def probe_activity(
    client: httpx.Client, base_url: str, engine_key: str, timeout_s: float
) -> Activity:
    try:
        response = client.get(
            f"{base_url}/slots", headers=auth_headers(engine_key), timeout=timeout_s
        )
    except httpx.HTTPError as exc:
        return _unknown(f"/slots unreachable: {type(exc).__name__}")
    if response.status_code != 200:
        return _unknown(f"/slots answered HTTP {response.status_code}")
    try:
        payload: object = response.json()
    except ValueError:
        return _unknown("/slots did not return JSON")
    return parse_slots(payload)
