"""How the explainer names what binds a model (grid/planner/explain.py): CP-SAT cores over a
local model, and the static per-host refusals with the flag or setting that would lift them.

`Bindings` is the explainer's half that turns a core, a blocker or a refusal into a `Binding`
with its fix; `_Explainer` (explain.py) builds the entries from them. The constants bound the
work: how many models get a core, how many hosts and candidates one local model holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grid.fleet import Binding, ModelProfile
from grid.planner.cpsat import Blocker, Ledger
from grid.planner.deadline import CALIBRATION, Deadline
from grid.planner.eligibility import REASON_TEXT
from grid.planner.gpus import gpus_wanted, refusal_text
from grid.planner.problem import PlacementProblem

if TYPE_CHECKING:
    from grid.planner.cpsat import Core

Key = tuple[str, str]

CPSAT_MODELS = 20  # models explained with a CP-SAT core; the rest get the static ledger
LOCAL_HOSTS = 16  # hosts in one explanation model ...
LOCAL_KEYS = 1500  # ... and candidate variables (the first host always counts)
MAX_BINDINGS = 8
FAMILY_ORDER = ("memory", "live_memory", "slots", "disk", "colocation", "colocation_exclusion")
HOST_LEVEL = frozenset(
    {
        "host_not_admitting",
        "heartbeat_missing",
        "heartbeat_stale",
        "heartbeat_future",
        "host_manual",
    }
)
RELATION_TEXT = {
    "higher_priority": "a higher-priority model",
    "equal_priority": "an equal-priority model (fair share)",
    "lower_priority": "a lower-priority model this plan may not evict",
}


class Bindings:
    """The binding side of the explainer (mixed into `_Explainer`, which sets these)."""

    problem: PlacementProblem
    placed: set[Key]
    ledger: Ledger
    counts: dict[str, int]
    deadline: Deadline | None
    margin_s: float
    cpsat_models: int
    cpsat_work: float

    def core_bindings(
        self, model_id: str, hosts: list[str], required_host: str | None = None
    ) -> list[Binding] | None:
        """Bindings from a CP-SAT core; None when the deadline leaves no time for one."""
        if self.cpsat_models >= CPSAT_MODELS or self.cpsat_work >= CALIBRATION.core_work_total:
            return []
        work = min(CALIBRATION.core_work_per_model, CALIBRATION.core_work_total - self.cpsat_work)
        if self.deadline is not None:  # a core may use only what the deadline has left
            left = self.deadline.remaining() - self.margin_s
            work = min(work, left / CALIBRATION.core_wall_per_work_s)
            if work < CALIBRATION.core_work_min:
                return None
        from grid.planner.cpsat import binding_core  # OR-Tools, loaded when a core runs

        self.cpsat_models += 1
        core = binding_core(
            self.problem,
            self.placed,
            model_id,
            hosts=self.local_hosts(hosts),
            required_host=required_host,
            work_limit=work,
        )
        self.cpsat_work += core.work
        return self.bindings_of(model_id, core)

    def local_hosts(self, ranked: list[str]) -> list[str]:
        """The leading hosts whose candidates stay within LOCAL_KEYS (at least one host)."""
        chosen: list[str] = []
        keys = 0
        for host_id in ranked[:LOCAL_HOSTS]:
            size = len(self.problem.candidates_of_host(host_id))
            if chosen and keys + size > LOCAL_KEYS:
                break
            chosen.append(host_id)
            keys += size
        return chosen

    def bindings_of(self, model_id: str, core: Core) -> list[Binding]:
        if core.outcome == "feasible":
            return [
                Binding(
                    constraint="search",
                    detail="another replica fits once other replicas move, which this plan "
                    "did not do",
                )
            ]
        out: list[Binding] = []
        for family, scope in core.blockers:
            if family in RELATION_TEXT:
                out.append(self.relation_binding(model_id, family, scope))
            else:
                out.append(self.host_binding(model_id, family, scope))
        out.sort(key=lambda b: (b.constraint in RELATION_TEXT, b.host_id or "", b.constraint))
        return out[:MAX_BINDINGS]

    def relation_binding(self, model_id: str, relation: str, other: str) -> Binding:
        profile = self.problem.model_by_id[other]
        hosts = sorted(h for m, h in self.placed if m == other)
        return Binding(
            constraint=relation,
            host_id=hosts[0] if len(hosts) == 1 else None,
            detail=f"{other} (priority {profile.priority}, {RELATION_TEXT[relation]}) keeps its "
            f"{self.counts[other]} replica(s)",
        )

    def host_binding(self, model_id: str, family: str, host_id: str) -> Binding:
        cand = self.problem.candidates.get((model_id, host_id))
        if cand is not None:
            for blocker in self.ledger.host_blockers(cand):
                if blocker.family == family and family != "gpu":  # gpu: the wording below
                    return self.blocker_binding(model_id, blocker)
        load = self.ledger.hosts[host_id]
        budget = load.budget
        detail = {
            "memory": f"{load.footprint_mb} of {budget.footprint_budget_mb} MB in use",
            "live_memory": f"{load.new_mb} of {budget.new_budget_mb} MB of free memory claimed",
            "slots": f"{len(load.models)} model(s) placed, the host's slots are used up",
            "colocation": "a colocation ceiling of a model on the host is reached",
            "colocation_exclusion": "a model it may not share a host with is placed there",
            "disk": f"{load.disk_mb} of {budget.disk_free_mb} MB of free disk claimed",
        }.get(family, family)
        host = self.problem.snapshot.host(host_id)
        if family == "gpu":  # grid/planner/gpus.py: the replicas placed there hold them
            detail = f"{refusal_text(self.problem.model_by_id[model_id], [host])}, all held"
        return Binding(constraint=family, host_id=host_id, detail=detail)

    # -- static wording ------------------------------------------------------------------
    def blocker_binding(self, model_id: str, blocker: Blocker) -> Binding:
        free = max(0, blocker.free)
        detail = {
            "memory": f"needs {blocker.need} MB, {free} MB free",
            "live_memory": f"needs {blocker.need} MB free now, {free} MB free after live "
            "models and headroom",
            "slots": f"all {blocker.free} model slot(s) taken",
            "colocation": f"{blocker.other} allows at most {blocker.free} model(s) on the host",
            "colocation_exclusion": f"{model_id} may not share a host with {blocker.other}",
            "disk": f"needs {blocker.need} MB of disk for its artifact, {free} MB free",
            "replicas": "no replica left beyond those reserved for its pins",
        }.get(blocker.family, blocker.family)
        return Binding(constraint=blocker.family, host_id=blocker.host_id, detail=detail)

    def refusals_by_reason(self, model_id: str) -> dict[str, list[str]]:
        by_reason: dict[str, list[str]] = {}
        for host_id, codes in self.refusals_of(model_id):
            for code in codes:
                by_reason.setdefault(code, []).append(host_id)
        return by_reason

    def refusals_of(self, model_id: str) -> list[tuple[str, list[str]]]:
        """(host, reason codes) for every host that refuses the model, by host ID."""
        return self.problem.refusals.of_model(model_id)  # per host: no scan of every pair

    def refusal_binding(self, profile: ModelProfile, code: str, hosts: list[str]) -> Binding:
        shown = ", ".join(hosts[:5]) + (f" and {len(hosts) - 5} more" if len(hosts) > 5 else "")
        wanted = {
            "runtime_mismatch": f" (needs runtime {' or '.join(profile.runtimes)})",
            "backend_mismatch": f" (needs backend {' or '.join(profile.backends)})",
            "data_tier": f" (needs tier '{profile.data_tier}')",
            "missing_tag": f" (needs {_quoted(profile.required_tags, 'tag')})",
            "forbidden_tag": f" (forbids {_quoted(profile.forbidden_tags, 'tag')})",
        }.get(code, "")
        detail = f"{shown + ': ' if len(hosts) > 1 else ''}{REASON_TEXT.get(code, code)}{wanted}"
        if code == "gpu_shortfall":  # "needs 2 GPUs of ≥ 40 GB; gpu-02 has 1 of 48 GB"
            detail = refusal_text(profile, [self.problem.snapshot.host(h) for h in hosts])
        return Binding(
            constraint=code, host_id=hosts[0] if len(hosts) == 1 else None, detail=detail
        )

    def best_refusal_fix(self, profile: ModelProfile) -> str:
        per_host = {
            host_id: codes for host_id, codes in self.refusals_of(profile.model_id) if codes
        }
        if not per_host:
            return ""

        def cost(host_id: str) -> tuple[int, int, str]:
            codes = per_host[host_id]
            return (any(c in HOST_LEVEL for c in codes), len(codes), host_id)

        host_id = min(per_host, key=cost)
        return self.refusal_fix(profile, host_id, per_host[host_id])

    def refusal_fix(self, profile: ModelProfile, host_id: str, codes: Sequence[str]) -> str:
        host = self.problem.snapshot.host(host_id)
        tags = set(host.tags) if host is not None else set()
        model_id = profile.model_id
        state = host.state.value if host is not None else "unknown"
        phrases = {
            "runtime_mismatch": f"{host_id} offered runtime '{sorted(profile.runtimes)[0]}'"
            if profile.runtimes
            else f"{host_id} offered a runtime",
            "backend_mismatch": f"{host_id} offered backend '{sorted(profile.backends)[0]}'"
            if profile.backends
            else f"{host_id} offered a backend",
            "data_tier": f"{host_id} were cleared for data tier '{profile.data_tier}'",
            "missing_tag": f"{host_id} carried "
            f"{_quoted(sorted(set(profile.required_tags) - tags), 'tag')}",
            "forbidden_tag": f"{host_id} did not carry "
            f"{_quoted(sorted(set(profile.forbidden_tags) & tags), 'tag')}",
            "host_not_allowed": f"{host_id} were on {model_id}'s allow list",
            "host_denied": f"{host_id} were off {model_id}'s deny list",
            "actuator_missing": f"{host_id}'s actuator could load and warm models",
            "host_not_admitting": f"{host_id} were accepting work (it is {state})",
            "heartbeat_missing": f"{host_id} sent a heartbeat",
            "heartbeat_stale": f"{host_id} sent a fresh heartbeat",
            "heartbeat_future": f"{host_id}'s clock agreed with the controller's",
            "host_manual": f"{host_id} were managed by Grid",
            "residency_not_reusable": f"the stale copy of {model_id} on {host_id} were unloaded",
            "colocation_excluded": f"no model that {model_id} may not share a host with ran "
            f"on {host_id}",
            "colocation_or_slots_full": f"{host_id} had a free model slot",
            "gpu_shortfall": f"{host_id} had {gpus_wanted(profile)}",
        }
        texts = list(dict.fromkeys(phrases.get(c, f"{host_id} accepted it ({c})") for c in codes))
        return " and ".join(texts)


def _quoted(items: Sequence[str], noun: str) -> str:
    names = " and ".join(f"'{i}'" for i in items)
    return f"{noun}s {names}" if len(items) > 1 else f"{noun} {names}"
