"""Tuning of the controller loop (planner budget, grace, leases, delivery margins)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from grid.demand import DemandConfig
from grid.fleet import GridError

PLAN_WORKERS = ("auto", "inline", "thread", "process")
AUTO_BACKGROUND_HOSTS = 128


@dataclass(frozen=True)
class ControllerConfig:
    engine: str = "cpsat"
    plan_budget_s: float = 2.0  # CP-SAT time budget per tick; the heuristic takes over after it
    deterministic: bool = True  # one CP-SAT worker: reproducible plans on shared CPUs
    # Each stage below failure-domain diversity (disruption, quality, spare hosts) gets at most
    # this long: a tick acts on proven replica and diversity levels without waiting for proofs
    # of the soft ones (a plan left FEASIBLE is re-solved after resolve_interval_s).
    soft_stage_budget_s: float = 0.05
    periodic_interval_s: float = 5.0  # a tick runs at least this often
    # Where a tick's plan is solved when its inputs changed: "inline" (in the tick), or off the
    # tick's critical path in a "thread" or a "process" (plan_worker.py): the tick acts on the
    # newest valid plan it has and adopts the background one on a later tick. "auto": a process
    # once the fleet has AUTO_BACKGROUND_HOSTS hosts (an inline solve there takes ~0.4-1 s on
    # two cores; at 64 hosts ~0.13 s), inline below (docs/controller-tick.md).
    plan_worker: str = "auto"
    resolve_interval_s: float = 60.0  # a merely feasible plan is re-solved after this long
    membership_grace_s: float = 30.0  # after a restart, no destructive work before re-registration
    # The first seconds of that grace, while live hosts re-register: a model the restored book
    # places on a host not back yet gets no replica elsewhere (authority.awaited_models).
    membership_settle_s: float = 5.0
    # For this long after a restored start, a model with a READY replica and a replica in
    # flight from before the restart gets no other until that one answers.
    restart_inflight_wait_s: float = 60.0
    # A WARM a node took and has not answered holds back one new WARM of its model elsewhere
    # for at most this long (in_flight.py; the bound is for a reply that never arrived).
    delivered_warm_wait_s: float = 60.0
    lease_ttl_s: float = 15.0  # controller mutation lease
    lease_renew_fraction: float = 0.5  # renew once less than this share of the lease is left
    node_ttl_s: float = 60.0  # route lease a heartbeat grants (`ttl_seconds`)
    destructive_margin_s: float = 30.0  # replacement routes need more than this left
    tick_wait_s: float = 10.0  # how long a command poll waits for a tick at its revision
    status_history: int = 50  # action records shown in status
    # What one node credential may make the controller do (trust.py): updates per second per
    # host (a token bucket of `heartbeat_burst`), and how long a suspicion stays in status.
    heartbeat_rate_per_s: float = 10.0
    heartbeat_burst: int = 40
    suspicion_ttl_s: float = 600.0
    # Command polls of one host that may force a tick of their own (each costs a whole pass);
    # a poll past this budget is answered without commands (the next one gets them), so a
    # flooding host cannot keep the controller ticking. Background passes that updates ask for
    # are at least `notify_min_interval_s` apart for the same reason.
    poll_tick_rate_per_s: float = 2.0
    poll_tick_burst: int = 10
    notify_min_interval_s: float = 0.2
    # A host noted for a suspicious report in the last minute: its updates at this rate only.
    suspect_heartbeat_rate_per_s: float = 1.0
    # A replicated model's engines restart for a profile change one host at a time; a host that
    # was not seen restarting within this long yields its turn (engine_restarts.py).
    restart_hold_s: float = 60.0
    demand: DemandConfig = field(default_factory=DemandConfig)

    def plan_worker_for(self, hosts: int) -> str:
        """The worker a tick over `hosts` hosts plans with ("auto" resolved)."""
        if self.plan_worker != "auto":
            return self.plan_worker
        return "process" if hosts >= AUTO_BACKGROUND_HOSTS else "inline"

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, float) and (not math.isfinite(value) or value < 0):
                raise GridError(
                    "invalid_controller_config",
                    f"controller setting {spec.name} must be a finite non-negative number",
                    fix=f"correct {spec.name}",
                )
        if self.plan_budget_s <= 0 or self.lease_ttl_s <= 0 or self.node_ttl_s <= 0:
            raise GridError(
                "invalid_controller_config",
                "plan_budget_s, lease_ttl_s and node_ttl_s must be positive",
                fix="give each a positive number of seconds",
            )
        if self.plan_worker not in PLAN_WORKERS:
            raise GridError(
                "invalid_controller_config",
                f"plan_worker {self.plan_worker!r} is not one of {', '.join(PLAN_WORKERS)}",
                fix="set plan_worker to auto, inline, thread or process",
            )
        if self.destructive_margin_s >= self.node_ttl_s:
            raise GridError(
                "invalid_controller_config",
                "destructive_margin_s must be below node_ttl_s, or no drain could ever be sent",
                fix="lower destructive_margin_s",
            )
