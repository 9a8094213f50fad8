"""Why no number of template hosts helps: the constraint each blocked model cannot get past.

Each model is solved alone (the planner's hard constraints on the fleet plus enough copies of
every template, no other model competing), so the replicas it can place at best are exact for
that fleet; a model that still falls short is blocked by something no added host changes. The
reason is read from the planner's own refusal codes for the model on a template copy:

    missing_tag / forbidden_tag   the template lacks a required tag (carries a forbidden one)
    runtime_mismatch / backend_mismatch / data_tier / host_not_allowed / actuator_missing
    memory / disk                 the model does not fit an empty template host
    pin                           the model is pinned to a host that cannot take it
    max_hosts                     a template could take it, but --max is too small
"""

from __future__ import annotations

import json

from ortools.sat.python import cp_model

from grid.fleet import FleetSnapshot, Host, ModelProfile, Plan
from grid.lab.whatif import augment
from grid.planner import REASON_TEXT, PlacementProblem, build_problem
from grid.planner.cpsat import Guard, PlacementVars, add_hard_constraints


def _names(values: list[str] | set[str]) -> str:
    return ", ".join(repr(v) for v in sorted(values)) or "none"


def _eligibility_entry(code: str, model: ModelProfile, template: Host) -> dict[str, object] | None:
    m, t = model.model_id, template.host_id
    entry: dict[str, object] = {"constraint": code, "model_id": m, "template": t}
    if code == "missing_tag":
        lacking = sorted(set(model.required_tags) - set(template.tags))
        entry["value"] = lacking[0] if len(lacking) == 1 else lacking
        detail = f"{m} requires tag {_names(lacking)}, which template {t} lacks"
    elif code == "forbidden_tag":
        carried = sorted(set(model.forbidden_tags) & set(template.tags))
        entry["value"] = carried[0] if len(carried) == 1 else carried
        detail = f"{m} forbids tag {_names(carried)}, which template {t} carries"
    elif code == "runtime_mismatch":
        entry["value"] = list(model.runtimes)
        detail = (
            f"{m} needs runtime {_names(model.runtimes)}; template {t} offers "
            f"{_names(template.runtimes)}"
        )
    elif code == "backend_mismatch":
        entry["value"] = list(model.backends)
        detail = (
            f"{m} needs backend {_names(model.backends)}; template {t} offers "
            f"{_names(template.backends)}"
        )
    elif code == "data_tier":
        entry["value"] = model.data_tier
        detail = (
            f"{m} has data tier {model.data_tier!r}; template {t} is cleared for "
            f"{_names(template.data_tiers)}"
        )
    elif code == "host_not_allowed":
        entry["value"] = list(model.allowed_hosts)
        detail = f"{m} may only run on {_names(model.allowed_hosts)}; an added host never is one"
    elif code == "not_desired":
        return None
    else:
        detail = f"{m} on template {t}: {REASON_TEXT.get(code, code)}"
    entry["detail"] = detail + f"; no number of {t} hosts lifts it"
    return entry


def _pin_entries(
    problem: PlacementProblem, fleet: FleetSnapshot, model: ModelProfile
) -> list[dict[str, object]]:
    """Pins the model cannot be given even with nothing else competing."""
    out: list[dict[str, object]] = []
    m = model.model_id
    for pin in sorted(set(model.pinned_hosts)):
        host = fleet.host(pin)
        if (m, pin) in problem.candidates:
            if _alone(problem, m, forced=(m, pin)) >= 0:
                continue
            why = "cannot hold it: " + _ledger_text(problem, m, pin)
        elif host is None:
            why = "is not in the fleet"
        else:
            codes = problem.refusals.get((m, pin), [])
            why = "refuses it: " + ("; ".join(REASON_TEXT.get(c, c) for c in codes) or "full")
        out.append(
            {
                "constraint": "pin",
                "model_id": m,
                "host_id": pin,
                "value": pin,
                "detail": f"{m} is pinned to {pin}, which {why}; an added host is never {pin}, "
                "and a pin is never moved",
            }
        )
    return out


def _ledger_text(problem: PlacementProblem, model_id: str, host_id: str) -> str:
    """Which of the host's own ledgers a new replica of the model breaks."""
    cand = problem.candidates[(model_id, host_id)]
    budget = problem.host_by_id[host_id]
    if cand.new_mb > budget.new_budget_mb:
        return (
            f"live memory (needs {cand.new_mb} MB free now, {budget.new_budget_mb} MB free after "
            "live models and headroom)"
        )
    if cand.memory_mb > budget.footprint_budget_mb:
        return f"memory (needs {cand.memory_mb} MB, {budget.footprint_budget_mb} MB allocatable)"
    if budget.disk_free_mb is not None and cand.disk_mb > budget.disk_free_mb:
        return f"disk (needs {cand.disk_mb} MB, {budget.disk_free_mb} MB free)"
    return "its model slots, colocation ceilings or exclusions"


def _fit_entry(
    problem: PlacementProblem, model: ModelProfile, template: Host, copy_id: str
) -> dict[str, object] | None:
    """Why the model does not fit an empty copy of the template (None: it fits)."""
    cand = problem.candidates[(model.model_id, copy_id)]
    budget = problem.host_by_id[copy_id]
    m, t = model.model_id, template.host_id
    room = min(budget.new_budget_mb, budget.footprint_budget_mb)
    if cand.new_mb > room:
        return {
            "constraint": "memory",
            "model_id": m,
            "template": t,
            "value": cand.new_mb,
            "detail": f"{m} needs {cand.new_mb} MB; an empty {t} host has {room} MB "
            "(allocatable less headroom); no number of them lifts it",
        }
    if budget.disk_free_mb is not None and cand.disk_mb > budget.disk_free_mb:
        return {
            "constraint": "disk",
            "model_id": m,
            "template": t,
            "value": cand.disk_mb,
            "detail": f"{m}'s artifact needs {cand.disk_mb} MB of disk; a {t} host has "
            f"{budget.disk_free_mb} MB free",
        }
    return None


def _alone(problem: PlacementProblem, model_id: str, forced: tuple[str, str] | None = None) -> int:
    """The most replicas of one model the fleet can place with nothing else competing
    (with `forced`, that placement must be among them; −1 when it cannot be)."""
    keys = [k for k in problem.candidates if k[0] == model_id]
    if not keys:
        return 0
    model = cp_model.CpModel()
    xs = PlacementVars(model, problem, keys)
    add_hard_constraints(model, xs, problem)
    if forced is not None:
        model.add(xs.x[forced] == 1)
    model.maximize(xs.total(keys))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 5.0
    if solver.solve(model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return -1 if forced is not None else 0
    return round(solver.objective_value)


def blocked_models(
    snap: FleetSnapshot,
    templates: list[Host],
    max_per_template: int,
    need: dict[str, int],
) -> tuple[list[dict[str, object]], dict[str, int]]:
    """Binding entries for every blocked model, and the placements still worth sizing for."""
    bound = max(1, min(max_per_template, max(need.values(), default=1)))
    fleet, groups = augment(snap, {t.host_id: bound for t in templates}, templates)
    problem = build_problem(fleet)
    entries: list[dict[str, object]] = []
    reduced = dict(need)
    for model_id, wanted in sorted(need.items()):
        if wanted <= 0:
            continue
        best = _alone(problem, model_id)
        if best >= wanted:
            continue
        reduced[model_id] = best
        model = problem.model_by_id[model_id]
        found = _pin_entries(problem, fleet, model)
        fits_somewhere = False
        for template in templates:
            copy_id = groups[template.host_id][0]
            if (model_id, copy_id) not in problem.candidates:
                for code in problem.refusals.get((model_id, copy_id), []):
                    entry = _eligibility_entry(code, model, template)
                    if entry is not None:
                        found.append(entry)
                continue
            entry = _fit_entry(problem, model, template, copy_id)
            if entry is None:
                fits_somewhere = True
            else:
                found.append(entry)
        pinned = any(e["constraint"] == "pin" for e in found)
        if fits_somewhere and not pinned and max_per_template < wanted:
            found.append(
                {
                    "constraint": "max_hosts",
                    "model_id": model_id,
                    "value": max_per_template,
                    "detail": f"{model_id} needs {wanted} new replica(s) but --max "
                    f"{max_per_template} hosts per template leave room for {best}; raise --max",
                }
            )
        elif not found:
            found.append(
                {
                    "constraint": "placement",
                    "model_id": model_id,
                    "detail": f"{model_id} places only {best} of {wanted} replica(s) even alone "
                    f"on the fleet plus {bound} host(s) of each template",
                }
            )
        for entry in found:
            entry["missing_replicas"] = wanted - best
        entries += found
    return entries, reduced


def joint_core(
    snap: FleetSnapshot,
    templates: list[Host],
    bound: int,
    need: dict[str, int],
) -> list[dict[str, object]]:
    """When every model fits alone but not all together: the constraint families (per host)
    and the models' replica demands in an infeasibility core of the count model with `bound`
    copies of each template (assumption literals, one worker, no presolve)."""
    fleet, groups = augment(snap, {t.host_id: bound for t in templates}, templates)
    template_of = {hid: tid for tid, ids in groups.items() for hid in ids}
    problem = build_problem(fleet)
    model = cp_model.CpModel()
    guard = Guard(model)
    xs = PlacementVars(model, problem)
    add_hard_constraints(model, xs, problem, host_guard=guard, replica_guard=guard)
    for model_id, wanted in sorted(need.items()):
        if wanted > 0:
            lit = guard.literal("need", model_id)
            model.add(xs.total(xs.keys_of_model(model_id)) >= wanted).only_enforce_if(lit)
    literals = list(guard.literals.values())
    model.add_assumptions(literals)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False
    solver.parameters.max_time_in_seconds = 5.0
    if solver.solve(model) != cp_model.INFEASIBLE:
        return []
    out: list[dict[str, object]] = []
    for index in sorted(solver.sufficient_assumptions_for_infeasibility()):
        found = guard.describe(index)
        if found is None:
            continue
        family, scope = found
        if family == "need":
            out.append(
                {
                    "constraint": "desired_replicas",
                    "model_id": scope,
                    "value": need[scope],
                    "detail": f"{scope} needs {need[scope]} replica(s) placed",
                }
            )
        elif family == "replicas":
            pins = sorted(set(problem.model_by_id[scope].pinned_hosts))
            out.append(
                {
                    "constraint": "pin" if pins else "replicas",
                    "model_id": scope,
                    "value": pins if pins else need.get(scope, 0),
                    "detail": f"{scope}'s replicas are bounded"
                    + (f" and pinned to {', '.join(pins)} (a pin is never moved)" if pins else ""),
                }
            )
        elif scope in template_of:
            out.append(
                {
                    "constraint": family,
                    "template": template_of[scope],
                    "detail": f"{family} on every added {template_of[scope]} host",
                }
            )
        else:
            out.append(
                {
                    "constraint": family,
                    "host_id": scope,
                    "detail": f"{family} on {scope}, which added hosts do not change",
                }
            )
    unique: dict[str, dict[str, object]] = {}
    for entry in out:
        unique.setdefault(json.dumps(entry, sort_keys=True), entry)
    return list(unique.values())


def plan_bindings(before: Plan) -> list[dict[str, object]]:
    """What held the unmet replicas back before any host was added: one entry per model and
    constraint family, with the hosts it binds on."""
    out: dict[tuple[str, str], dict[str, object]] = {}
    for u in before.unsatisfied:
        if u.missing_replicas <= 0:
            continue
        for b in u.binding:
            entry = out.setdefault(
                (u.model_id, b.constraint),
                {"constraint": b.constraint, "model_id": u.model_id, "hosts": [], "detail": ""},
            )
            hosts = entry["hosts"]
            assert isinstance(hosts, list)
            if b.host_id and b.host_id not in hosts:
                hosts.append(b.host_id)
            if not entry["detail"]:
                where = f"on {b.host_id}: " if b.host_id else ""
                entry["detail"] = where + b.detail
    return list(out.values())
