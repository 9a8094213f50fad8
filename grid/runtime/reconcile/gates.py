"""The destructive gates: one ordered list of named rules for every path that drains or unloads.

Cleanup, staged preemption and repack (and the re-validation of drains already issued) all ask
this list, so a rule cannot drift between paths. Like a scheduler's filter plugins, each gate is
a small unit with a name, the deferral code it reports, the paths it applies to and a pure
check; `first_blocker` runs them in order and the first refusal wins (its code is the deferral).

Two stages: `standing` gates (authority: ownership, manual host, pins, reachability, an earlier
withdrawal, a lifecycle still running) are checked before an open record of the same action is
kept; `timing` gates (age, availability floors, activity, backoff) decide whether new work may
start now. A retired model (tombstone, no profile) converges to zero: the age and floor gates
let it go, ownership and activity never do.

Each gate also says `when` it runs: in the reconciler's tick, at delivery (the controller's last
check before a drain or unload leaves it, `delivery_blocker`, against the fresh registry), or
both. Delivery runs every gate marked for it, in list order, so a gate added here for delivery
is enforced there without another edit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from enum import StrEnum

from grid.fleet import ADMITTING_STATES, ActionKind, Residency, ResidencyState
from grid.planner import eviction_authority, victim_fence
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.proposals import TickState
from grid.runtime.reconcile.safety import (
    Blocker,
    awaiting_heartbeat,
    backoff_blocker,
    defer_blocked,
    domain_floor_blocker,
    evacuation_blocker,
    last_replica_blocker,
    managed_floor_blocker,
    replacement_blocker,
    residency_age_blocker,
    unload_blocker,
)
from grid.runtime.reconcile.view import FleetView


class Path(StrEnum):
    CLEANUP = "cleanup"  # an obsolete or retired managed residency
    PREEMPTION = "preemption"  # a victim the plan names to free memory for a beneficiary
    REPACK = "repack"  # the old copy of an incumbent the plan relocates


class Stage(StrEnum):
    STANDING = "standing"
    TIMING = "timing"


class When(StrEnum):
    TICK = "tick"  # the reconciler proposing (or re-checking) a drain or unload
    DELIVERY = "delivery"  # the final check before the command leaves the controller


ALL_PATHS = frozenset(Path)
IN_TICK = frozenset({When.TICK})
ALWAYS = frozenset(When)


@dataclass(frozen=True)
class Lease:
    """A lease granted at `received_at` (server clock) for `ttl_s` seconds."""

    received_at: float
    ttl_s: float

    def remaining(self, now: float) -> float:
        return self.received_at + self.ttl_s - now


@dataclass(frozen=True)
class DeliveryLeases:
    """What delivery adds to the view: each host's control lease, each child route's own lease
    ((host, model); a route without an entry that the host's envelope lists holds the control
    lease of the heartbeat that carried it), and the margin a replacement needs left."""

    now: float
    control: Mapping[str, Lease]
    routes: Mapping[tuple[str, str], Lease]
    margin_s: float


@dataclass(frozen=True)
class Candidate:
    """One drain or unload some path would like to propose."""

    kind: ActionKind
    model_id: str
    host_id: str
    res: Residency
    path: Path
    removing: frozenset[str] = frozenset()  # hosts whose drain of this model is already open
    scale_down: bool = False  # a cleanup that lowers the replica count in a quiet spell
    beneficiary: str | None = None  # a preemption: the model the victim makes room for


@dataclass(frozen=True)
class GateContext:
    view: FleetView
    history: HistoryIndex
    blocked_models: AbstractSet[str]  # the tick's live set: models whose destructive work waits
    leases: DeliveryLeases | None = None  # at delivery only

    def retired(self, model_id: str) -> bool:
        return model_id in self.view.retired

    def serving_drain(self, c: Candidate) -> bool:
        """A drain of a READY replica on a host that admits work: it takes service away."""
        return c.kind is ActionKind.DRAIN and self.view.serving(c.model_id, c.host_id)

    def ready_drain(self, c: Candidate) -> bool:
        return c.kind is ActionKind.DRAIN and c.res.state is ResidencyState.READY


Check = Callable[[GateContext, Candidate], Blocker | None]


@dataclass(frozen=True)
class Gate:
    name: str
    code: str  # the deferral code this gate reports (floors may name a more specific one)
    stage: Stage
    check: Check
    paths: frozenset[Path] = ALL_PATHS
    when: frozenset[When] = IN_TICK

    def applies(self, c: Candidate, when: When = When.TICK) -> bool:
        return c.path in self.paths and when in self.when


def _refuse(code: str, detail: str = "") -> Blocker:
    return Blocker(code, detail)


def _managed(ctx: GateContext, c: Candidate) -> Blocker | None:
    return None if c.res.is_managed else _refuse("not_managed", f"owner {c.res.owner.value}")


def _known(ctx: GateContext, c: Candidate) -> Blocker | None:
    known = c.model_id in ctx.view.profiles or ctx.retired(c.model_id)
    return None if known else _refuse("unknown_model")


def _pinned(ctx: GateContext, c: Candidate) -> Blocker | None:
    return _refuse("pinned_residency") if ctx.view.is_pinned(c.model_id, c.host_id) else None


def _manual_host(ctx: GateContext, c: Candidate) -> Blocker | None:
    return _refuse("host_manual") if ctx.view.host_manual(c.host_id) else None


def _reachable(ctx: GateContext, c: Candidate) -> Blocker | None:
    return None if ctx.view.reachable.get(c.host_id, False) else _refuse("host_unreachable")


def _not_blocked(ctx: GateContext, c: Candidate) -> Blocker | None:
    return _refuse("destructive_blocked") if c.model_id in ctx.blocked_models else None


def _lifecycle_idle(ctx: GateContext, c: Candidate) -> Blocker | None:
    running = ctx.history.running_constructive(c.model_id, c.host_id)
    return _refuse("constructive_in_flight") if running else None


def _minimum_residency(ctx: GateContext, c: Candidate) -> Blocker | None:
    if ctx.retired(c.model_id) or not ctx.serving_drain(c):
        return None
    return residency_age_blocker(ctx.view, c.model_id, c.res, scale_down=False)


def _cooldown(ctx: GateContext, c: Candidate) -> Blocker | None:
    if ctx.retired(c.model_id) or not c.scale_down or not ctx.serving_drain(c):
        return None
    return residency_age_blocker(ctx.view, c.model_id, c.res, scale_down=True)


def _removing(c: Candidate) -> set[str]:
    return set(c.removing) | {c.host_id}


def _replacements(ctx: GateContext, c: Candidate) -> Blocker | None:
    """The plan's replacements are READY first, and a model the plan leaves short keeps its
    last serving replica (no replacement can become ready; `last_replica_floor`)."""
    if ctx.retired(c.model_id) or not ctx.serving_drain(c):
        return None
    removing = _removing(c)
    blocker = replacement_blocker(ctx.view, c.model_id, removing)
    return blocker or last_replica_blocker(ctx.view, c.model_id, removing)


def _evacuation(ctx: GateContext, c: Candidate) -> Blocker | None:
    if ctx.retired(c.model_id) or not ctx.ready_drain(c) or ctx.serving_drain(c):
        return None
    return evacuation_blocker(ctx.view, c.model_id, c.host_id, _removing(c))


def outranking_preemption(ctx: GateContext, c: Candidate) -> bool:
    """A staged preemption that the planner's own rule authorizes on this tick's snapshot
    (`preemption_rules`): the victim is no fence, its class is strictly below the
    beneficiary's, and the beneficiary still misses a replica it holds eviction authority for."""
    if c.path is not Path.PREEMPTION or c.beneficiary is None:
        return False
    view = ctx.view
    host = view.hosts.get(c.host_id)
    beneficiary = view.profiles.get(c.beneficiary)
    target = view.targets.get(c.beneficiary)
    if host is None or beneficiary is None or target is None:
        return False
    if victim_fence(host, c.res, view.profiles.get(c.model_id), beneficiary, view.now):
        return False
    return len(view.desired_hosts.get(c.beneficiary, [])) < eviction_authority(target)


STALE_PLAN = (
    "; the plan that staged this preemption was solved for older inputs, and only a current "
    "plan's preemption may take a lower priority class's configured minimum"
)


def _unless_outranked(ctx: GateContext, c: Candidate, blocker: Blocker | None) -> Blocker | None:
    """A lower class's configured minimum is no fence against a higher class: a floor yields
    to an outranking preemption of a current plan, never to a stale plan's (generation fence)."""
    if blocker is None or not outranking_preemption(ctx, c):
        return blocker
    if ctx.view.plan_current:
        return None
    return Blocker(blocker.code, blocker.detail + STALE_PLAN, blocker.retry_at)


def _managed_floor(ctx: GateContext, c: Candidate) -> Blocker | None:
    if ctx.retired(c.model_id) or not ctx.serving_drain(c):
        return None
    return _unless_outranked(ctx, c, managed_floor_blocker(ctx.view, c.model_id, _removing(c)))


def _domain_floor(ctx: GateContext, c: Candidate) -> Blocker | None:
    if ctx.retired(c.model_id) or not ctx.serving_drain(c):
        return None
    return _unless_outranked(ctx, c, domain_floor_blocker(ctx.view, c.model_id, _removing(c)))


def _drained_and_idle(ctx: GateContext, c: Candidate) -> Blocker | None:
    return unload_blocker(c.res) if c.kind is ActionKind.UNLOAD else None


def _route_lease_problem(
    ctx: GateContext, leases: DeliveryLeases, model_id: str, host_id: str
) -> str:
    """Why the replacement on `host_id` is no proof at delivery ("" when it is)."""
    host = ctx.view.hosts.get(host_id)
    if host is None:
        return f"replacement host {host_id} is no longer registered"
    res = ctx.view.residency(model_id, host_id)
    if res is None or res.state is not ResidencyState.READY:
        return f"the replacement on {host_id} is not ready"
    if host.state not in ADMITTING_STATES:
        return f"replacement host {host_id} no longer admits work ({host.state.value})"
    lease = leases.control.get(host_id)
    left = lease.remaining(leases.now) if lease is not None else float("-inf")
    if not left > leases.margin_s:
        return f"the replacement route on {host_id} has {max(left, 0.0):.1f} s of lease left"
    if not res.is_managed:
        return ""  # inventory Grid does not own has no Grid child route to prove
    route = leases.routes.get((host_id, model_id))
    if route is None and model_id in (host.routes or ()):
        route = lease
    if route is None:
        return f"the replacement on {host_id} has no live child route (a READY row is not proof)"
    route_left = route.remaining(leases.now)
    if not route_left > leases.margin_s:
        return (
            f"the replacement's child route on {host_id} has {max(route_left, 0.0):.1f} s "
            "of lease left"
        )
    return ""


def _replacement_leases(ctx: GateContext, c: Candidate) -> Blocker | None:
    """At delivery: every other planned replica is READY on an admitting host with more than
    the margin left on its control lease and (Grid-owned) on its own child route's lease."""
    leases = ctx.leases
    if leases is None or ctx.retired(c.model_id):
        return None
    for host_id in ctx.view.desired_hosts.get(c.model_id, []):
        if host_id == c.host_id:
            continue
        problem = _route_lease_problem(ctx, leases, c.model_id, host_id)
        if problem:
            return _refuse("replacement_not_routable", problem)
    return None


def _backoff(ctx: GateContext, c: Candidate) -> Blocker | None:
    return backoff_blocker(ctx.view, ctx.history, (c.kind, c.host_id, c.model_id))


PLANNED_REMOVALS = frozenset({Path.CLEANUP, Path.REPACK})

GATES: tuple[Gate, ...] = (
    Gate("managed_residency", "not_managed", Stage.STANDING, _managed, when=ALWAYS),
    Gate("known_model", "unknown_model", Stage.STANDING, _known),
    Gate("pinned_host", "pinned_residency", Stage.STANDING, _pinned, when=ALWAYS),
    Gate("manual_host", "host_manual", Stage.STANDING, _manual_host, when=ALWAYS),
    Gate("reachable_host", "host_unreachable", Stage.STANDING, _reachable),
    Gate("no_dangling_destructive", "destructive_blocked", Stage.STANDING, _not_blocked),
    Gate("lifecycle_finished", "constructive_in_flight", Stage.STANDING, _lifecycle_idle),
    Gate("minimum_residency", "minimum_residency", Stage.TIMING, _minimum_residency),
    Gate("scale_down_cooldown", "scale_down_cooldown", Stage.TIMING, _cooldown),
    # Last replica: the plan's replacements are READY first, and a model the plan leaves short
    # keeps its last serving replica (`last_replica_floor`); a preemption has none of this: it
    # is the planner's explicit exception, released before its beneficiary is placed.
    Gate(
        "replacements_ready",
        "replacement_not_ready",
        Stage.TIMING,
        _replacements,
        paths=PLANNED_REMOVALS,
    ),
    # Route proof at delivery (invariant 4): the replacements' child routes outlive the margin.
    Gate(
        "replacement_routes_leased",
        "replacement_not_routable",
        Stage.TIMING,
        _replacement_leases,
        paths=PLANNED_REMOVALS,
        when=frozenset({When.DELIVERY}),
    ),
    Gate("evacuation_make_before_break", "replacement_not_ready", Stage.TIMING, _evacuation),
    Gate("managed_baseline_floor", "managed_baseline_floor", Stage.TIMING, _managed_floor),
    Gate("failure_domain_floor", "failure_domain_floor", Stage.TIMING, _domain_floor),
    Gate("drained_and_idle", "requests_in_flight", Stage.TIMING, _drained_and_idle),
    Gate("failure_backoff", "backoff", Stage.TIMING, _backoff),
)

# The availability floors, re-checked for drains already issued (batch re-validation).
FLOOR_GATES = frozenset(
    {
        "replacements_ready",
        "evacuation_make_before_break",
        "managed_baseline_floor",
        "failure_domain_floor",
    }
)


def first_blocker(
    ctx: GateContext,
    candidate: Candidate,
    stage: Stage,
    *,
    only: frozenset[str] | None = None,
) -> Blocker | None:
    """The first gate of `stage` that refuses the candidate (None: every gate lets it pass)."""
    for gate in GATES:
        if gate.stage is not stage or not gate.applies(candidate):
            continue
        if only is not None and gate.name not in only:
            continue
        blocker = gate.check(ctx, candidate)
        if blocker is not None:
            return blocker
    return None


def refused_standing(
    ctx: GateContext, tick: TickState, candidate: Candidate, *, detail: str | None = None
) -> bool:
    """The first half of every proposed drain or unload (cleanup and preemption alike): a
    standing gate that refuses it is deferred with its code (and `detail`, when given)."""
    blocker = first_blocker(ctx, candidate, Stage.STANDING)
    if blocker is None:
        return False
    key = (candidate.kind, candidate.host_id, candidate.model_id)
    defer_blocked(tick, key, blocker if detail is None else replace(blocker, detail=detail))
    return True


def admitted_after_standing(ctx: GateContext, tick: TickState, candidate: Candidate) -> bool:
    """The second half: not while the same action is open or its result is unobserved, then the
    timing gates (a refusal is deferred); an admitted drain is noted as removing its replica."""
    key = (candidate.kind, candidate.host_id, candidate.model_id)
    if tick.keep_open(ctx.history.open_record(key)) is not None:
        return False
    if awaiting_heartbeat(ctx.view, ctx.history, key):
        return False
    blocker = first_blocker(ctx, candidate, Stage.TIMING)
    if blocker is not None:
        defer_blocked(tick, key, blocker)
        return False
    if candidate.kind is ActionKind.DRAIN:
        tick.note_removal(candidate.model_id, candidate.host_id)
    return True


def floor_blocker(ctx: GateContext, candidate: Candidate) -> Blocker | None:
    """The availability floors alone (for a drain that was already issued)."""
    return first_blocker(ctx, candidate, Stage.TIMING, only=FLOOR_GATES)


def delivery_gates() -> tuple[Gate, ...]:
    """The gates delivery runs, in list order (read at call time: the list is the rule)."""
    return tuple(g for g in GATES if When.DELIVERY in g.when)


def delivery_blocker(ctx: GateContext, candidate: Candidate) -> Blocker | None:
    """The first gate marked for delivery that refuses the candidate (both stages, in order)."""
    for gate in delivery_gates():
        if not gate.applies(candidate, When.DELIVERY):
            continue
        blocker = gate.check(ctx, candidate)
        if blocker is not None:
            return blocker
    return None
