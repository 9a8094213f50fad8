"""The seeded workday: phase multipliers per workload and node events, per minute (pure).

Phases over the run's duration D (fractions of D):

| phase            | span        | effect                                                 |
|------------------|-------------|--------------------------------------------------------|
| morning          | 0.00–0.10   | every workload at 0.6                                  |
| coding surge     | 0.10–0.30   | coding ×2.5, embedding ×1.5                             |
| creative campaign| 0.30–0.50   | marketing, design ×2, image ×2.5, video ×2              |
| thermal throttle | 0.40–0.60   | the first Apple machine THROTTLED at 50 % (event)       |
| node outage      | 0.55–0.70   | the first NVIDIA machine stops heartbeating (event)     |
| recovery         | 0.70–0.85   | the machine is back; every workload at 1.0              |
| cooldown         | 0.85–1.00   | every workload at 0.3                                   |

A seeded jitter (±10 % per workload and minute) keeps two seeds apart. A `--workload-trace`
curve replaces one workload's multiplier curve, scaled to the built-in curve's mean
(grid/lab/scenario/traces.py).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from grid.fleet import DEFAULT_WORKLOAD_VOCABULARY

WORDS = DEFAULT_WORKLOAD_VOCABULARY
PHASES: tuple[tuple[str, float, float, Mapping[str, float], float], ...] = (
    ("morning", 0.00, 0.10, {}, 0.6),
    ("coding-surge", 0.10, 0.30, {"coding": 2.5, "embedding": 1.5}, 1.0),
    (
        "creative-campaign",
        0.30,
        0.50,
        {"marketing": 2.0, "design": 2.0, "image": 2.5, "video": 2.0},
        1.0,
    ),
    ("steady", 0.50, 0.70, {}, 1.0),
    ("recovery", 0.70, 0.85, {}, 1.0),
    ("cooldown", 0.85, 1.01, {}, 0.3),
)


@dataclass(frozen=True)
class Event:
    minute: int
    kind: str  # throttle | unthrottle | outage | restore
    host_id: str


def phase_at(minute: int, minutes: int) -> str:
    x = minute / max(1, minutes)
    return next(p[0] for p in PHASES if p[1] <= x < p[2])


def multipliers(minutes: int, seed: int) -> dict[str, list[float]]:
    """workload -> one multiplier per minute."""
    rng = random.Random(f"workday:{seed}:{minutes}")
    out: dict[str, list[float]] = {w: [] for w in WORDS}
    for t in range(minutes):
        name = phase_at(t, minutes)
        _, _, _, boost, base = next(p for p in PHASES if p[0] == name)
        for w in WORDS:
            out[w].append(base * boost.get(w, 1.0) * (0.9 + 0.2 * rng.random()))
    return out


def events(minutes: int, host_ids: Sequence[str]) -> list[Event]:
    """Throttle the first Apple machine, take the first NVIDIA machine down and back."""
    found: list[Event] = []
    mac = next((h for h in host_ids if h.startswith("mac-")), None)
    gpu = next((h for h in host_ids if h.startswith("gpu-")), None)
    if mac is not None:
        found += [
            Event(int(minutes * 0.40), "throttle", mac),
            Event(int(minutes * 0.60), "unthrottle", mac),
        ]
    if gpu is not None and len(host_ids) > 1:
        found += [
            Event(int(minutes * 0.55), "outage", gpu),
            Event(int(minutes * 0.70), "restore", gpu),
        ]
    return sorted(found, key=lambda e: (e.minute, e.kind, e.host_id))


def down_intervals(found: Sequence[Event], minutes: int) -> dict[str, list[tuple[int, int]]]:
    """host -> [start, end) minutes without a heartbeat (for the oracle trace)."""
    return intervals(found, minutes, "outage", "restore")


def throttle_intervals(found: Sequence[Event], minutes: int) -> dict[str, list[tuple[int, int]]]:
    """host -> [start, end) minutes THROTTLED (for the oracle trace)."""
    return intervals(found, minutes, "throttle", "unthrottle")


def intervals(
    found: Sequence[Event], minutes: int, opens: str, closes: str
) -> dict[str, list[tuple[int, int]]]:
    """host -> [start, end) spans from an `opens` event to the next `closes` (or the end)."""
    out: dict[str, list[tuple[int, int]]] = {}
    open_at: dict[str, int] = {}
    for e in found:
        if e.kind == opens:
            open_at[e.host_id] = e.minute
        elif e.kind == closes and e.host_id in open_at:
            out.setdefault(e.host_id, []).append((open_at.pop(e.host_id), e.minute))
    for host_id, start in open_at.items():
        out.setdefault(host_id, []).append((start, minutes))
    return {h: [(a, b) for a, b in spans if b > a] for h, spans in out.items()}
