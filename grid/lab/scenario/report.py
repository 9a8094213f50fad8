"""The scenario report: the stable JSON document (DESIGN.md "Scenario lab contract") and the
overall score. docs/scenario.md states the formula; in short, with every term in [0, 1]:

    score = 100 × (0.25 raw + 0.10 least + 0.15 suitability + 0.15 slo + 0.10 lifecycle
                   + 0.10 safety + 0.15 coverage)

raw = served / demand over everything (an unplaceable request still lowers it); least = the
lowest served fraction among structurally allocatable workloads (some catalogue model serves it
and some machine can hold that model); slo = SLO hits / requests over allocatable workloads;
suitability = served-weighted score of the serving model relative to the best allocatable
model for the word (named requests count 1); lifecycle = 1 / (1 + mutations per machine-hour
/ 4); safety = 1 with zero safety violations, else 0; coverage = mean over allocatable words of
ln(1 + s/ε) / ln(1 + 1/ε), ε = 0.01 (0 when a supported need is abandoned, still rising near
full service).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from grid.lab.scenario.lab import RunResult
from grid.lab.scenario.prefetch_score import prefetch_score

SCHEMA_VERSION = 1
EPS = 0.01
WEIGHTS = {
    "raw": 0.25,
    "least": 0.10,
    "suitability": 0.15,
    "slo": 0.15,
    "lifecycle": 0.10,
    "safety": 0.10,
    "coverage": 0.15,
}


def _r(x: float, digits: int = 4) -> float:
    return round(float(x), digits)


def coverage_term(fractions: list[float]) -> float:
    if not fractions:
        return 1.0
    top = math.log1p(1.0 / EPS)
    return sum(math.log1p(max(0.0, f) / EPS) / top for f in fractions) / len(fractions)


def score_terms(run: RunResult) -> dict[str, float]:
    m = run.metrics
    words = m.words
    demand = sum(w.demand for w in words.values())
    served = sum(w.served for w in words.values())
    feasible = [w for w in sorted(words) if m.best.get(w) is not None and words[w].demand > 0]
    fractions = [words[w].served / words[w].demand for w in feasible]
    requests = sum(words[w].requests for w in feasible)
    slo_ok = sum(words[w].slo_ok for w in feasible)
    suit = sum(w.suitability for w in words.values())
    hours = max(1e-9, m.minutes / 60.0)
    mutations = (m.life.starts + m.life.unloads) / (len(m.world.machines) * hours)
    return {
        "raw": served / demand if demand > 0 else 1.0,
        "least": min(fractions) if fractions else 1.0,
        "suitability": suit / served if served > 0 else 1.0,
        "slo": slo_ok / requests if requests else 1.0,
        "lifecycle": 1.0 / (1.0 + mutations / 4.0),
        "safety": 0.0 if m.violations else 1.0,
        "coverage": coverage_term(fractions),
    }


def overall_score(terms: dict[str, float]) -> float:
    return 100.0 * sum(WEIGHTS[k] * terms[k] for k in WEIGHTS)


def _recommendations(run: RunResult) -> list[dict[str, Any]]:
    m = run.metrics
    out: list[dict[str, Any]] = []
    for word, w in sorted(m.words.items()):
        if w.demand <= 0:
            continue
        unserved = 1.0 - w.served / w.demand
        best = m.best.get(word)
        if best is None:
            out.append(
                {
                    "workload": word,
                    "code": "no_compatible_machine",
                    "message": f"no machine can hold a model that serves {word}: add a machine "
                    "with a compatible runtime and backend",
                }
            )
        elif unserved >= 0.1:
            prof = next(p for p in run.world.profiles if p.model_id == best)
            out.append(
                {
                    "workload": word,
                    "code": "add_capacity",
                    "message": f"{unserved:.0%} of {word} demand went unserved: add capacity for "
                    f"{best} ({prof.memory_mb} MB, runtimes {', '.join(prof.runtimes)}"
                    + (f", backend {', '.join(prof.backends)}" if prof.backends else "")
                    + ")",
                }
            )
    return out


def document(run: RunResult, *, timeline: bool = False) -> dict[str, Any]:
    cfg, m = run.config, run.metrics
    terms = score_terms(run)
    words = m.words
    demand = sum(w.demand for w in words.values())
    served = sum(w.served for w in words.values())
    requests = sum(w.requests for w in words.values())
    life = m.life
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "seed": cfg.seed,
        "strategy": cfg.strategy,
        "machines": cfg.machines,
        "models": cfg.models,
        "users": cfg.users,
        "duration_s": cfg.minutes * 60,
        "demand_trace_sha256": m.routed_hash.hexdigest(),
        "summary": {
            "served_fraction": _r(terms["raw"]),
            "score": _r(overall_score(terms), 2),
            "least_workload_service": _r(terms["least"]),
            "slo_attainment": _r(terms["slo"]),
            "suitability": _r(terms["suitability"]),
            "loads": life.starts,
            "unloads": life.unloads,
            "cold_starts": life.cold_starts,
            "churn": life.churn.churn,
            "churn_detail": {
                "healthy_unloads": life.churn.healthy_unloads,
                "replacing_loads": life.churn.replacing_starts,
                "fill_loads": life.churn.fill_starts,
                "outage_reloads": life.churn.outage_restarts,
            },
            "mapping_changes": m.mapping_changes,
            "safety_violations": len(m.violations),
            "demand": _r(demand, 3),
            "served": _r(served, 3),
            "requests": requests,
            "startup_s": _r(life.startup_s, 1),
            "cold_start_s": _r(life.cold_start_s, 1),
            "cache_locality": _r((life.starts - life.cold_starts) / life.starts)
            if life.starts
            else 1.0,
            "memory_use_mean": _r(statistics.fmean(m.memory_fraction))
            if m.memory_fraction
            else 0.0,
            "memory_use_peak": _r(max(m.memory_fraction, default=0.0)),
            "disk_used_mb_peak": max(m.disk_used_mb, default=0),
            "disk_used_mb_final": m.disk_used_mb[-1] if m.disk_used_mb else 0,
            "downloaded_mb": life.downloaded_mb,
            "reclaimed_mb": run.fleet.reclaimed_mb,
            "score_terms": {k: _r(v) for k, v in terms.items()},
        },
        "prefetch": prefetch_score(run.fleet.records.values(), run.fleet.models).document(),
        "workloads": {
            word: {
                "demand": _r(w.demand, 3),
                "served": _r(w.served, 3),
                "served_fraction": _r(w.served / w.demand) if w.demand else 1.0,
                "requests": w.requests,
                "slo_attainment": _r(w.slo_ok / w.requests) if w.requests else 1.0,
                "allocatable": m.best.get(word) is not None,
                "best_model": m.best.get(word),
                "admission_minutes": dict(sorted(w.admission.items())),
                "blocking_model_minutes": dict(sorted(w.blocking.items())),
            }
            for word, w in sorted(words.items())
        },
        "overloaded_model_minutes": dict(sorted(m.overloaded.items())),
        "unsatisfied_minutes": dict(sorted(m.unsatisfied.items())),
        "capacity_recommendations": _recommendations(run),
        "safety": m.violations,
        "events": [
            {"minute": e.minute, "kind": e.kind, "host_id": e.host_id} for e in run.world.events
        ],
    }
    if timeline:
        doc["timeline"] = m.timeline
    return doc
