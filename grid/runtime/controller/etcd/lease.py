"""The mutation lease on etcd: an etcd lease holds the leader key, a CAS counter holds the term.

Keys under the cluster prefix P:
    P/term      the highest term ever taken, a decimal number
    P/leader    {controller_id, term, url, acquired_at}, attached to the holder's etcd lease

A takeover is one transaction: it succeeds only if `P/leader` does not exist (the previous
holder's etcd lease expired or was revoked) and `P/term` still has the mod revision this
controller read, and it writes `P/term = max(read term, floor) + 1` and the leader key together.
Two controllers can therefore never take the same term: the second transaction finds the term's
revision moved. A renewal is a keep-alive of the etcd lease, then a check that the leader key
is still this controller's; the term never changes on a renewal unless the fleet reports a
higher one (`floor_term`), which is also taken by CAS. Every durable write of the controller
(`EtcdStore`) compares `P/term` and the leader key's lease, so once a takeover happened a
deposed leader's write fails.

`EtcdLease` has the file lease's face (`held`, `acquire`, `valid`, `release`, `ttl_s`,
`controller_id`) so `LeaseKeeper` and the controller use it unchanged. It takes the lease only
while `campaigning()` is open (the HA loop), so a standby never takes over from a request path.
The record's `expires_at` is counted from before the request that granted or renewed it, on
this controller's clock, so it never outlives etcd's own expiry.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from grid.fleet import GridError
from grid.runtime.controller.etcd.client import (
    KV,
    EtcdClient,
    cmp_absent,
    cmp_lease,
    cmp_mod,
    cmp_value,
    op_get,
    op_put,
)
from grid.runtime.controller.lease import LeaseDecision, LeaseRecord, authority_block


@dataclass(frozen=True)
class Fence:
    """What every write of the leader compares: its term and its etcd lease."""

    term: int
    lease_id: int


@dataclass(frozen=True)
class LeaderView:
    """The leader key and term as last read (controller_id "" when no controller leads)."""

    controller_id: str = ""
    term: int = 0
    url: str = ""
    term_revision: int = 0
    counter: int = 0  # the value of P/term


def next_term(counter: int, floor_term: int) -> int:
    """The term a takeover writes: above every term taken and the fleet's floor (pure)."""
    return max(counter, floor_term) + 1


def parse_leader(raw: bytes | None) -> tuple[str, int, str]:
    """(controller_id, term, url) of a leader key's value; ("", 0, "") when absent or foreign."""
    if not raw:
        return "", 0, ""
    try:
        data = json.loads(raw)
        return str(data["controller_id"]), int(data["term"]), str(data.get("url") or "")
    except (ValueError, KeyError, TypeError):
        return "", 0, ""


def parse_counter(raw: bytes | None) -> int:
    try:
        value = int(raw or b"0")
    except ValueError:
        return 0
    return max(0, value)


class EtcdLease:
    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        *,
        controller_id: str,
        url: str,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.controller_id = controller_id
        self.url = url
        self.ttl_s = ttl_s
        self.clock = clock
        self.held: LeaseRecord | None = None
        self.lease_id = 0
        self.view = LeaderView()
        self.error = ""  # the last etcd failure, "" once etcd answered again
        self._campaign = False

    @property
    def term_key(self) -> str:
        return f"{self.prefix}/term"

    @property
    def leader_key(self) -> str:
        return f"{self.prefix}/leader"

    def _ttl(self) -> int:
        return max(2, math.ceil(self.ttl_s))

    # ------------------------------------------------------------------ reading
    def observe(self) -> None:
        """Read the leader key and the term into `view`."""
        self.observe_kv()

    def observe_kv(self, *extra: str) -> list[KV | None]:
        """Read the leader key and the term (into `view`) and `extra` keys, in one request."""
        keys = [self.leader_key, self.term_key, *extra]
        result = self.client.txn([], [op_get(k) for k in keys])
        found = [rows[0] if rows else None for rows in result.ranges()]
        leader, term = found[0], found[1]
        who, leader_term, url = parse_leader(leader.value if leader else None)
        self.view = LeaderView(
            controller_id=who,
            term=leader_term,
            url=url,
            term_revision=term.mod_revision if term else 0,
            counter=parse_counter(term.value if term else None),
        )
        self.error = ""
        return found[2:]

    def fence(self, now: float | None = None) -> Fence | None:
        """The fence of a lease still valid on this controller's clock (None: do not write)."""
        held = self.held
        if held is None or held.expires_at <= (self.clock() if now is None else now):
            return None
        return Fence(held.term, self.lease_id)

    def valid(self, now: float) -> bool:
        return self.fence(now) is not None

    def authority(self, now: float, max_term: int) -> dict[str, object]:
        """The status `authority` block: a standby reports the last term it saw."""
        held = self.held
        if held is not None and self.valid(now):
            return authority_block("leader", held.term, self.controller_id, self.url)
        view = self.view
        url = view.url if view.controller_id and view.controller_id != self.controller_id else None
        term = max(view.term, view.counter, max_term)
        return authority_block("standby", term, self.controller_id, url or None)

    @contextlib.contextmanager
    def campaigning(self) -> Iterator[None]:
        """Within this block `acquire` may take the lease over; outside it only renews."""
        self._campaign = True
        try:
            yield
        finally:
            self._campaign = False

    # ------------------------------------------------------------------ acquiring
    def acquire(self, now: float, *, floor_term: int = 0) -> LeaseDecision:
        try:
            if self.held is not None:
                renewed = self._renew(floor_term)
                if renewed is not None:
                    return renewed
            if not self._campaign:
                self.held = None
                return LeaseDecision(granted=False, record=None, reason=self._holder())
            return self._take(now, floor_term)
        except GridError as err:
            self.error = f"{err.code}: {err.message}"
            if self.held is not None and self.held.expires_at <= self.clock():
                self.held = None
            raise GridError(
                "lease_unavailable",
                f"the mutation lease in etcd cannot be renewed or taken ({err.message})",
                fix=err.fix or "bring the etcd cluster back",
                next_command="grid allocator status",
            ) from None

    def _holder(self) -> str:
        view = self.view
        if view.controller_id:
            return f"controller {view.controller_id} holds term {view.term} ({view.url or '?'})"
        return "no controller holds the lease yet; this controller waits as a standby"

    def _renew(self, floor_term: int) -> LeaseDecision | None:
        held = self.held
        assert held is not None
        sent = self.clock()
        ttl = self.client.keepalive(self.lease_id)
        if ttl <= 0:
            self.held = None
            return None
        term = held.term
        compare = [cmp_value(self.term_key, str(term)), cmp_lease(self.leader_key, self.lease_id)]
        ops = []
        if floor_term > term:  # the fleet has seen a higher term: take one above it, by CAS
            term = floor_term
            ops = [op_put(self.term_key, str(term)), self._leader_put(term, held.acquired_at)]
        if not self.client.txn(compare, ops).succeeded:
            self.held = None
            return None
        self.held = LeaseRecord(
            controller_id=self.controller_id,
            term=term,
            expires_at=sent + ttl,
            acquired_at=held.acquired_at,
        )
        self.view = LeaderView(self.controller_id, term, self.url, self.view.term_revision, term)
        return LeaseDecision(granted=True, record=self.held)

    def _leader_put(self, term: int, acquired_at: float) -> dict[str, object]:
        value = json.dumps(
            {
                "controller_id": self.controller_id,
                "term": term,
                "url": self.url,
                "acquired_at": acquired_at,
            }
        )
        return op_put(self.leader_key, value, self.lease_id)

    def _take(self, now: float, floor_term: int) -> LeaseDecision:
        self.observe()
        view = self.view
        if view.controller_id == self.controller_id and self.lease_id:
            # The leader key is still ours (a renewal failed in transit): adopt it again.
            self.held = LeaseRecord(self.controller_id, view.term, self.clock(), now)
            renewed = self._renew(floor_term)
            if renewed is not None:
                return renewed
        if view.controller_id and view.controller_id != self.controller_id:
            self.held = None
            return LeaseDecision(granted=False, record=None, reason=self._holder())
        sent = self.clock()
        if self.lease_id == 0 or self.client.keepalive(self.lease_id) <= 0:
            self.lease_id, _ttl = self.client.grant(self._ttl())
        term = next_term(view.counter, floor_term)
        compare = [cmp_absent(self.leader_key)]
        compare.append(
            cmp_mod(self.term_key, view.term_revision)
            if view.term_revision
            else cmp_absent(self.term_key)
        )
        result = self.client.txn(
            compare, [op_put(self.term_key, str(term)), self._leader_put(term, now)]
        )
        if not result.succeeded:
            self.held = None
            self.observe()
            return LeaseDecision(granted=False, record=None, reason=self._holder())
        self.held = LeaseRecord(
            controller_id=self.controller_id,
            term=term,
            expires_at=sent + self._ttl(),
            acquired_at=now,
        )
        self.view = LeaderView(self.controller_id, term, self.url, result.revision, term)
        return LeaseDecision(granted=True, record=self.held, takeover=True)

    def release(self) -> None:
        """Give the lease up (a clean shutdown): the leader key goes, the term stays."""
        if self.lease_id:
            with contextlib.suppress(GridError):
                self.client.revoke(self.lease_id)
        self.held = None
        self.lease_id = 0
