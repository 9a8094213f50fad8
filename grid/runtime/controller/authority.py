"""The controller's authority to mutate: the mutation lease and the post-restart grace.

`LeaseKeeper` renews the lease file when less than the renew fraction of its TTL is left and
reports why automatic commands are held otherwise (into the warnings it is given). `Grace`
suppresses destructive work, and constructive work beyond the ready set (`held_in_grace`), for
`membership_grace_s` after a restored start, anchored at the
first tick and rebased if the clock moves back. Both take `now`; the lease file is the only
side effect.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet.actions import DESTRUCTIVE_KINDS, Action
from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot, ResidencyState
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.lease import Lease, LeaseRecord
from grid.runtime.controller.live_state import Warnings


class LeaseKeeper:
    def __init__(self, lease: Lease | None, warnings: Warnings) -> None:
        self.lease = lease
        self.warnings = warnings

    @property
    def held(self) -> LeaseRecord | None:
        return self.lease.held if self.lease is not None else None

    def ensure(self, now: float, config: ControllerConfig, floor_term: int) -> int | None:
        """The term of a valid (renewed if due) lease, or None: automatic commands are held."""
        if self.lease is None:
            self.warnings.warn(
                "no_lease", "no lease file is configured, so automatic commands are held"
            )
            return None
        held = self.lease.held
        ttl = config.lease_ttl_s
        fresh = held is not None and held.expires_at - now > ttl * config.lease_renew_fraction
        if held is not None and fresh and held.term >= floor_term:
            return held.term
        try:
            decision = self.lease.acquire(now, floor_term=floor_term)
        except GridError as err:
            self.warnings.warn(err.code, err.message)
            return None
        if not decision.granted or self.lease.held is None:
            self.warnings.warn(
                "lease_held",
                f"another controller holds the mutation lease: "
                f"{decision.reason}; automatic commands are held",
            )
            return None
        self.warnings.pop("lease_held", None)
        return self.lease.held.term

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


def held_in_grace(actions: list[Action], snap: FleetSnapshot) -> list[Action]:
    """What the post-restart grace holds: destructive work, and constructive work for a model
    that already has a READY replica among the re-registered hosts (the hosts not yet back may
    hold more; warming beyond the ready set now would only be undone once they return). A model
    with no READY replica anywhere in view is still restored at once."""
    ready = {
        r.model_id for h in snap.hosts for r in h.residencies if r.state is ResidencyState.READY
    }
    return [a for a in actions if a.kind in DESTRUCTIVE_KINDS or a.model_id in ready]
