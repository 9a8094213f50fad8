"""Independent references for the oracle tests (not the oracle's code).

`brute_force` enumerates every schedule by dynamic programming over per-minute residency states
(each eligible (model, host) pair absent or present with its age since load, capped); `simulate`
replays a contract-format schedule action by action. Both read the trace document (a dict) and
compute served with exact fractions of the decimal values, so they share nothing with
grid.lab.oracle (its scaling, replayer, model, flows or greedy). They read the optional physics
of docs/oracle.md too (host `speed` and `throttle`, demand `classes`): a minute's served is then
the max-flow value, computed by enumerating every cut.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import pytest

pytestmark = pytest.mark.unit


def _frac(value: float) -> Fraction:
    return Fraction(str(value))


def _pairs(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for model in doc["models"]:
        for host in doc["hosts"]:
            fits = model["memory_mb"] <= host["capacity_mb"]
            if fits and set(model["runtimes"]) & set(host["runtimes"]):
                out.append((model["model_id"], host["host_id"]))
    return out


def _down(doc: dict[str, Any], host_id: str, t: int) -> bool:
    host = next(h for h in doc["hosts"] if h["host_id"] == host_id)
    return any(start <= t < end for start, end in host.get("down", []))


def _fits(doc: dict[str, Any], present: set[tuple[str, str]]) -> bool:
    mem = {m["model_id"]: m["memory_mb"] for m in doc["models"]}
    for host in doc["hosts"]:
        mine = [m for m, h in present if h == host["host_id"]]
        if sum(mem[m] for m in mine) > host["capacity_mb"]:
            return False
        if host.get("max_models", 0) and len(mine) > host["max_models"]:
            return False
    return True


def _speed(doc: dict[str, Any], host_id: str, t: int) -> Fraction:
    host = next(h for h in doc["hosts"] if h["host_id"] == host_id)
    speed = _frac(host.get("speed", 1.0))
    for start, end, fraction in host.get("throttle", []):
        if start <= t < end:
            speed *= _frac(fraction)
    return speed


def _served(doc: dict[str, Any], ready: list[tuple[str, str]], t: int) -> Fraction:
    """What minute t serves with these ready (model, host) replicas, by the min-cut formula.

    Classes: each model's own demand (served by it alone) and the trace's `classes` (served by
    any listed model). The maximum flow of classes onto model capacities equals the smallest,
    over sets S of classes, of the demand outside S plus the capacity of every model some class
    of S may use (max-flow min-cut, enumerated over every S: no flow algorithm involved)."""
    conc = {m["model_id"]: _frac(m.get("replica_concurrency", 1.0)) for m in doc["models"]}
    capacity: dict[str, Fraction] = {}
    for model_id, host_id in ready:
        capacity[model_id] = capacity.get(model_id, Fraction(0)) + conc[model_id] * _speed(
            doc, host_id, t
        )
    members = {m: [m] for m in conc} | {c: list(ms) for c, ms in doc.get("classes", {}).items()}
    demand = {c: _frac(series[t]) for c, series in doc.get("demand", {}).items() if series[t] > 0}
    names = sorted(demand)
    best: Fraction | None = None
    for size in range(len(names) + 1):
        for chosen in itertools.combinations(names, size):
            used = {m for c in chosen for m in members[c]}
            cut = sum((demand[c] for c in names if c not in chosen), Fraction(0))
            cut += sum((capacity.get(m, Fraction(0)) for m in used), Fraction(0))
            best = cut if best is None or cut < best else best
    return best if best is not None else Fraction(0)


def brute_force(doc: dict[str, Any]) -> tuple[Fraction, int]:
    """(max served, min mutations among schedules that serve that much), by exhaustive DP."""
    load, hold = doc.get("load_minutes", 1), doc.get("hold_minutes", 2)
    keep = load + hold
    pairs = _pairs(doc)
    initial = {(p["model_id"], p["host_id"]) for p in doc.get("initial", [])}
    # state: per pair, None (absent) or age = minutes since its load, capped at `keep`
    start = tuple(keep if pair in initial else None for pair in pairs)
    best: dict[tuple[int | None, ...], tuple[Fraction, int]] = {start: (Fraction(0), 0)}
    for t in range(doc["minutes"]):
        nxt: dict[tuple[int | None, ...], tuple[Fraction, int]] = {}
        for state, (served, mutations) in best.items():
            options = []
            for (_model_id, host_id), age in zip(pairs, state, strict=True):
                if _down(doc, host_id, t):
                    options.append([(None, 0)])  # lost, not a mutation
                elif age is None:
                    options.append([(None, 0), (0, 1)])  # stay away, or load now
                else:
                    aged = min(keep, age + 1)
                    stay = [(aged, 0)]
                    # may unload once t - s >= load + hold; the age here is t - s
                    if aged >= keep:
                        stay.append((None, 1))
                    options.append(stay)
            for combo in itertools.product(*options):
                present = {
                    pair for pair, (age, _c) in zip(pairs, combo, strict=True) if age is not None
                }
                if not _fits(doc, present):
                    continue
                ready = [
                    pair
                    for pair, (age, _c) in zip(pairs, combo, strict=True)
                    if age is not None and age >= load
                ]
                value = (served + _served(doc, ready, t), mutations + sum(c for _a, c in combo))
                key = tuple(age for age, _c in combo)
                old = nxt.get(key)
                if old is None or (value[0], -value[1]) > (old[0], -old[1]):
                    nxt[key] = value
        best = nxt
    top = max(best.values(), key=lambda v: (v[0], -v[1]))
    return top


def simulate(doc: dict[str, Any], schedule: list[dict[str, Any]]) -> tuple[Fraction, int]:
    """Replay a contract schedule; assert every rule; return (served, mutations)."""
    load, hold = doc.get("load_minutes", 1), doc.get("hold_minutes", 2)
    pairs = set(_pairs(doc))
    loaded_at: dict[tuple[str, str], int] = {
        (p["model_id"], p["host_id"]): -(10**9) for p in doc.get("initial", [])
    }
    served, mutations = Fraction(0), 0
    for t in range(doc["minutes"]):
        for pair in list(loaded_at):
            if _down(doc, pair[1], t):
                del loaded_at[pair]
        todo = [a for a in schedule if a["minute"] == t]
        todo.sort(key=lambda a: a["action"] != "unload")
        for act in todo:
            pair = (act["model_id"], act["host_id"])
            if act["action"] == "unload":
                assert pair in loaded_at, f"unload of an absent replica: {act}"
                assert t - loaded_at[pair] >= load + hold, f"unload before the hold: {act}"
                del loaded_at[pair]
            else:
                assert act["action"] == "load", act
                assert pair in pairs, f"load of an ineligible pair: {act}"
                assert not _down(doc, pair[1], t), f"load on a down host: {act}"
                assert pair not in loaded_at, f"second replica on one host: {act}"
                loaded_at[pair] = t
            mutations += 1
        assert _fits(doc, set(loaded_at)), f"memory or slots exceeded at minute {t}"
        ready = [pair for pair, s in loaded_at.items() if t - s >= load]
        served += _served(doc, ready, t)
    assert all(0 <= a["minute"] < doc["minutes"] for a in schedule)
    return served, mutations


# --- hand-worked checks of the references themselves ----------------------------------------


def _one_host(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": 1,
        "minutes": 4,
        "hold_minutes": 1,
        "load_minutes": 1,
        "hosts": [{"host_id": "h", "capacity_mb": 10, "runtimes": ["r"]}],
        "models": [
            {"model_id": "a", "memory_mb": 6, "runtimes": ["r"]},
            {"model_id": "b", "memory_mb": 6, "runtimes": ["r"]},
        ],
        "demand": {"a": [1, 1, 0, 0], "b": [0, 0, 2, 2]},
    }
    doc.update(extra)
    return doc


def test_brute_force_hand_worked_switch() -> None:
    # a initial serves 1+1; unload a at 2, load b at 2 (ready at 3, serves 1): 3 and 2 mutations
    doc = _one_host(initial=[{"model_id": "a", "host_id": "h"}])
    assert brute_force(doc) == (Fraction(3), 2)


def test_brute_force_hand_worked_cold_start() -> None:
    # nothing initial: a at 0 then b at 2 serves 1 + 1 with 3 mutations; b alone, loaded at 0 or
    # 1, serves 1 at minute 2 and 1 at minute 3 (concurrency 1) with a single load
    assert brute_force(_one_host()) == (Fraction(2), 1)


def test_simulate_hand_worked_schedule() -> None:
    doc = _one_host(initial=[{"model_id": "a", "host_id": "h"}])
    schedule = [
        {"minute": 2, "action": "unload", "model_id": "a", "host_id": "h"},
        {"minute": 2, "action": "load", "model_id": "b", "host_id": "h"},
    ]
    assert simulate(doc, schedule) == (Fraction(3), 2)


def test_simulate_rejects_an_early_unload() -> None:
    schedule = [
        {"minute": 0, "action": "load", "model_id": "a", "host_id": "h"},
        {"minute": 1, "action": "unload", "model_id": "a", "host_id": "h"},
    ]
    with pytest.raises(AssertionError, match="before the hold"):
        simulate(_one_host(), schedule)


def test_simulate_rejects_overfull_host() -> None:
    schedule = [
        {"minute": 0, "action": "load", "model_id": "a", "host_id": "h"},
        {"minute": 0, "action": "load", "model_id": "b", "host_id": "h"},
    ]
    with pytest.raises(AssertionError, match="memory or slots"):
        simulate(_one_host(), schedule)
