"""What one run measured, minute by minute (pure accumulators; report.py turns them into the
document).

Units: demand and served are concurrency-minutes (a request's base device seconds / 60), so a
video job weighs what it costs and the oracle trace uses the same numbers. Served is the work
the physics did (physics.py: a request cut short by its pool's capacity counts the part done,
as the oracle's min(demand, capacity) does); `completed` counts requests that succeeded in
full. Per workload word
(the classifier's word, what the allocator saw): demand, served, requests, successes, SLO hits,
suitability-weighted service and admission-state minutes. Lifecycle counts come from the
simulator's action records at the end (a started replica is a successful WARM; a cold start is
one whose warm waited for a LOAD that fetched the artifact); churn is churn.py's ledger over
those starts and unloads and the node losses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grid.demand import Outcome
from grid.fleet import LIVE_STATES, ActionKind, PortfolioReport, RecordStatus
from grid.lab.scenario import workday
from grid.lab.scenario.arrivals import TraceHash
from grid.lab.scenario.catalog import designated
from grid.lab.scenario.churn import LOST, START, UNLOAD, Change, Churn, count_churn
from grid.lab.scenario.lifeline import LifeLog
from grid.lab.scenario.physics import MinuteResult

if TYPE_CHECKING:
    from grid.lab.scenario.fleet import LabFleet
    from grid.lab.scenario.world import World
    from grid.lab.simulator import TickReport

SLO_S: Mapping[str, float] = {
    "coding": 30.0,
    "research": 40.0,
    "marketing": 25.0,
    "sales": 20.0,
    "design": 25.0,
    "general": 15.0,
    "embedding": 2.0,
    "image": 45.0,
    "video": 300.0,
}


@dataclass
class WordStats:
    demand: float = 0.0
    served: float = 0.0  # work done (the oracle's measure): a request cut short counts its part
    completed: float = 0.0  # units of requests that succeeded in full
    requests: int = 0
    ok: int = 0
    slo_ok: int = 0
    suitability: float = 0.0  # Σ served units × score / best score
    admission: dict[str, int] = field(default_factory=dict)
    blocking: dict[str, int] = field(default_factory=dict)


@dataclass
class Lifecycle:
    starts: int = 0
    cold_starts: int = 0
    unloads: int = 0
    startup_s: float = 0.0
    cold_start_s: float = 0.0
    downloaded_mb: int = 0
    churn: Churn = field(default_factory=lambda: Churn(0, 0, 0, 0, 0))


class Metrics:
    def __init__(self, world: World, strategy: str) -> None:
        self.world = world
        self.strategy = strategy
        self.minutes = len(world.arrivals)
        self.words: dict[str, WordStats] = {}
        self.best = {w: designated(world.profiles, world.machines, w) for w in workday.WORDS}
        self.served_by_minute: list[float] = []
        # Per workload and minute (the HTML report's demand and served curves).
        self.word_demand: dict[str, list[float]] = {}
        self.word_served: dict[str, list[float]] = {}
        self.serving: list[list[tuple[str, str]]] = []  # (host, model) READY per minute
        self.routed_hash = TraceHash()  # what this run's physics actually routed
        self.on_target = 0.0  # served by the oracle key's own model (the oracle's units)
        self.memory_fraction: list[float] = []
        self.disk_used_mb: list[int] = []
        self.overloaded: dict[str, int] = {}
        self.timeline: list[dict[str, Any]] = []
        self.life = Lifecycle()
        self.losses: list[Change] = []  # hosts that went down or rebooted empty
        self.unsatisfied: dict[str, int] = {}
        self.violations: list[dict[str, Any]] = []
        self.lifelog = LifeLog()
        self._t0: float | None = None
        self._last_mapping: dict[str, str] = {}
        # (tick, workload) pairs whose mapped model changed from one model to another
        self.mapping_changes = 0
        self._last_overloaded: list[str] = []
        self._last_short: list[str] = []
        self._profiles = {p.model_id: p for p in world.profiles}

    # ------------------------------------------------------------------ per minute
    def minute(
        self,
        t: int,
        start: float,
        result: MinuteResult,
        report: TickReport,
        fleet: LabFleet,
        events: list[workday.Event],
        mapping: dict[str, str],
        evicted: list[tuple[str, str]],
    ) -> None:
        self.service(t, start, result, events)
        self.admission(result, report.plan.portfolio)
        self._resources(fleet)
        for u in report.plan.unsatisfied:
            self.unsatisfied[u.code] = self.unsatisfied.get(u.code, 0) + 1
        for v in report.violations:
            self.violations.append({"minute": t, "code": v.code, "detail": v.detail})
        self.lifelog.tick(start, report.plan, fleet)
        self.tick_entry(
            t,
            result,
            events,
            mapping,
            evicted,
            actions=[f"{a.kind.value}:{a.model_id}@{a.host_id}" for a in report.result.actions],
            withdrawn=[f"{w.code}:{w.model_id}@{w.host_id}" for w in report.result.withdrawn],
            deferred=sorted({f"{d.code}:{d.model_id}@{d.host_id}" for d in report.result.deferred}),
            shortfalls=sorted(
                {f"{u.code}:{u.model_id}:{u.missing_replicas}" for u in report.plan.unsatisfied}
            ),
            violations=[v.code for v in report.violations],
        )

    def service(
        self, t: int, start: float, result: MinuteResult, events: list[workday.Event]
    ) -> None:
        """What minute t's arrivals got (every strategy, and the oracle's replay)."""
        served_now = 0.0
        if self._t0 is None:
            self._t0 = start
        self.lifelog.node_events(start, events)
        for e in events:
            if e.kind in ("outage", "restore"):
                self.losses.append(Change(start, LOST, e.host_id))
        for r in result.routed:
            req = r.request
            self.routed_hash.add(req)
            w = self.words.setdefault(req.workload, WordStats())
            w.demand += req.units
            w.requests += 1
            self.word_demand.setdefault(req.workload, [0.0] * self.minutes)[t] += req.units
            oracle_key = req.requested if req.requested != "auto" else self.best.get(req.workload)
            if r.model_id is None or r.served <= 0:
                continue
            w.served += r.served
            self.word_served.setdefault(req.workload, [0.0] * self.minutes)[t] += r.served
            if r.model_id == oracle_key:
                self.on_target += r.served
            served_now += r.served
            best = self.best.get(req.workload)
            top = self._profiles[best].workload_scores.get(req.workload, 0.0) if best else 0.0
            score = self._profiles[r.model_id].workload_scores.get(req.workload, 0.0)
            if req.requested != "auto":
                w.suitability += r.served
            elif top > 0:
                w.suitability += r.served * min(1.0, score / top)
            if r.outcome is not Outcome.OK:
                continue
            w.ok += 1
            w.completed += req.units
            if r.latency_s <= SLO_S.get(req.workload, 30.0):
                w.slo_ok += 1
        self.served_by_minute.append(served_now)
        self.serving.append(sorted({(r.host_id, r.model_id) for r in result.replicas}))
        for model_id in result.overloaded():
            self.overloaded[model_id] = self.overloaded.get(model_id, 0) + 1

    def admission(self, result: MinuteResult, portfolio: PortfolioReport | None) -> None:
        if portfolio is not None:
            for row in portfolio.admission:
                w = self.words.setdefault(row.workload, WordStats())
                state = row.state.value
                w.admission[state] = w.admission.get(state, 0) + 1
                if state in ("blocked-by-residency", "capacity-contended") and row.model_id:
                    w.blocking[row.model_id] = w.blocking.get(row.model_id, 0) + 1
            return
        seen: dict[str, list[int]] = {}
        for r in result.routed:
            if r.request.requested == "auto":
                counts = seen.setdefault(r.request.workload, [0, 0])
                counts[0] += 1
                counts[1] += r.outcome is Outcome.OK
        for word, (n, ok) in sorted(seen.items()):
            state = "ready" if ok == n else ("undersupplied" if ok else "awaiting-plan")
            w = self.words[word]
            w.admission[state] = w.admission.get(state, 0) + 1

    def memory(self, fraction: float, disk_used_mb: int) -> None:
        self.memory_fraction.append(fraction)
        self.disk_used_mb.append(disk_used_mb)

    def _resources(self, fleet: LabFleet) -> None:
        live = alloc = 0
        for m in self.world.machines:
            host = fleet.hosts[m.host_id]
            if not host.online:
                continue
            alloc += host.allocatable_raw_mb()
            live += sum(r.memory_mb for r in host.residencies.values() if r.state in LIVE_STATES)
        self.memory_fraction.append(live / alloc if alloc else 0.0)
        self.disk_used_mb.append(sum(fleet.disk_used_mb(h) for h in fleet.hosts))

    def tick_entry(
        self,
        t: int,
        result: MinuteResult,
        events: list[workday.Event],
        mapping: dict[str, str],
        evicted: list[tuple[str, str]],
        *,
        actions: list[str],
        withdrawn: list[str],
        deferred: list[str],
        shortfalls: list[str],
        violations: list[str],
    ) -> None:
        overloaded = result.overloaded()
        changed = {w: m for w, m in sorted(mapping.items()) if self._last_mapping.get(w) != m}
        gone = sorted(set(self._last_mapping) - set(mapping))
        self.mapping_changes += sum(1 for w in changed if w in self._last_mapping)
        entry: dict[str, Any] = {
            "minute": t,
            "phase": workday.phase_at(t, self.minutes),
            "events": [f"{e.kind}:{e.host_id}" for e in events],
            "actions": actions,
            "withdrawn": withdrawn,
            "deferred": deferred,
            "portfolio_changes": {**changed, **dict.fromkeys(gone, None)},
            "overloaded": overloaded,
            "evicted": [f"{m}@{h}" for h, m in evicted],
            "served_fraction": round(
                result.served / max(1e-9, sum(r.request.units for r in result.routed)), 4
            )
            if result.routed
            else 1.0,
            "violations": violations,
            "shortfalls": shortfalls,
        }
        interesting = (
            "events",
            "actions",
            "withdrawn",
            "portfolio_changes",
            "evicted",
            "violations",
        )
        moved = overloaded != self._last_overloaded or entry["shortfalls"] != self._last_short
        if any(entry[k] for k in interesting) or moved:
            self.timeline.append(entry)
        self._last_mapping = dict(mapping)
        self._last_overloaded = overloaded
        self._last_short = entry["shortfalls"]

    # ------------------------------------------------------------------ end of run
    def finish(self, fleet: LabFleet) -> None:
        records = sorted(fleet.records.values(), key=lambda r: (r.created_at, r.action_id))
        by_id = {r.action_id: r for r in records}
        life = self.life
        changes = list(self.losses)
        for rec in records:
            if rec.status is not RecordStatus.SUCCEEDED:
                continue
            prof = self._profiles.get(rec.model_id)
            if prof is None:
                continue
            at = rec.finished_at if rec.finished_at is not None else rec.created_at
            if rec.kind is ActionKind.UNLOAD:
                life.unloads += 1
                changes.append(Change(at, UNLOAD, rec.host_id, rec.model_id))
            elif rec.kind is ActionKind.LOAD:
                life.downloaded_mb += prof.artifact_size_mb
            elif rec.kind is ActionKind.WARM:
                life.starts += 1
                changes.append(Change(at, START, rec.host_id, rec.model_id))
                cold = any(by_id[d].kind is ActionKind.LOAD for d in rec.dependencies if d in by_id)
                seconds = prof.warm_estimate_s + (prof.load_estimate_s if cold else 0.0)
                life.startup_s += seconds
                if cold:
                    life.cold_starts += 1
                    life.cold_start_s += seconds
        floors = {m: p.min_residency_s for m, p in self._profiles.items()}
        t0 = self._t0 or 0.0
        for v in self.lifelog.violations(fleet, floors):
            self.violations.append(
                {"minute": int((v.at - t0) // 60), "code": v.code, "detail": v.detail}
            )
        self.violations.sort(key=lambda v: (v["minute"], v["code"], v["detail"]))
        life.churn = count_churn(changes)

    def finish_schedule(
        self, starts: list[tuple[float, str, str, bool]], unloads: list[Change]
    ) -> None:
        """Lifecycle of a replayed schedule (no action records): starts are (at, host, model,
        cold); unloads are UNLOAD changes. Startup seconds as for a run: warm estimate, plus the
        load estimate when cold."""
        life = self.life
        changes = list(self.losses) + list(unloads)
        life.unloads = len(unloads)
        for at, host_id, model_id, cold in starts:
            prof = self._profiles[model_id]
            life.starts += 1
            changes.append(Change(at, START, host_id, model_id))
            seconds = prof.warm_estimate_s + (prof.load_estimate_s if cold else 0.0)
            life.startup_s += seconds
            if cold:
                life.cold_starts += 1
                life.cold_start_s += seconds
                life.downloaded_mb += prof.artifact_size_mb
        life.churn = count_churn(changes)
