"""The allocator status document (GET /allocator/status, `grid allocator status --json`).

Presentation only: `StatusView` reads the controller's state and collaborators (called under
the controller lock, with the snapshot the controller built) and decides nothing. It never
holds a secret: the controller has none (credentials live in the HTTP layer).
"""

from __future__ import annotations

from typing import Protocol

from grid.fleet import LIVE_STATES, FleetSnapshot, Host, Residency, ResidencyState
from grid.fleet.operator import (
    Authority,
    Counters,
    DemandSummary,
    ExternalRow,
    GraceSummary,
    HostRow,
    Inferred,
    LeaseSummary,
    ModelForecastRow,
    PendingCommand,
    ResidencyRow,
    Revisions,
    SafetyError,
    StatusDocument,
    StatusWarning,
    Suspicion,
    TickLatency,
    TimingRow,
    WithdrawnRecord,
    WorkflowEdge,
    WorkloadsSection,
)
from grid.planner import allocatable_mb, host_refusals
from grid.runtime.controller.authority import Grace, LeaseKeeper
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.externals import external_entry
from grid.runtime.controller.gatekeeper import SUSPICIOUS, Gatekeeper
from grid.runtime.controller.live_state import ControllerState
from grid.runtime.controller.outbox import Outbox
from grid.runtime.controller.prefetch_status import prefetch_section
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.store import Store
from grid.runtime.reconcile import route_proven, withdrawal_text


class HasStatus(Protocol):
    def status(
        self, now: float, *, history: int | None = None, detail: bool = False
    ) -> StatusDocument: ...


def status_document(
    ctl: HasStatus, now: float, *, history: int | None = None, detail: bool = False
) -> StatusDocument:
    """The status document of a controller (`Controller.status`); `detail` adds what only an
    operator may see (which advertised engine ports do not answer)."""
    return ctl.status(now, history=history, detail=detail)


def percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


STALE = "stale"  # a host silent past its route lease: nothing of it is routed, or shown READY


def _shown_state(host: Host, res: Residency, stale: bool) -> str:
    """A READY row no live child route corroborates is still warming (invariant 4: the row
    alone is inventory, not proof that the model serves), and one of a silent host is stale."""
    if res.state is ResidencyState.READY and stale:
        return STALE
    if res.state is ResidencyState.READY and not route_proven(host, res):
        return ResidencyState.WARMING.value
    return res.state.value


def _host_row(
    registry: Registry,
    snap: FleetSnapshot,
    host: Host,
    now: float,
    *,
    lease_s: float,
    gate: Gatekeeper,
    detail: bool,
) -> HostRow:
    entry = registry.hosts.get(host.host_id) or external_entry(host)  # issue 21
    live = [r for r in host.residencies if r.state in LIVE_STATES]
    # A node silent past its route lease (external endpoints are probed, not heard).
    stale = host.host_id in registry.hosts and now - entry.received_at > lease_s
    problems = list(entry.problems)
    reachability: list[str] | None = None
    if detail:  # operators only: which advertised ports the controller cannot reach
        reachability = list(registry.unreachable.get(host.host_id, []))
        problems = [p for p in problems if not p.startswith("address_unreachable")]
        problems += reachability
    return HostRow(
        host_id=host.host_id,
        state=STALE if stale else host.state.value,
        reported_state=host.state.value,
        ownership=host.ownership.value,
        failure_domain=host.domain,
        capacity_mb=host.capacity_mb,
        reserved_mb=host.reserved_mb,
        external_mb=host.external_mb,
        allocatable_mb=allocatable_mb(host),
        live_mb=sum(r.memory_mb for r in live),
        max_models=host.max_models,
        heartbeat_age_s=round(max(0.0, now - entry.received_at), 1),
        refusals=host_refusals(host, snap),
        problems=problems,
        suspicions=[Suspicion.model_validate(s) for s in gate.of(host.host_id, now)],
        refused_routes=dict(sorted(entry.refused_routes.items())),
        address=entry.address,
        node_records=len(entry.node_ids),
        reachability=reachability,
        residencies=[
            ResidencyRow(
                model_id=r.model_id,
                state=_shown_state(host, r, stale),
                memory_mb=r.memory_mb,
                ownership=r.owner.value,
                active_requests=r.active_requests,
            )
            for r in host.residencies
        ],
        cached_models=list(host.cached_models),
    )


def _forecasts(state: ControllerState, now: float) -> dict[str, ModelForecastRow]:
    out: dict[str, ModelForecastRow] = {}
    for model_id, forecast in state.tracker.explain(now, state.profiles.values()).items():
        rel = forecast.inferred_from
        out[model_id] = ModelForecastRow(
            **dict(forecast.entry),
            peak_rpm=round(forecast.peak_rpm, 3),
            active_buckets=forecast.active_buckets,
            inferred_from=None
            if rel is None
            else Inferred(
                source=rel.source,
                kind=rel.kind.value,
                support=rel.support,
                share=round(rel.share, 3),
            ),
            capped=None if rel is None else forecast.capped,
        )
    return out


def _workloads(state: ControllerState, snap: FleetSnapshot, now: float) -> WorkloadsSection:
    """Workload demand, learned workflow edges and outcome evidence (issue 9). The plan's
    portfolio (admission rows, candidates) is under `plan.portfolio`."""
    plan = state.last.plan
    return WorkloadsSection(
        vocabulary=list(state.policy.workload_vocabulary),
        forecasts=dict(sorted(snap.workloads.items())),
        ignored=state.signals.workloads.ignored,
        edges=[
            WorkflowEdge(
                source=e.source,
                target=e.target,
                count=e.count,
                departures=e.departures,
                confidence=round(e.confidence, 4),
            )
            for e in state.signals.edges(now)
        ],
        outcomes=list(snap.outcomes),
        portfolio=plan.portfolio if plan is not None else None,
    )


def _pending(state: ControllerState) -> list[PendingCommand]:
    rows = []
    for record, command in state.book.pending_commands():
        wire = command.wire(
            created_at=record.created_at, profile=state.profiles.get(record.model_id)
        )
        rows.append(
            PendingCommand(
                **dict(wire),
                status=record.status.value,
                delivered_at=record.delivered_at,
                priority=record.priority,
                urgency=record.urgency,
            )
        )
    rows.sort(key=lambda r: (r.host_id or "", r.created_at or 0.0, r.action_id))
    return rows


def _counters(state: ControllerState) -> Counters:
    counters = state.counters
    return Counters(
        ticks=counters.ticks,
        tick_failures=counters.tick_failures,
        commands_issued=counters.issued,
        commands_delivered=counters.delivered,
        acknowledgements=dict(sorted(counters.acks.items())),
        observations_accepted=counters.observations_accepted,
        observations_ignored=counters.observations_ignored,
    )


class StatusView:
    def __init__(
        self,
        state: ControllerState,
        registry: Registry,
        store: Store,
        keeper: LeaseKeeper,
        grace: Grace,
        outbox: Outbox,
        controller_id: str,
        gate: Gatekeeper,
    ) -> None:
        self.state = state
        self.registry = registry
        self.store = store
        self.keeper = keeper
        self.grace = grace
        self.outbox = outbox
        self.controller_id = controller_id
        self.gate = gate

    def document(
        self,
        snap: FleetSnapshot,
        config: ControllerConfig,
        now: float,
        history: int | None,
        *,
        detail: bool = False,
    ) -> StatusDocument:
        state, book, last = self.state, self.state.book, self.state.last
        limit = config.status_history if history is None else history
        plan = last.plan
        reconciliation = None
        if last.result is not None:
            reconciliation = last.result.model_copy(update={"deferred": list(last.deferred)})
        records = sorted(book.history(), key=lambda r: (r.created_at, r.action_id))
        return StatusDocument(
            now=now,
            controller_id=self.controller_id,
            mode=state.mode,
            durable=self.store.durable,
            state_path=self.store.location,
            warnings=self._warnings(now),
            suspicious_hosts={
                h: [Suspicion.model_validate(s) for s in rows]
                for h, rows in self.gate.suspects(now).items()
            },
            lease=self._lease(now),
            authority=Authority.model_validate(
                self.keeper.authority(now, state.max_term, self.controller_id)
            ),
            revisions=self._revisions(),
            grace=GraceSummary(
                active=self.grace.active(now, config.membership_grace_s),
                until=self.grace.until(config.membership_grace_s),
                restored=state.restored,
            ),
            last_tick=None if last.report is None else last.report.model_copy(deep=True),
            last_success_at=last.success_at,
            tick_latency_ms=self._latency(),
            hosts=[
                _host_row(
                    self.registry,
                    snap,
                    host,
                    now,
                    lease_s=config.node_ttl_s,
                    gate=self.gate,
                    detail=detail,
                )
                for host in snap.hosts
            ],
            snapshots=list(snap.hosts),
            profiles=[state.profiles[m] for m in sorted(state.profiles)],
            tombstones=[state.tombstones[m] for m in sorted(state.tombstones)],
            forecasts=_forecasts(state, now),
            externals=[ExternalRow.model_validate(row) for row in state.externals.view()],
            demand=DemandSummary(
                ignored=state.tracker.ignored, series=state.tracker.footprint().series
            ),
            workloads=_workloads(state, snap, now),
            prefetch=prefetch_section(plan, snap, now),
            plan=plan,
            plan_generation=str(last.generation) if last.generation else None,
            unmet=[] if plan is None else list(plan.unsatisfied),
            reconciliation=reconciliation,
            proposed_actions=list(last.proposed),
            pending_commands=_pending(state),
            delivered_pending_action_ids=book.delivered_open_ids(),
            withdrawn_destructive=[
                WithdrawnRecord(**dict(r), message=withdrawal_text("unsafe_destructive_batch"))
                for r in book.withdrawn_destructive()
            ],
            delivery_safety_error=None
            if self.outbox.safety_error is None
            else SafetyError.model_validate(self.outbox.safety_error),
            history=records[-limit:] if limit else [],
            timings=[TimingRow.model_validate(row) for row in state.timings.summary(now)],
            counters=_counters(state),
        )

    def _warnings(self, now: float) -> list[StatusWarning]:
        warnings = dict(self.state.warnings)
        suspicious = self.gate.warning(now)
        if suspicious:  # the hosts named, from the gate's live record (trust.py)
            warnings[SUSPICIOUS] = suspicious
        return [StatusWarning(code=c, message=m) for c, m in sorted(warnings.items())]

    def _lease(self, now: float) -> LeaseSummary:
        lease = self.keeper.held
        return LeaseSummary(
            held=lease is not None and lease.expires_at > now,
            term=lease.term if lease is not None else None,
            expires_at=lease.expires_at if lease is not None else None,
            ttl_s=round(self.keeper.ttl(now), 2),
            max_term=self.state.max_term,
        )

    def _revisions(self) -> Revisions:
        rev = self.state.revisions
        return Revisions(
            dirty=rev.dirty,
            processed=rev.processed,
            success=rev.success,
            safety=rev.safety,
            success_safety=rev.success_safety,
        )

    def _latency(self) -> TickLatency:
        tick_ms = list(self.state.counters.tick_ms)
        return TickLatency(
            p50=percentile(tick_ms, 0.5), p95=percentile(tick_ms, 0.95), samples=len(tick_ms)
        )
