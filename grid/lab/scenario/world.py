"""What every strategy of one run shares: the configuration, topology, users' arrivals and the
workday's events (built once per seed, pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from grid.fleet import ModelProfile
from grid.lab.scenario import workday
from grid.lab.scenario.arrivals import Request, digest, generate
from grid.lab.scenario.catalog import Machine, build_machines, build_models
from grid.lab.scenario.personas import build_users
from grid.lab.scenario.traces import map_curve


@dataclass(frozen=True)
class ScenarioConfig:
    machines: int = 8
    models: int = 8
    users: int = 50
    duration_s: int = 1800
    seed: int = 42
    strategy: str = "smart"
    traces: Mapping[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def minutes(self) -> int:
        return max(1, int(self.duration_s // 60))


@dataclass
class World:
    """Everything every strategy shares: topology, users, arrivals, events."""

    profiles: list[ModelProfile]
    machines: list[Machine]
    arrivals: list[list[Request]]
    events: list[workday.Event]
    digest: str
    users: int


def build_world(cfg: ScenarioConfig) -> World:
    profiles = build_models(cfg.models)
    machines = build_machines(cfg.machines, cfg.seed, profiles)
    curves = workday.multipliers(cfg.minutes, cfg.seed)
    for word, rows in sorted(cfg.traces.items()):
        curves[word] = map_curve(rows, cfg.minutes, curves[word])
    users = build_users(cfg.users, cfg.seed)
    arrivals = generate(users, cfg.minutes, cfg.seed, curves, profiles[0].model_id)
    found = workday.events(cfg.minutes, [m.host_id for m in machines])
    return World(profiles, machines, arrivals, found, digest(arrivals), cfg.users)
