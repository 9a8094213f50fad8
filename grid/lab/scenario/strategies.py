"""The four controls of one run; all see the same arrivals, topology, failures and physics.

- smart: the production pipeline. Every classified request goes through the controller's
  `RequestSignals` (workload forecast, outcome evidence, workflow learner) and, when it named a
  configured model, the production `DemandTracker` (direct demand with trend lookahead and
  correlation inference); the snapshot carries `demand` (with the controller's workflow
  pre-warm: `prewarm_demand` adds INFERRED demand for the next stage's model of a learned edge),
  `workloads` and `outcomes`; the planner (with its portfolio) and the reconciler decide.
  Predictive work: that pre-warm, and the controller's `predictions` (learned edges and
  correlation inferences, grid/runtime/controller/prefetch_inputs.py) in the snapshot, from
  which the production planner stages cache-only advisories that the reconciler turns into
  disk-only predictive loads (and exact evictions).
- reactive: the same pipeline without correlation, lookahead or predictive work: inferred
  demand entries are dropped, trends zeroed, no predictions: nothing is prefetched.
- greedy: the current minute's visible workload only (the previous minute's completed requests),
  each word mapped to its most suitable feasible model (a model some admitting machine can hold)
  as direct demand, planned by the ordinary constrained planner every tick (no portfolio).
- static: the declared population's average workload mix (personas' rates and stage/mix
  weights, not arrivals), mapped to the most suitable models once, planned once at the start;
  that plan is reconciled every tick and never recomputed around a failure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from grid.demand import DemandConfig, DemandTracker, Observation
from grid.fleet import (
    DemandEntry,
    Evidence,
    FleetSnapshot,
    ModelProfile,
    Outcome,
    Plan,
    PortfolioPolicy,
    Prediction,
    WorkloadForecast,
)
from grid.lab.scenario.arrivals import BASE_SERVICE_S
from grid.lab.scenario.personas import STAGE_MINUTES, User
from grid.router import hash_affinity_key
from grid.runtime.controller import RequestSignals, mapped_inputs, snapshot_demand

STRATEGIES = ("smart", "reactive", "greedy", "static")
PLAN_TIME_LIMIT_S = 2.0
ENGINE = "cpsat"

Fields = tuple[dict[str, DemandEntry], dict[str, WorkloadForecast], list[Outcome]]


def plan_snapshot(snap: FleetSnapshot) -> Plan:
    """The production planner: CP-SAT (lexicographic placement, then the joint portfolio
    model), one worker, fixed seed, `deterministic=True` (each stage's cut-off is CP-SAT
    deterministic time, not wall time). ENGINE may be switched for a measurement."""
    from grid.planner import make_plan

    return make_plan(snap, engine=ENGINE, time_limit_s=PLAN_TIME_LIMIT_S, deterministic=True)


class Control:
    """The demand side and planner of one strategy."""

    name = "smart"
    predictive = True

    def __init__(self, profiles: Sequence[ModelProfile], seed: int) -> None:
        self.profiles = {p.model_id: p for p in profiles}
        secret = hashlib.sha256(f"scenario-workflow:{seed}".encode()).digest()
        self.signals = RequestSignals(DemandConfig(), secret=secret)
        self.tracker = DemandTracker(sorted(self.profiles))
        self._digests: dict[str, str | None] = {}
        self.policy = PortfolioPolicy()
        self._last_plan: Plan | None = None
        self.predicted: list[Prediction] = []  # the last `fields`' predictions (smart only)

    def _digest(self, session: str) -> str | None:
        if session not in self._digests:
            key = hash_affinity_key(session)
            self._digests[session] = key.digest if key else None
        return self._digests[session]

    def observe(self, items: Sequence[tuple[Observation, str, str | None]], now: float) -> None:
        """(observation, session, serving artifact SHA) in completion order."""
        policy = self.policy
        for obs, session, sha in items:
            signal = self.signals.observe(
                obs,
                profiles=self.profiles,
                policy=policy,
                now=now,
                served_sha256=sha,
                affinity_digest=self._digest(session),
            )
            if not signal.workload_demand:
                self.tracker.observe(obs, now)

    def fields(self, now: float) -> Fields:
        """As the controller's `snapshot` builds them (grid/runtime/controller/core.py): the
        tracker's forecast plus the workflow pre-warm (learned edges from an active workload ask
        for the next stage's model as INFERRED demand, mapped by the last plan's portfolio)."""
        self.tracker.prune(now)
        workloads, outcomes = self.signals.snapshot_fields(now, self.profiles)
        workloads, mapping = mapped_inputs(workloads, self._last_plan)
        demand, self.predicted = snapshot_demand(
            self.signals.edges(now),
            workloads,
            mapping,
            self.profiles,
            self.tracker.explain(now, self.profiles.values()),
        )
        return demand, workloads, outcomes

    def plan(self, snap: FleetSnapshot) -> Plan:
        self._last_plan = plan_snapshot(snap)
        return self._last_plan

    def mapping(self, plan: Plan | None) -> dict[str, str]:
        if plan is None or plan.portfolio is None:
            return {}
        return dict(plan.portfolio.mapping)


class Reactive(Control):
    name = "reactive"
    predictive = False

    def fields(self, now: float) -> Fields:
        self.tracker.prune(now)
        workloads, outcomes = self.signals.snapshot_fields(now, self.profiles)
        demand = self.tracker.forecast(now, self.profiles.values())  # no workflow pre-warm
        kept = {
            m: e.model_copy(update={"trend": 0.0})
            for m, e in demand.items()
            if e.evidence is not Evidence.INFERRED
        }
        return kept, mapped_inputs(workloads, self._last_plan)[0], outcomes


Chooser = Callable[[str], str | None]


class Greedy(Control):
    """Last minute's visible demand -> the most suitable feasible model, direct demand."""

    name = "greedy"
    predictive = False

    def __init__(self, profiles: Sequence[ModelProfile], seed: int, choose: Chooser) -> None:
        super().__init__(profiles, seed)
        self.choose = choose
        self._last: dict[str, list[float]] = {}
        self._map: dict[str, str] = {}

    def observe(self, items: Sequence[tuple[Observation, str, str | None]], now: float) -> None:
        self._last = {}
        for obs, _session, _sha in items:
            model = obs.model_id if obs.model_id in self.profiles else self.choose(obs.workload)
            if model is None:
                continue
            if obs.model_id not in self.profiles:
                self._map[obs.workload] = model
            units = self._last.setdefault(model, [0.0, 0.0, 0.0])
            units[0] += obs.service_time_s / 60.0
            units[1] += 1.0
            units[2] = max(units[2], float(obs.queue_depth))

    def fields(self, now: float) -> Fields:
        demand = {
            m: DemandEntry(offered_concurrency=c + q, rpm=n, queue_depth=q)
            for m, (c, n, q) in sorted(self._last.items())
        }
        return demand, {}, []

    def mapping(self, plan: Plan | None) -> dict[str, str]:
        return dict(self._map)


class Static(Control):
    """The declared mix once: one plan at the first tick, reconciled for the whole run."""

    name = "static"
    predictive = False

    def __init__(
        self, profiles: Sequence[ModelProfile], seed: int, choose: Chooser, users: Sequence[User]
    ) -> None:
        super().__init__(profiles, seed)
        self.choose = choose
        self._plan: Plan | None = None
        mix: dict[str, float] = {}
        for user in users:
            p = user.persona
            rate = p.rate_per_min
            for word in p.stages:  # stages take 75 % of a user's requests, evenly
                mix[word] = mix.get(word, 0.0) + 0.75 * rate / len(p.stages)
            total = sum(w for _, w in p.mix)
            for word, w in p.mix:
                mix[word] = mix.get(word, 0.0) + 0.25 * rate * w / total
        self._map = {w: m for w in sorted(mix) if (m := choose(w)) is not None}
        demand: dict[str, float] = {}
        for word, rpm in mix.items():
            model = self._map.get(word)
            if model is not None:
                demand[model] = demand.get(model, 0.0) + rpm * BASE_SERVICE_S[word] / 60.0
        self._demand = {
            m: DemandEntry(offered_concurrency=round(c, 3), rpm=1.0)
            for m, c in sorted(demand.items())
        }
        self.stage_minutes = STAGE_MINUTES

    def observe(self, items: Sequence[tuple[Observation, str, str | None]], now: float) -> None:
        return None

    def fields(self, now: float) -> Fields:
        return dict(self._demand), {}, []

    def plan(self, snap: FleetSnapshot) -> Plan:
        if self._plan is None:
            self._plan = plan_snapshot(snap)
        return self._plan

    def mapping(self, plan: Plan | None) -> dict[str, str]:
        return dict(self._map)


def make_control(
    name: str,
    profiles: Sequence[ModelProfile],
    seed: int,
    choose: Chooser,
    users: Sequence[User],
) -> Control:
    if name == "smart":
        return Control(profiles, seed)
    if name == "reactive":
        return Reactive(profiles, seed)
    if name == "greedy":
        return Greedy(profiles, seed, choose)
    if name == "static":
        return Static(profiles, seed, choose, users)
    raise ValueError(name)


__all__ = ["STRATEGIES", "Control", "Fields", "make_control", "plan_snapshot"]
