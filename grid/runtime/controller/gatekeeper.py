"""The controller's gate for node reports: it applies the rules of `trust.py` to each update.

`Gatekeeper` owns the attestation key, the per-host heartbeat budget and the suspicions; the
controller calls it (under its lock) to judge one host's routes (`judge`), to note what the
update claimed that was not believed (`review`), to keep the fleet-term warning current
(`fleet_term_warning`) and to attest the commands it delivers (`attest`). Status reads the
suspicions (`suspicious_node`, and each host's `suspicions`). No I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from grid.fleet import ActionKind, ActionRecord, GridError, ModelProfile
from grid.runtime.controller.commands import AckOutcome, AckResult
from grid.runtime.controller.live_state import Warnings
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.trust import (
    ROUTE_TEXT,
    Attestor,
    HeartbeatBudget,
    RouteJudge,
    Suspicions,
    standings,
    term_suspicious,
)

SUSPICIOUS = "suspicious_node"
SUSPECT_WINDOW_S = 60.0


class Gatekeeper:
    def __init__(
        self,
        attestor: Attestor,
        *,
        rate_per_s: float = 10.0,
        burst: int = 40,
        suspicion_ttl_s: float = 600.0,
        poll_tick_rate_per_s: float = 2.0,
        poll_tick_burst: int = 10,
        suspect_rate_per_s: float = 1.0,
    ) -> None:
        self.attestor = attestor
        self.suspicions = Suspicions(suspicion_ttl_s)
        self.budget = HeartbeatBudget(rate_per_s, burst)
        # A suspect's reports are taken at a trickle: each one that changes its view costs
        # every later tick a fresh plan, so a liar cannot keep the planner busy.
        self.suspect_budget = HeartbeatBudget(suspect_rate_per_s, 2)
        self.tick_budget = HeartbeatBudget(poll_tick_rate_per_s, poll_tick_burst)
        self._lock = threading.Lock()  # the budget and suspicions: never the controller lock

    # -- before any work -------------------------------------------------------------------
    def admit(self, host_id: str, now: float) -> bool:
        """Whether this host's update may be processed now (its heartbeat budget, and the
        stricter one of a suspect); a refusal is noted as a suspicion naming the host."""
        suspect = self.suspect(host_id, now)
        with self._lock:
            admitted = self.budget.admit(host_id, now)
            if admitted and (not suspect or self.suspect_budget.admit(host_id, now)):
                return True
            rate = self.suspect_budget.rate_per_s if suspect else self.budget.rate_per_s
            self.suspicions.note(
                host_id,
                "heartbeat_flood",
                f"it sends updates faster than {rate:g} per second (the budget of "
                f"{'a suspect' if suspect else 'a host'}); the excess is refused with 429",
                now,
            )
            return False

    def suspect(self, host_id: str, now: float) -> bool:
        """Noted for something it reported in the last `SUSPECT_WINDOW_S`: its updates then
        ask for no pass of their own (the periodic pass still reads them)."""
        with self._lock:
            return any(
                now - s.last_at <= SUSPECT_WINDOW_S for s in self.suspicions.of(host_id, now)
            )

    def may_force_tick(self, host_id: str, now: float) -> bool:
        """Whether this host's command poll may run a tick of its own now: not a suspect, and
        within its poll-tick budget; otherwise the poll gets no commands this time."""
        if self.suspect(host_id, now):
            return False
        with self._lock:
            return self.tick_budget.admit(host_id, now)

    def note(self, host_id: str, code: str, message: str, now: float) -> None:
        with self._lock:
            self.suspicions.note(host_id, code, message, now)

    # -- one update (under the controller lock) --------------------------------------------
    def judge(
        self, host_id: str, records: Iterable[ActionRecord], profiles: Mapping[str, ModelProfile]
    ) -> RouteJudge:
        pinned = frozenset(m for m, p in profiles.items() if host_id in p.pinned_hosts)
        return RouteJudge(self.attestor, standings(records, host_id), pinned)

    def review(
        self,
        registry: Registry,
        host_id: str,
        refused_routes: Mapping[str, str],
        own_term: int,
        now: float,
    ) -> None:
        """Note what one update claimed and was not believed: refused routes, and a fence
        term above this controller's own without a proof."""
        for model_id, code in sorted(refused_routes.items()):
            self.note(
                host_id, code, f"it reported a route for {model_id[:64]!r}: {ROUTE_TEXT[code]}", now
            )
        entry = registry.hosts.get(host_id)
        if entry is None:
            return
        report = next(r for r in registry.fences() if r.host_id == host_id)
        if term_suspicious(report, own_term):
            self.note(
                host_id,
                "term_unproven",
                f"it reported controller term {report.term} (from {report.controller_id[:32]!r}) "
                f"without a valid proof; this controller stays at term {own_term}",
                now,
            )

    def refused(self, host_id: str, err: GridError, node_id: str, now: float) -> None:
        """An update refused for naming what is not the host's own (`wrong_host`)."""
        if err.code == "wrong_host":
            self.note(
                host_id,
                "wrong_host",
                f"it tried to report as another host (record {node_id[:64]!r}); refused",
                now,
            )

    def receipts(self, host_id: str, outcomes: Iterable[AckOutcome], now: float) -> None:
        """Receipts for commands of other hosts (replayed ids): refused, and noted."""
        foreign = [o.action_id for o in outcomes if o.result is AckResult.WRONG_HOST]
        if foreign:
            self.note(
                host_id,
                "receipt_of_another_host",
                f"it sent receipts for {len(foreign)} command(s) of other hosts "
                f"(e.g. {foreign[0][:48]!r}); they were ignored",
                now,
            )

    def fleet_term_warning(
        self, registry: Registry, controller_id: str, own_term: int, warnings: Warnings
    ) -> None:
        """Warn while a node remembers a proven term this controller has not passed."""
        foreign, host_id = registry.foreign_term(controller_id)
        if foreign and foreign >= own_term:
            warnings.warn(
                "fleet_term_ahead",
                f"host {host_id} has accepted controller term {foreign} from another "
                f"controller, and this controller is at term {own_term}; its commands would be "
                "refused as stale, so automatic mode takes a higher term at the next lease "
                "renewal",
            )
        else:
            warnings.pop("fleet_term_ahead", None)

    # -- delivery --------------------------------------------------------------------------
    def attest(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each delivered command with the proof of its term, and a WARM with its grant."""
        for command in commands:
            command["term_proof"] = self.attestor.term_proof(
                int(command.get("controller_term") or 0), str(command.get("controller_id") or "")
            )
            if command.get("kind") == ActionKind.WARM.value:
                host = str(command.get("host_id") or "")
                command["grant"] = self.attestor.grant(host, str(command.get("model_id") or ""))
        return commands

    # -- status ----------------------------------------------------------------------------
    def warning(self, now: float) -> str:
        with self._lock:
            return self.suspicions.warning(now)

    def of(self, host_id: str, now: float) -> list[dict[str, object]]:
        with self._lock:
            return [s.to_dict() for s in self.suspicions.of(host_id, now)]

    def suspects(self, now: float) -> dict[str, list[dict[str, object]]]:
        with self._lock:
            return {
                h: [s.to_dict() for s in self.suspicions.of(h, now)]
                for h in self.suspicions.hosts(now)
            }
