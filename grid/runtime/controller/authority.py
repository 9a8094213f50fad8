"""The controller's authority to mutate: the mutation lease and the post-restart grace.

`LeaseKeeper` renews the lease file when less than the renew fraction of its TTL is left and
reports why automatic commands are held otherwise (into the warnings it is given). `Grace`
suppresses destructive work, and constructive work beyond the ready set (`held_in_grace`), for
`membership_grace_s` after a restored start, anchored at the
first tick and rebased if the clock moves back. Both take `now`; the lease file is the only
side effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from grid.fleet import (
    CONSTRUCTIVE_KINDS,
    DESTRUCTIVE_KINDS,
    Action,
    ActionRecord,
    FleetSnapshot,
    GridError,
    ResidencyState,
)
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.lease import Lease, LeaseFile, LeaseRecord
from grid.runtime.controller.live_state import Warnings
from grid.runtime.controller.trust import Standing, standings

# Why automatic commands are held; a granted lease clears them all, so none is left stale.
LEASE_WARNINGS = ("no_lease", "lease_held", "lease_unavailable")


class LeaseKeeper:
    def __init__(self, lease: Lease | None, warnings: Warnings) -> None:
        self.lease = lease
        self.warnings = warnings
        # Why the last `ensure` returned None: the code of the warning it left ("" after a
        # success), so a caller can refuse with the real cause (e.g. `lease_unavailable`).
        self.refusal = ""

    @property
    def held(self) -> LeaseRecord | None:
        return self.lease.held if self.lease is not None else None

    def _refuse(self, code: str, message: str) -> None:
        for other in LEASE_WARNINGS:
            if other != code:
                self.warnings.pop(other, None)
        self.warnings.warn(code, message)
        self.refusal = code

    def ensure(self, now: float, config: ControllerConfig, floor_term: int) -> int | None:
        """The term of a valid (renewed if due) lease, or None: automatic commands are held
        (`refusal` names why). A success clears every lease warning: none is left stale."""
        if self.lease is None:
            self._refuse("no_lease", "no lease file is configured, so automatic commands are held")
            return None
        held = self.lease.held
        ttl = config.lease_ttl_s
        fresh = held is not None and held.expires_at - now > ttl * config.lease_renew_fraction
        if held is not None and fresh and held.term >= floor_term:
            return held.term
        try:
            decision = self.lease.acquire(now, floor_term=floor_term)
        except GridError as err:
            self._refuse(err.code, err.message)
            return None
        if not decision.granted or self.lease.held is None:
            self._refuse(
                "lease_held",
                f"another controller holds the mutation lease: "
                f"{decision.reason}; automatic commands are held",
            )
            return None
        for code in LEASE_WARNINGS:
            self.warnings.pop(code, None)
        if isinstance(self.lease, LeaseFile) and self.lease.unreadable:  # replaced: it stays
            self.warnings.warn(
                "lease_file_unreadable",
                f"the lease file {self.lease.path} could not be read "
                f"({self.lease.unreadable}); it counted as expired and was replaced by this "
                f"controller's lease at term {self.lease.held.term}",
            )
        self.refusal = ""
        return self.lease.held.term

    def refusal_error(self) -> GridError:
        """Why automatic mode cannot take the lease, with the real cause (a lease file that
        cannot be written is not another controller holding it)."""
        if self.refusal == "lease_unavailable":
            why = self.warnings.get("lease_unavailable", "the lease file cannot be written")
            return GridError(
                "lease_unavailable",
                f"automatic mode needs the mutation lease, and {why[:1].lower()}{why[1:]}",
                fix="fix the permissions (or free space) of the state folder, then retry",
                next_command="grid allocator mode automatic",
            )
        return GridError(
            "lease_held",
            "another controller holds the mutation lease for this state file",
            fix="stop the other controller, or wait for its lease to expire",
        )

    def authority(self, now: float, max_term: int, controller_id: str) -> dict[str, object]:
        """Who may mutate (status `authority`): role, term, controller id, leader URL."""
        if self.lease is None:
            return {
                "role": "leader",
                "term": max_term,
                "controller_id": controller_id,
                "leader_url": None,
            }
        return self.lease.authority(now, max_term)

    def ttl(self, now: float) -> float:
        held = self.held
        return 0.0 if held is None else max(0.0, held.expires_at - now)

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()


@dataclass
class Grace:
    restored: bool
    anchor: float | None = None

    def active(self, now: float, grace_s: float) -> bool:
        if not self.restored:
            return False
        if self.anchor is None:
            return True
        return now < self.anchor + grace_s

    def start(self, now: float) -> None:
        """The anchor starts at the first tick; a clock that moved back rebases it."""
        if self.restored and (self.anchor is None or now < self.anchor):
            self.anchor = now

    def until(self, grace_s: float) -> float | None:
        return None if self.anchor is None else self.anchor + grace_s

    def settling(self, now: float, settle_s: float) -> bool:
        """The first `settle_s` of the grace, while live hosts are still re-registering (each
        heartbeats every few seconds): replicas the restored book places on absent hosts are
        waited for (`awaited_models`)."""
        if not self.restored or self.anchor is None:
            return self.restored
        return now < self.anchor + settle_s


def held_in_grace(
    actions: list[Action], snap: FleetSnapshot, awaited: Set[str] = frozenset()
) -> list[Action]:
    """What the post-restart grace holds: destructive work, and constructive work for a model
    that already has a READY replica among the re-registered hosts (the hosts not yet back may
    hold more; warming beyond the ready set now would only be undone once they return) or that
    is `awaited` (`awaited_models`). A model with no READY replica anywhere in view and none
    awaited is still restored at once."""
    ready = {
        r.model_id for h in snap.hosts for r in h.residencies if r.state is ResidencyState.READY
    }
    held = ready | set(awaited)
    return [a for a in actions if a.kind in DESTRUCTIVE_KINDS or a.model_id in held]


def awaited_models(records: Iterable[ActionRecord], registered: Set[str]) -> set[str]:
    """Models the restored command book places on a host that has not re-registered yet (its
    newest WARM was taken, no DRAIN or UNLOAD after it): that host may be running it or about
    to. While the fleet settles after a restart, a replica elsewhere would be one too many (a
    controller SIGKILLed just after delivering a replacement ran 3 replicas for max 2)."""
    records = list(records)
    hosts = {r.host_id for r in records} - set(registered)
    return {
        model_id
        for host_id in sorted(hosts)
        for model_id, standing in standings(records, host_id).items()
        if standing is Standing.COMMANDED
    }


def restored_in_flight(records: Iterable[ActionRecord], anchor: float | None) -> set[str]:
    """Models with a constructive command that a controller before this one delivered and that
    has no receipt yet (it may be running): this controller's first plan, solved afresh, can
    pick another host for the same replica."""
    if anchor is None:
        return set()
    return {
        r.model_id
        for r in records
        if r.kind in CONSTRUCTIVE_KINDS and r.is_open and r.was_delivered and r.created_at < anchor
    }


def held_after_restart(
    actions: list[Action],
    snap: FleetSnapshot,
    records: Iterable[ActionRecord],
    registered: Set[str],
    grace: Grace,
    config: ControllerConfig,
    now: float,
) -> list[Action]:
    """What a restored controller holds back: the grace (`held_in_grace`, with the replicas
    the restored book places on hosts not back yet while the fleet settles), and, for
    `restart_inflight_wait_s` after its first tick, constructive work for a model that already
    has a READY replica and a replica in flight from before the restart, until that one
    answers (a SIGKILL during a replacement's delivery ran 3 replicas for max 2)."""
    records = list(records)
    held: list[Action] = []
    if grace.active(now, config.membership_grace_s):
        awaited: set[str] = set()
        if grace.settling(now, config.membership_settle_s):
            awaited = awaited_models(records, registered)
        held = held_in_grace(actions, snap, awaited)
    anchor = grace.anchor
    if grace.restored and anchor is not None and now < anchor + config.restart_inflight_wait_s:
        ready = {
            r.model_id for h in snap.hosts for r in h.residencies if r.state is ResidencyState.READY
        }
        waiting = restored_in_flight(records, anchor) & ready
        held += [
            a
            for a in actions
            if a not in held and a.kind not in DESTRUCTIVE_KINDS and a.model_id in waiting
        ]
    return held
