"""The local host-protection loop: telemetry → lifecycle, pure (`now` passed in, no I/O).

`evaluate(telemetry, state, policy, now)` returns the host's decision and the state to keep
for the next sample, in the style of Ray Serve's autoscaling decisions:

* Each sample is judged into conditions (see `conditions`); the most severe one is
  the sample's *observed* lifecycle.
* Debounce: the committed (protective) lifecycle moves only when the last `debounce_samples`
  observations all lie on the same side of it. Escalation goes to the mildest of them (the
  restriction held throughout the window); recovery goes to the most severe of them (the
  recovery held throughout). A one-sample spike therefore never changes the state.
* Hysteresis: a condition in effect in the committed lifecycle (latched) leaves only when its
  reading passes the separate recovery threshold; a missing reading never proves recovery.
* Recovery cooldown: a move to a less restrictive lifecycle waits `recovery_cooldown_s` after
  the previous change; escalation never waits, so the host reacts to danger but cannot flap.
* Local override (drain, pause, quarantine) applies at once and until it expires, and outranks
  the controller's global desired state. The final lifecycle is the most restrictive of the
  override and the protective lifecycle, so a confirmed unsafe condition (critical thermal,
  critically low battery off AC, memory exhausted) can make an override stricter but nothing can
  turn it into accepting.
* A fresh state starts draining (`awaiting_samples`): a host admits no work before its own
  telemetry has confirmed it for `debounce_samples` samples.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grid.fleet import ADMITTING_STATES, HostState
from grid.node.protection.conditions import (
    SEVERITY,
    least_restrictive,
    most_restrictive,
    observe,
)
from grid.node.protection.model import (
    OVERRIDE_STATE,
    LocalOverride,
    ProtectionPolicy,
    Telemetry,
)

# Status reason codes (besides the condition codes of `conditions`).
AWAITING_SAMPLES = "awaiting_samples"
ESCALATION_PENDING = "escalation_pending"
RECOVERY_PENDING = "recovery_pending"
RECOVERY_COOLDOWN = "recovery_cooldown"
OVERRIDE_EXPIRED = "override_expired"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ProtectionState(_Frozen):
    """What the loop remembers between samples; persisted by the node agent as JSON."""

    lifecycle: HostState = HostState.DRAINING  # protective (telemetry) lifecycle, never quarantined
    changed_at: float | None = None  # None: never committed since start
    latched: frozenset[str] = frozenset()  # condition codes in effect in `lifecycle`
    recent: tuple[HostState, ...] = ()  # observed lifecycles, oldest first, at most the window


class Decision(_Frozen):
    """The host's local verdict for one sample."""

    lifecycle: HostState
    throttle_fraction: float = Field(ge=0.0, le=1.0)
    reasons: tuple[str, ...]  # stable codes: overrides first, then conditions, then status
    unsafe: bool  # an unsafe condition is in effect in the committed (debounced) lifecycle
    observed: HostState  # this sample alone, before debounce (for status displays)

    @property
    def admits_new_work(self) -> bool:
        return self.lifecycle in ADMITTING_STATES


def evaluate(
    telemetry: Telemetry, state: ProtectionState, policy: ProtectionPolicy, now: float
) -> tuple[Decision, ProtectionState]:
    """Judge one telemetry sample taken at `now` (the agent's monotonic or wall clock)."""
    observation = observe(telemetry, policy, state.latched)
    observed = observation.target
    window = (*state.recent, observed)[-policy.debounce_samples :]
    lifecycle, status = _debounced(state, window, policy, now)
    changed = lifecycle is not state.lifecycle
    # Latch what is in effect now: conditions at or below the committed lifecycle. A condition
    # more severe than it was seen but not yet confirmed, so it must still reach `enter`.
    latched = frozenset(
        c.code for c in observation.conditions if SEVERITY[c.severity] <= SEVERITY[lifecycle]
    )
    new_state = ProtectionState(
        lifecycle=lifecycle,
        changed_at=now if changed else state.changed_at,
        latched=latched,
        recent=window,
    )
    if new_state.changed_at is None and len(window) < policy.debounce_samples:
        status = (AWAITING_SAMPLES, *status)

    final, override_reasons = _with_override(lifecycle, telemetry.override, now)
    reasons = (*override_reasons, *(c.code for c in observation.conditions), *status)
    unsafe = any(c.unsafe and c.code in latched for c in observation.conditions)
    decision = Decision(
        lifecycle=final,
        throttle_fraction=_throttle_fraction(final, policy),
        reasons=tuple(dict.fromkeys(reasons)),
        unsafe=unsafe,
        observed=observed,
    )
    return decision, new_state


def _debounced(
    state: ProtectionState,
    window: tuple[HostState, ...],
    policy: ProtectionPolicy,
    now: float,
) -> tuple[HostState, tuple[str, ...]]:
    """The committed lifecycle after this sample, and a status code explaining a hold."""
    current = SEVERITY[state.lifecycle]
    full = len(window) >= policy.debounce_samples
    if all(SEVERITY[s] > current for s in window):
        if full:
            return least_restrictive(*window), ()
        return state.lifecycle, (ESCALATION_PENDING,)
    if all(SEVERITY[s] < current for s in window):
        if not full:
            return state.lifecycle, (RECOVERY_PENDING,)
        if not _cooled_down(state.changed_at, policy.recovery_cooldown_s, now):
            return state.lifecycle, (RECOVERY_COOLDOWN,)
        return most_restrictive(*window), ()
    latest = SEVERITY[window[-1]]
    if latest > current:
        return state.lifecycle, (ESCALATION_PENDING,)
    if latest < current:
        return state.lifecycle, (RECOVERY_PENDING,)
    return state.lifecycle, ()


def _cooled_down(changed_at: float | None, cooldown_s: float, now: float) -> bool:
    if changed_at is None:
        return True
    # A clock that went backwards gives no credit: elapsed time is never negative.
    return max(0.0, now - changed_at) >= cooldown_s


def _with_override(
    protective: HostState, override: LocalOverride | None, now: float
) -> tuple[HostState, tuple[str, ...]]:
    if override is None:
        return protective, ()
    if not override.active_at(now):
        return protective, (OVERRIDE_EXPIRED,)
    fenced = OVERRIDE_STATE[override.kind]
    return most_restrictive(protective, fenced), (f"override_{override.kind.value}",)


def _throttle_fraction(lifecycle: HostState, policy: ProtectionPolicy) -> float:
    if lifecycle is HostState.ACCEPTING:
        return 1.0
    if lifecycle is HostState.THROTTLED:
        return policy.throttle_fraction
    return 0.0
