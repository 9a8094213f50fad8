"""What a node's word is worth: the controller's trust rules for node reports (pure).

A node credential speaks for its own host only. What a host reports about itself (resources,
residency rows, lifecycle) is its own business; what it reports that would steer the rest of the
fleet is believed only when the controller can check it:

- **Attestations.** The controller signs two facts it hands a node (HMAC-SHA256 under a key
  derived from its node-signing key, `Attestor`): the term a command was delivered under
  (`term_proof`, on every command) and a route grant for each WARM (`grant`, bound to the host
  and the model). A node keeps them durably and echoes them in its heartbeats (the fence's
  `term_proof`, each route's `grant`). A node cannot make one, and a controller that lost its
  state (but not its config) can still check one, because the key survives in config.json.
- **Term rule** (`foreign_floor`, `term_suspicious`). A term another controller gave a node is
  adopted only with a valid proof: the controller's own durable term (state and lease file) and
  the proofs decide, never a node's word alone. An unproven report above the controller's own
  term is a suspicion naming the host; it moves nothing.
- **Route rule** (`route_verdict`). A route is accepted only for a residency the controller
  commanded (a valid grant, or a delivered WARM in the command book) or an operator registered
  (the model's profile pins it to the host), and never after the book delivered a DRAIN or
  UNLOAD of that residency. A refused route is not routable, does not prove a READY row (so the
  reconciler does not count it) and cannot displace a verified route.
- **Suspicions** name the host in status (`suspicious_node`), bounded and expiring.
- **Heartbeat budget**: a token bucket per host bounds what one credential can make the
  controller do (`HeartbeatBudget`).

Every function takes `now`; nothing here does I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from grid.fleet import ActionKind, ActionRecord, RecordStatus

MAX_PROOF_CHARS = 128
MAX_SUSPECT_HOSTS = 1024
MAX_SUSPICIONS_PER_HOST = 8
MAX_BUDGET_HOSTS = 4096


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class Attestor:
    """Signs and checks the facts the controller hands nodes (never output, never logged)."""

    key: bytes = field(repr=False)

    @classmethod
    def ephemeral(cls) -> Attestor:
        """A key of this process only (a controller built without one, e.g. in a test)."""
        return cls(secrets.token_bytes(32))

    @classmethod
    def derived(cls, secret: str) -> Attestor:
        """The key every controller sharing `secret` (the node-signing key) derives alike."""
        return cls(hmac.new(secret.encode(), b"grid-attest-v1", hashlib.sha256).digest())

    def _mac(self, text: str) -> str:
        return _b64(hmac.new(self.key, text.encode(), hashlib.sha256).digest())

    def _check(self, text: str, presented: object) -> bool:
        if not isinstance(presented, str) or not presented or len(presented) > MAX_PROOF_CHARS:
            return False
        return hmac.compare_digest(self._mac(text).encode(), presented.encode("ascii", "replace"))

    def term_proof(self, term: int, controller_id: str) -> str:
        return self._mac(f"grid-term-v1|{term}|{controller_id}")

    def grant(self, host_id: str, model_id: str) -> str:
        return self._mac(f"grid-grant-v1|{host_id}|{model_id}")

    def proves_term(self, term: int, controller_id: str, proof: object) -> bool:
        return term > 0 and self._check(f"grid-term-v1|{term}|{controller_id}", proof)

    def proves_grant(self, host_id: str, model_id: str, grant: object) -> bool:
        return self._check(f"grid-grant-v1|{host_id}|{model_id}", grant)


# ----------------------------------------------------------------------------- terms


@dataclass(frozen=True)
class FenceReport:
    """A host's fence as it reports it, and whether a valid proof came with it."""

    host_id: str
    term: int
    controller_id: str
    proven: bool


def foreign_floor(reports: Iterable[FenceReport], controller_id: str) -> tuple[int, str]:
    """The highest *proven* term a host accepted from another controller, and that host (0 and
    "" when none): a controller that lost its state takes a term above it."""
    best = (0, "")
    for report in sorted(reports, key=lambda r: r.host_id):
        if report.proven and report.controller_id != controller_id and report.term > best[0]:
            best = (report.term, report.host_id)
    return best


def term_suspicious(report: FenceReport, own_term: int) -> bool:
    """An unproven term above this controller's own one: a node's word alone, which moves
    nothing and names the host (an unproven term at or below it is an older node's fence)."""
    return not report.proven and report.term > own_term


# ----------------------------------------------------------------------------- routes


class Standing(StrEnum):
    """What the command book says about one (host, model) residency."""

    NONE = "none"  # the book knows no WARM, DRAIN or UNLOAD of it
    COMMANDED = "commanded"  # the newest one is a WARM the node took
    RETRACTED = "retracted"  # the newest one is a DRAIN or UNLOAD the node took


_TAKEN = frozenset({RecordStatus.DELIVERED, RecordStatus.RUNNING, RecordStatus.SUCCEEDED})
_RETRACTING = frozenset({ActionKind.DRAIN, ActionKind.UNLOAD})


def standings(records: Iterable[ActionRecord], host_id: str) -> dict[str, Standing]:
    """Per model of `host_id`: the standing of its newest WARM, DRAIN or UNLOAD the node took
    (delivered, running or succeeded; a withdrawn one that was delivered may still run)."""
    newest: dict[str, tuple[float, str, Standing]] = {}
    for record in records:
        if record.host_id != host_id:
            continue
        if record.kind is not ActionKind.WARM and record.kind not in _RETRACTING:
            continue
        taken = record.status in _TAKEN or (
            record.status is RecordStatus.WITHDRAWN
            and record.was_delivered
            and record.finished_at is None
        )
        if not taken:
            continue
        standing = Standing.RETRACTED if record.kind in _RETRACTING else Standing.COMMANDED
        key = (record.delivered_at or record.created_at, record.action_id, standing)
        if record.model_id not in newest or key[:2] > newest[record.model_id][:2]:
            newest[record.model_id] = key
    return {m: entry[2] for m, entry in newest.items()}


ROUTE_TEXT = {
    "route_retracted": "it was told to drain or unload that model, so the route is not used",
    "route_not_commanded": "this controller never commanded that residency and no operator "
    "registered it (a pin), so the route is not used",
}


def route_verdict(
    host_id: str,
    model_id: str,
    grant: object,
    *,
    attestor: Attestor,
    standing: Standing,
    pinned: bool,
) -> str:
    """The empty string when the route is accepted, else the reason code (`ROUTE_TEXT`)."""
    if standing is Standing.RETRACTED:
        return "route_retracted"
    if standing is Standing.COMMANDED or pinned or attestor.proves_grant(host_id, model_id, grant):
        return ""
    return "route_not_commanded"


@dataclass(frozen=True)
class RouteJudge:
    """The facts one host's routes are judged by (built by the controller per update)."""

    attestor: Attestor
    standing: Mapping[str, Standing]
    pinned: frozenset[str]

    def verdict(self, host_id: str, model_id: str, grant: object) -> str:
        return route_verdict(
            host_id,
            model_id,
            grant,
            attestor=self.attestor,
            standing=self.standing.get(model_id, Standing.NONE),
            pinned=model_id in self.pinned,
        )


# ----------------------------------------------------------------------------- suspicions


@dataclass
class Suspicion:
    code: str
    message: str
    first_at: float
    last_at: float
    count: int = 1

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "message": self.message,
            "count": self.count,
            "first_at": self.first_at,
            "last_at": self.last_at,
        }


class Suspicions:
    """What each host reported that the controller did not believe (bounded, expiring).

    Not under the controller lock: callers serialize through their own (`note` is cheap and a
    flooding host must not contend for the controller's lock)."""

    def __init__(self, ttl_s: float = 600.0) -> None:
        self.ttl_s = ttl_s
        self._by_host: dict[str, dict[str, Suspicion]] = {}

    def note(self, host_id: str, code: str, message: str, now: float) -> None:
        rows = self._by_host.get(host_id)
        if rows is None:
            if len(self._by_host) >= MAX_SUSPECT_HOSTS:
                self.prune(now)
                if len(self._by_host) >= MAX_SUSPECT_HOSTS:
                    return
            rows = self._by_host[host_id] = {}
        row = rows.get(code)
        if row is None:
            if len(rows) >= MAX_SUSPICIONS_PER_HOST:
                return
            rows[code] = Suspicion(code, message[:400], now, now)
            return
        row.count += 1
        row.last_at = max(row.last_at, now)
        row.message = message[:400]

    def prune(self, now: float) -> None:
        for host_id in list(self._by_host):
            rows = self._by_host[host_id]
            for code in [c for c, r in rows.items() if now - r.last_at > self.ttl_s]:
                del rows[code]
            if not rows:
                del self._by_host[host_id]

    def of(self, host_id: str, now: float) -> list[Suspicion]:
        rows = self._by_host.get(host_id, {})
        return [rows[c] for c in sorted(rows) if now - rows[c].last_at <= self.ttl_s]

    def hosts(self, now: float) -> list[str]:
        return sorted(h for h in self._by_host if self.of(h, now))

    def warning(self, now: float) -> str:
        """The `suspicious_node` warning's sentence ("" when no host is suspect)."""
        parts = []
        for host_id in self.hosts(now)[:8]:
            rows = self.of(host_id, now)
            codes = ", ".join(f"{r.code} x{r.count}" for r in rows)
            parts.append(f"host {host_id} ({codes}): {rows[0].message}")
        if not parts:
            return ""
        more = len(self.hosts(now)) - len(parts)
        tail = f"; and {more} more hosts" if more > 0 else ""
        return (
            "a node credential reported what this controller does not believe, and it was "
            "not acted on; if the host is not yours, revoke its credential "
            "(grid allocator node-credential revoke --host-id ID): " + "; ".join(parts) + tail
        )


# ----------------------------------------------------------------------------- heartbeats


class HeartbeatBudget:
    """A token bucket per host: `burst` updates at once, refilled at `rate_per_s`. A real node
    sends one control heartbeat per interval (2 s by default) and a few fence heartbeats, far
    inside the default budget; a host over it is refused (429) before the controller does any
    work for it. Not thread-safe: the caller holds a lock."""

    def __init__(self, rate_per_s: float = 10.0, burst: int = 40) -> None:
        self.rate_per_s = rate_per_s
        self.burst = float(max(1, burst))
        self._buckets: dict[str, tuple[float, float]] = {}  # host -> (tokens, at)

    def admit(self, host_id: str, now: float) -> bool:
        tokens, at = self._buckets.get(host_id, (self.burst, now))
        tokens = min(self.burst, tokens + max(0.0, now - at) * self.rate_per_s)
        admitted = tokens >= 1.0 - 1e-9  # a whole token, up to float rounding of the refill
        if admitted:
            tokens -= 1.0
        if host_id not in self._buckets and len(self._buckets) >= MAX_BUDGET_HOSTS:
            self._evict(now)
        self._buckets[host_id] = (tokens, now)
        return admitted

    def _evict(self, now: float) -> None:
        """Forget buckets that have refilled (they hold no debt)."""
        full = [
            h
            for h, (tokens, at) in self._buckets.items()
            if tokens + (now - at) * self.rate_per_s >= self.burst
        ]
        for host_id in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[host_id]
