"""Why a model is short of its desired replicas, and the smallest change that would admit one.

For every model below its target, entries whose missing_replicas add up to the shortfall:
    pinned_host_unavailable    a pin names a host missing from the snapshot or not admitting
    pinned_host_insufficient   a pin names an admitting host that cannot hold the replica
    preemption_staged          a staged eviction frees memory for it (placed once proven free)
    no_eligible_host           no host passes the static filters (one binding per reason code)
    insufficient_capacity      eligible hosts exist but none has room
and failure_domain_shortfall (missing_replicas 0) when the replicas span too few domains.
Bindings name the constraint family, the host and the amounts. They come from a CP-SAT
infeasibility core (cpsat/assumptions.py: other models keep their levels-1–2 replicas) over at
most LOCAL_KEYS candidates, for the first CPSAT_MODELS models (both in explain_bindings.py)
within a deterministic work budget (deadline.CALIBRATION: core_work_per_model,
core_work_total), and from the static ledger otherwise.
`would_fit_if` is the single host whose blockers (or refusals) are fewest and smallest. Out of
time (deadline.explanation_margin_s), a capacity entry uses the static ledger and says so.
Bounded work: once the deadline leaves only `floor_s` (the phases after the explanations), or
once shortened entries have asked the ledger about CALIBRATION.explain_scan_max open hosts,
capacity and domain entries are *summarised*: the ledger on the model's first
explain_summary_hosts open hosts in candidate order, and the entry says so (SUMMARISED_NOTE;
the plan document counts them).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice

from grid.fleet import Binding, ModelProfile, Preemption, Unsatisfied
from grid.planner.cpsat import Blocker, Ledger
from grid.planner.deadline import (
    CALIBRATION,
    SHORTENED_NOTE,
    SUMMARISED_NOTE,
    Deadline,
    explanation_margin_s,
)
from grid.planner.eligibility import REASON_TEXT
from grid.planner.explain_bindings import FAMILY_ORDER, LOCAL_HOSTS, MAX_BINDINGS, Bindings
from grid.planner.levels import placed_counts
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]


def explain_unsatisfied(
    problem: PlacementProblem,
    placed: set[Key],
    preemptions: list[Preemption],
    deadline: Deadline | None = None,
    floor_s: float = 0.0,
) -> list[Unsatisfied]:
    """`floor_s`: what the phases after the explanations need of the deadline; entries are
    summarised once only that is left."""
    explainer = _Explainer(
        problem, {k for k in placed if k in problem.candidates}, preemptions, deadline, floor_s
    )
    out: list[Unsatisfied] = []
    for profile in problem.models:
        out += explainer.entries(profile)
    return out


@dataclass(frozen=True)
class _Change:
    """A candidate fix on one host: its blockers, ranked by how small the change is.

    When both memory ledgers block, more physical memory relieves both: they count as one
    change, sized for the larger need (the live ledger also loses the headroom share).
    """

    host_id: str
    blockers: tuple[Blocker, ...]
    headroom_fraction: float = 0.0

    def effective(self) -> tuple[Blocker, ...]:
        families = {b.family for b in self.blockers}
        if not {"memory", "live_memory"} <= families:
            return self.blockers
        memory = next(b for b in self.blockers if b.family == "memory")
        live = next(b for b in self.blockers if b.family == "live_memory")
        scale = 1.0 - self.headroom_fraction if self.headroom_fraction < 1.0 else 1.0
        need = max(memory.deficit, math.ceil(live.deficit / scale))
        merged = Blocker("memory", self.host_id, memory.free + need, memory.free)
        rest = tuple(b for b in self.blockers if b.family not in ("memory", "live_memory"))
        return (merged, *rest)

    def rank(self) -> tuple[int, int, int, str]:
        effective = self.effective()
        families = [FAMILY_ORDER.index(b.family) for b in effective if b.family in FAMILY_ORDER]
        return (len(effective), min(families, default=99), self.amount(), self.host_id)

    def amount(self) -> int:
        return sum(b.deficit for b in self.effective())


class _Explainer(Bindings):
    def __init__(
        self,
        problem: PlacementProblem,
        placed: set[Key],
        preemptions: Sequence[Preemption],
        deadline: Deadline | None = None,
        floor_s: float = 0.0,
    ) -> None:
        self.problem = problem
        self.deadline = deadline
        self.margin_s = explanation_margin_s(len(problem.candidates))
        self.floor_s = floor_s
        self.scanned = 0  # open hosts asked about by shortened and summarised entries
        self.placed = placed
        self.ledger = Ledger(problem, placed)
        self.counts = placed_counts(problem, placed)
        self.domain_of = {h.host_id: h.domain for h in problem.hosts}
        # Hosts holding each model's replicas (placed or fixed), asked several times per model.
        self.holding: dict[str, set[str]] = {}
        for model_id, host_id in placed:
            self.holding.setdefault(model_id, set()).add(host_id)
        for f in problem.fixed:
            self.holding.setdefault(f.model_id, set()).add(f.host_id)
        self.preemptions = preemptions
        self.cpsat_models = 0
        self.cpsat_work = 0.0

    # -- per model -----------------------------------------------------------------------
    def entries(self, profile: ModelProfile) -> list[Unsatisfied]:
        model_id = profile.model_id
        desired = self.problem.targets[model_id].desired
        remaining = max(0, desired - self.counts[model_id])
        holding = self.hosts_holding(model_id)
        out: list[Unsatisfied] = []
        for pin in dict.fromkeys(profile.pinned_hosts):
            if pin in holding:
                continue
            missing = 1 if remaining > 0 else 0
            remaining -= missing
            out.append(self.pin_entry(profile, pin, missing))
        staged = [
            p.host_id
            for p in self.preemptions
            if p.beneficiary_model_id == model_id and p.host_id not in profile.pinned_hosts
        ]
        for host_id in list(dict.fromkeys(staged))[:remaining]:
            out.append(self.preemption_entry(model_id, host_id))
            remaining -= 1
        if remaining > 0:
            out.append(self.capacity_entry(profile, remaining, desired))
        domain = self.domain_entry(profile)
        if domain is not None:
            out.append(domain)
        return out

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.deadline.expired(self.margin_s)

    def summarise(self) -> bool:
        """Past the floor of the later phases, or past the scan cap once out of time."""
        if self.deadline is None:
            return False
        if self.deadline.expired(self.floor_s):
            return True
        return self.scanned >= CALIBRATION.explain_scan_max and self.out_of_time()

    def open_hosts(
        self, model_id: str, hosts: Iterable[str], summarise: bool
    ) -> tuple[list[str], bool]:
        """The hosts of `hosts` without a replica of the model, and whether that list is a
        sample: when summarising, the first explain_summary_hosts (a sample only when more
        are left; a complete list is the shortened entry's)."""
        found = (h for h in hosts if (model_id, h) not in self.placed)
        if not summarise:
            return list(found), False
        most = CALIBRATION.explain_summary_hosts
        first = list(islice(found, most + 1))
        return first[:most], len(first) > most

    def change(self, host_id: str, blockers: Sequence[Blocker]) -> _Change:
        fraction = self.problem.snapshot.policy.memory_headroom_fraction
        return _Change(host_id, tuple(blockers), fraction)

    def hosts_holding(self, model_id: str) -> set[str]:
        return self.holding.get(model_id, set())

    # -- pins ----------------------------------------------------------------------------
    def pin_entry(self, profile: ModelProfile, pin: str, missing: int) -> Unsatisfied:
        model_id = profile.model_id
        host = self.problem.snapshot.host(pin)
        budget = self.problem.host_by_id.get(pin)
        if host is None or budget is None:
            return Unsatisfied(
                model_id=model_id,
                code="pinned_host_unavailable",
                missing_replicas=missing,
                host_id=pin,
                message=f"{model_id} is pinned to {pin}, which is not in the fleet snapshot, "
                "so that replica waits for it and is not placed on another host.",
                binding=[Binding(constraint="pinned_host", host_id=pin, detail="not in snapshot")],
                would_fit_if=f"{pin} rejoined the fleet and accepted work",
            )
        if budget.refusals:
            reasons = "; ".join(REASON_TEXT.get(r, r) for r in budget.refusals)
            return Unsatisfied(
                model_id=model_id,
                code="pinned_host_unavailable",
                missing_replicas=missing,
                host_id=pin,
                message=f"{model_id} is pinned to {pin}, which takes no new work ({reasons}), "
                "so that replica is not placed on another host.",
                binding=[
                    Binding(constraint=r, host_id=pin, detail=REASON_TEXT.get(r, r))
                    for r in budget.refusals
                ],
                would_fit_if=self.refusal_fix(profile, pin, list(budget.refusals)),
            )
        if any(p.beneficiary_model_id == model_id and p.host_id == pin for p in self.preemptions):
            entry = self.preemption_entry(model_id, pin)
            return entry.model_copy(
                update={"code": "pinned_host_insufficient", "missing_replicas": missing}
            )
        key = (model_id, pin)
        if key not in self.problem.candidates:
            codes = self.problem.refusals.get(key, [])
            return Unsatisfied(
                model_id=model_id,
                code="pinned_host_insufficient",
                missing_replicas=missing,
                host_id=pin,
                message=f"{model_id} is pinned to {pin}, but {pin} can never run it: "
                f"{'; '.join(REASON_TEXT.get(c, c) for c in codes)}.",
                binding=[self.refusal_binding(profile, c, [pin]) for c in codes],
                would_fit_if=self.refusal_fix(profile, pin, codes),
            )
        blockers = tuple(self.ledger.host_blockers(self.problem.candidates[key]))
        bindings = self.core_bindings(model_id, [pin], required_host=pin) or []
        if not bindings:
            bindings = [self.blocker_binding(model_id, b) for b in blockers]
        first = bindings[0].detail if bindings else "its room is taken"
        return Unsatisfied(
            model_id=model_id,
            code="pinned_host_insufficient",
            missing_replicas=missing,
            host_id=pin,
            message=f"{model_id} is pinned to {pin}, but {pin} cannot hold it now "
            f"({bindings[0].constraint if bindings else 'capacity'}: {first}).",
            binding=bindings,
            would_fit_if=_change_text(model_id, self.change(pin, blockers))
            if blockers
            else f"other replicas moved off {pin}",
        )

    # -- preemption ----------------------------------------------------------------------
    def preemption_entry(self, model_id: str, host_id: str) -> Unsatisfied:
        victims = sorted(
            p.victim_model_id
            for p in self.preemptions
            if p.beneficiary_model_id == model_id and p.host_id == host_id
        )
        names = ", ".join(victims)
        return Unsatisfied(
            model_id=model_id,
            code="preemption_staged",
            missing_replicas=1,
            host_id=host_id,
            message=f"{model_id} waits for {names} to drain and unload on {host_id}, and is "
            "placed there once a heartbeat proves the memory free.",
            binding=[
                Binding(constraint="preemption", host_id=host_id, detail=f"evicting {v}")
                for v in victims
            ],
            would_fit_if=f"the staged eviction of {names} from {host_id} completed",
        )

    # -- capacity ------------------------------------------------------------------------
    def capacity_entry(self, profile: ModelProfile, missing: int, desired: int) -> Unsatisfied:
        model_id = profile.model_id
        cands = self.problem.candidates_of_model(model_id)
        if not cands:
            return self.no_host_entry(profile, missing)
        have = desired - missing
        pins = set(profile.pinned_hosts)
        unpinned = (c.host_id for c in cands if c.host_id not in pins)
        unpinned_open, summarised = self.open_hosts(model_id, unpinned, self.summarise())
        if not unpinned_open:
            return self.too_few_hosts_entry(profile, missing, desired, len(cands))
        changes = sorted(
            (
                self.change(h, self.ledger.host_blockers(self.problem.candidates[(model_id, h)]))
                for h in unpinned_open
            ),
            key=_Change.rank,
        )
        local = [c.host_id for c in changes[:LOCAL_HOSTS]]
        late = summarised or self.out_of_time() or self.summarise()
        core = None if late else self.core_bindings(model_id, local)
        shortened, bindings = core is None, core or []
        if shortened:
            self.scanned += len(unpinned_open)
        if not bindings:
            blockers = (b for c in changes for b in c.blockers)  # only the first few are shown
            bindings = [self.blocker_binding(model_id, b) for b in islice(blockers, MAX_BINDINGS)]
        if not shortened:
            # Hosts that can never take it explain why the search stayed on so few hosts.
            refused = self.refusals_by_reason(model_id)
            bindings += [self.refusal_binding(profile, r, hs) for r, hs in refused.items()]
        bindings = bindings[:MAX_BINDINGS]
        best = changes[0]
        if best.blockers:
            fix = _change_text(model_id, best)
        else:
            fix = f"other replicas moved so that {best.host_id} kept room for it"
        lead = bindings[0] if bindings else None
        why = (
            f"{lead.constraint} on {lead.host_id}: {lead.detail}"
            if lead is not None and lead.host_id
            else (f"{lead.constraint}: {lead.detail}" if lead is not None else "no room")
        )
        return Unsatisfied(
            model_id=model_id,
            code="insufficient_capacity",
            missing_replicas=missing,
            message=f"{model_id} has {have} of {desired} desired replicas because no eligible "
            f"host has room for another ({why})." + _note(shortened, summarised, changes, cands),
            binding=bindings,
            would_fit_if=fix,
        )

    def too_few_hosts_entry(
        self, profile: ModelProfile, missing: int, desired: int, eligible: int
    ) -> Unsatisfied:
        model_id = profile.model_id
        bindings = [
            Binding(
                constraint="eligible_hosts",
                detail=f"{eligible} eligible host(s), each already holding a replica or "
                "reserved for a pin; at most one replica per host",
            )
        ]
        by_reason = self.refusals_by_reason(model_id)
        bindings += [self.refusal_binding(profile, r, hs) for r, hs in by_reason.items()]
        fix = self.best_refusal_fix(profile)
        return Unsatisfied(
            model_id=model_id,
            code="insufficient_capacity",
            missing_replicas=missing,
            message=f"{model_id} has {desired - missing} of {desired} desired replicas because "
            f"only {eligible} host(s) are eligible and each holds at most one replica.",
            binding=bindings[:MAX_BINDINGS],
            would_fit_if=fix or "another eligible host joined the fleet",
        )

    def no_host_entry(self, profile: ModelProfile, missing: int) -> Unsatisfied:
        model_id = profile.model_id
        by_reason = self.refusals_by_reason(model_id)
        bindings = [self.refusal_binding(profile, r, hs) for r, hs in by_reason.items()]
        if not self.problem.hosts:
            bindings = [Binding(constraint="fleet", detail="the snapshot has no hosts")]
        top = min(by_reason, key=lambda r: (-len(by_reason[r]), r), default=None)
        summary = (
            f"most often {REASON_TEXT.get(top, top)} ({len(by_reason[top])} of "
            f"{len(self.problem.hosts)} hosts)"
            if top is not None
            else "the fleet has no hosts"
        )
        return Unsatisfied(
            model_id=model_id,
            code="no_eligible_host",
            missing_replicas=missing,
            message=f"{model_id} has no eligible host; {summary}.",
            binding=bindings,
            would_fit_if=self.best_refusal_fix(profile) or "a host joined the fleet",
        )

    # -- failure domains -----------------------------------------------------------------
    def domain_entry(self, profile: ModelProfile) -> Unsatisfied | None:
        model_id = profile.model_id
        count = self.counts[model_id]
        need = min(profile.min_failure_domains, count)
        domain_of = self.domain_of
        covered = {domain_of[h] for h in self.hosts_holding(model_id)}
        if len(covered) >= need:
            return None
        reachable = covered | {
            domain_of[c.host_id] for c in self.problem.candidates_of_model(model_id)
        }
        if len(reachable) < need:
            detail = (
                f"only {len(reachable)} failure domain(s) have an eligible host "
                f"({', '.join(sorted(reachable))})"
            )
            fix = "a host in another failure domain were eligible for it"
            note = ""
        else:
            cands = self.problem.candidates_of_model(model_id)
            outside = (c.host_id for c in cands if domain_of[c.host_id] not in covered)
            elsewhere, summarised = self.open_hosts(model_id, outside, self.summarise())
            if summarised or self.out_of_time():
                self.scanned += len(elsewhere)
            candidates = self.problem.candidates
            changes = sorted(
                (
                    self.change(h, self.ledger.host_blockers(candidates[(model_id, h)]))
                    for h in elsewhere
                ),
                key=_Change.rank,
            )
            best = changes[0]
            detail = f"hosts in {', '.join(sorted(reachable - covered))} have no room for it"
            fix = (
                _change_text(model_id, best)
                if best.blockers
                else f"one replica moved to {best.host_id} ({domain_of[best.host_id]})"
            )
            note = _note(False, summarised, changes, cands)
        return Unsatisfied(
            model_id=model_id,
            code="failure_domain_shortfall",
            missing_replicas=0,
            message=f"{model_id}'s {count} replica(s) span {len(covered)} failure domain(s), "
            f"short of the {need} it requires.{note}",
            binding=[Binding(constraint="failure_domain", detail=detail)],
            would_fit_if=fix,
        )

    # -- CP-SAT core ---------------------------------------------------------------------


def _note(
    shortened: bool, summarised: bool, changes: Sequence[_Change], cands: Sequence[object]
) -> str:
    if summarised:
        return f" ({SUMMARISED_NOTE}; {len(changes)} of {len(cands)} eligible hosts examined)"
    return f" ({SHORTENED_NOTE})" if shortened else ""


def _change_text(model_id: str, change: _Change) -> str:
    host = change.host_id
    parts: list[str] = []
    for blocker in change.effective():
        if blocker.family == "memory":
            parts.append(f"{host} had {blocker.deficit} MB more free memory")
        elif blocker.family == "live_memory":
            parts.append(f"{host} had {blocker.deficit} MB more memory free right now")
        elif blocker.family == "slots":
            parts.append(f"{host} allowed one more model")
        elif blocker.family == "colocation":
            parts.append(f"{host} carried one model fewer ({blocker.other}'s colocation ceiling)")
        elif blocker.family == "colocation_exclusion":
            parts.append(f"{blocker.other} were not on {host}")
        elif blocker.family == "disk":
            parts.append(f"{host} had {blocker.deficit} MB more free disk")
    return " and ".join(dict.fromkeys(parts)) or f"{host} had room for {model_id}"
