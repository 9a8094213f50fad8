"""The oracle's input: a per-minute demand trace over a fixed topology (DESIGN.md, Oracle contract).

`parse_trace` validates a decoded document into a `Trace`; every refusal is a `TraceError` with a
stable code and the field path (`demand.a`, `hosts[1].down[0]`, ...). `compile_trace` turns a
valid trace into the integer `Problem` that the greedy schedule, the replayer and the CP-SAT
model share.

Exact integer scaling: demand values and replica concurrencies are read as the shortest decimal
that prints as the same float (`repr`), and all of them are multiplied by one power of ten,
S = 10**k, where k is the largest number of decimal places among them (k ≤ 6). Then demand × S
and concurrency × S are integers and served × S = min(demand × S, concurrency × S × ready) is an
integer, so the oracle's objective is exact. Values with more than six decimal places are
rounded half-to-even to six (the oracle's resolution is 1e-6 concurrency units); k is lowered
further only if Σ demand × S would exceed 10**15 (it never does for traces within the size cap).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet import GridError, snapshot_error_from

MAX_CELLS = 4_000_000  # hosts × models × minutes: beyond this the time-expanded model is too big
MAX_VALUE = 1_000_000.0  # demand and concurrency ceiling (keeps scaled sums inside int64)
MAX_DECIMALS = 6
MAX_MB = 2**30  # one PiB in MB
MAX_SCALED_TOTAL = 10**15


class TraceError(GridError):
    """A demand trace that cannot be read or does not validate."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TraceHost(_Strict):
    host_id: str = Field(min_length=1)
    capacity_mb: int = Field(ge=0, le=MAX_MB)
    max_models: int = Field(default=0, ge=0)
    runtimes: list[str] = Field(default_factory=list)
    down: list[tuple[int, int]] = Field(default_factory=list)
    # Optional physics (docs/oracle.md, "Extended traces"); the defaults are the contract's.
    speed: float = Field(default=1.0, gt=0, le=MAX_VALUE, allow_inf_nan=False)
    throttle: list[tuple[int, int, float]] = Field(default_factory=list)


class TraceModel(_Strict):
    model_id: str = Field(min_length=1)
    memory_mb: int = Field(ge=0, le=MAX_MB)
    runtimes: list[str] = Field(default_factory=list)
    replica_concurrency: float = Field(default=1.0, gt=0, le=MAX_VALUE, allow_inf_nan=False)


class TracePlacement(_Strict):
    model_id: str
    host_id: str


class Trace(_Strict):
    schema_version: int = 1
    minutes: int = Field(ge=1)
    hold_minutes: int = Field(default=2, ge=0)
    load_minutes: int = Field(default=1, ge=0)
    hosts: list[TraceHost]
    models: list[TraceModel]
    demand: dict[str, list[float]] = Field(default_factory=dict)
    initial: list[TracePlacement] = Field(default_factory=list)
    classes: dict[str, list[str]] = Field(default_factory=dict)


def _err(code: str, message: str, path: str, fix: str) -> TraceError:
    return TraceError(code, message, fix=fix, path=path, next_command="grid lab oracle --help")


def _check_ids(trace: Trace) -> None:
    hosts = [h.host_id for h in trace.hosts]
    models = [m.model_id for m in trace.models]
    for kind, idents in (("host", hosts), ("model", models)):
        seen: set[str] = set()
        for i, ident in enumerate(idents):
            if ident in seen:
                raise _err(
                    "duplicate_id",
                    f"{kind}_id {ident!r} appears more than once",
                    f"{kind}s[{i}].{kind}_id",
                    f"give every {kind} a unique {kind}_id",
                )
            seen.add(ident)


def _check_spans(trace: Trace, i: int, name: str, spans: list[tuple[int, int]], fix: str) -> None:
    """Host i's `name` intervals: inside [0, minutes) with start < end, and not overlapping."""
    for j, (start, end) in enumerate(spans):
        if not 0 <= start < end <= trace.minutes:
            raise _err(
                f"{name}_out_of_range",
                f"{name} interval [{start}, {end}) is not inside [0, {trace.minutes}) "
                "with start < end",
                f"hosts[{i}].{name}[{j}]",
                f"give [start, end) with 0 <= start < end <= {trace.minutes}",
            )
    ordered = sorted(spans)
    for (_s0, e0), (s1, e1) in itertools.pairwise(ordered):
        if s1 < e0:
            raise _err(
                f"{name}_overlap",
                f"{name} interval starting at {s1} overlaps one that ends at {e0}",
                f"hosts[{i}].{name}[{spans.index((s1, e1))}]",
                fix,
            )


def _check_down(trace: Trace) -> None:
    for i, host in enumerate(trace.hosts):
        _check_spans(trace, i, "down", list(host.down), "merge overlapping down intervals into one")


def _check_throttle(trace: Trace) -> None:
    for i, host in enumerate(trace.hosts):
        spans = [(a, b) for a, b, _f in host.throttle]
        _check_spans(trace, i, "throttle", spans, "give non-overlapping throttle intervals")
        for j, (_a, _b, fraction) in enumerate(host.throttle):
            if not (math.isfinite(fraction) and 0 < fraction <= 1):
                raise _err(
                    "out_of_range",
                    f"throttle fraction {fraction!r} is outside (0, 1]",
                    f"hosts[{i}].throttle[{j}]",
                    "give the fraction of the host's speed left while throttled, e.g. 0.5",
                )


def _check_classes(trace: Trace, models: set[str]) -> None:
    for name, members in trace.classes.items():
        path = f"classes.{name}"
        if name in models or not name:
            raise _err(
                "duplicate_id",
                f"class {name!r} has the name of a model" if name else "a class needs a name",
                path,
                "give every demand class a name that no model has",
            )
        for k, model_id in enumerate(members):
            if model_id not in models:
                raise _err(
                    "unknown_model",
                    f"class {name!r} names model {model_id!r}, which is not under `models`",
                    f"{path}[{k}]",
                    "name models listed under `models`",
                )
            if model_id in members[:k]:
                raise _err(
                    "duplicate_id",
                    f"class {name!r} lists model {model_id!r} twice",
                    f"{path}[{k}]",
                    "list each model of a class once",
                )


def _check_demand(trace: Trace, models: set[str]) -> None:
    for model_id, series in trace.demand.items():
        path = f"demand.{model_id}"
        if model_id not in models and model_id not in trace.classes:
            raise _err(
                "unknown_model",
                f"demand names {model_id!r}, which is neither under `models` nor under `classes`",
                path,
                "add the model under `models` (or the class under `classes`), or remove its demand",
            )
        if len(series) != trace.minutes:
            raise _err(
                "demand_length",
                f"demand has {len(series)} values but the trace has {trace.minutes} minutes",
                path,
                "give exactly one value per minute",
            )
        for t, value in enumerate(series):
            if not math.isfinite(value):
                raise _err(
                    "non_finite_number", f"{value!r} is not finite", f"{path}[{t}]", "give a number"
                )
            if value < 0 or value > MAX_VALUE:
                raise _err(
                    "out_of_range",
                    f"demand {value!r} is outside [0, {MAX_VALUE:g}]",
                    f"{path}[{t}]",
                    "give a non-negative offered concurrency",
                )


def _check_initial(trace: Trace) -> None:
    hosts = {h.host_id: h for h in trace.hosts}
    models = {m.model_id: m for m in trace.models}
    used: dict[str, list[int]] = {}
    seen: set[tuple[str, str]] = set()
    for i, place in enumerate(trace.initial):
        path = f"initial[{i}]"
        if place.model_id not in models:
            raise _err(
                "unknown_model",
                f"initial replica names model {place.model_id!r}, which is not under `models`",
                f"{path}.model_id",
                "name a model listed under `models`",
            )
        if place.host_id not in hosts:
            raise _err(
                "unknown_host",
                f"initial replica names host {place.host_id!r}, which is not under `hosts`",
                f"{path}.host_id",
                "name a host listed under `hosts`",
            )
        if (place.model_id, place.host_id) in seen:
            raise _err(
                "duplicate_initial",
                f"{place.model_id!r} on {place.host_id!r} is listed twice",
                path,
                "list each initial replica once (at most one replica per model and host)",
            )
        seen.add((place.model_id, place.host_id))
        host, model = hosts[place.host_id], models[place.model_id]
        if not set(host.runtimes) & set(model.runtimes):
            raise _err(
                "runtime_mismatch",
                f"host {host.host_id!r} has no runtime of model {model.model_id!r}",
                path,
                "place the replica on a host that shares a runtime with the model",
            )
        mine = used.setdefault(host.host_id, [])
        mine.append(model.memory_mb)
        if sum(mine) > host.capacity_mb or (host.max_models and len(mine) > host.max_models):
            raise _err(
                "initial_over_capacity",
                f"initial replicas on {host.host_id!r} exceed its capacity_mb or max_models",
                path,
                "remove initial replicas from that host or raise its capacity",
            )


def parse_trace(data: Any) -> Trace:
    """Validate a decoded trace document (every problem is a `TraceError`)."""
    if not isinstance(data, dict):
        raise _err(
            "invalid_document",
            "a trace must be a JSON object",
            "",
            "start the file with { and give minutes, hosts, models and demand",
        )
    version = data.get("schema_version", 1)
    if version != 1:
        raise _err(
            "unsupported_schema_version",
            f"schema_version {version!r} is not supported (this Grid reads 1)",
            "schema_version",
            "write the trace in schema_version 1",
        )
    try:
        trace = Trace.model_validate(data)
    except ValidationError as exc:
        base = snapshot_error_from(exc)
        value = exc.errors()[0].get("input")
        if base.code == "negative_number" and isinstance(value, int | float) and value >= 0:
            base.code = "out_of_range"  # e.g. minutes: 0 is not negative, but still too small
        raise _err(
            base.code, base.message, base.path, base.fix.replace("snapshot", "trace")
        ) from None
    _check_ids(trace)
    cells = len(trace.hosts) * len(trace.models) * trace.minutes
    if cells > MAX_CELLS:
        raise _err(
            "trace_too_large",
            f"hosts × models × minutes = {cells} exceeds {MAX_CELLS}",
            "minutes",
            "shorten the trace or split the fleet",
        )
    _check_down(trace)
    _check_throttle(trace)
    model_ids = {m.model_id for m in trace.models}
    _check_classes(trace, model_ids)
    _check_demand(trace, model_ids)
    _check_initial(trace)
    return trace


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace file (JSON)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise _err(
            "file_not_found",
            f"no trace file at {p}",
            "",
            "check the path; examples: models/oracle/",
        ) from None
    except OSError as exc:
        raise _err(
            "file_unreadable", f"cannot read {p}: {exc.strerror}", "", "check its mode"
        ) from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _err(
            "invalid_syntax", f"{p} is not valid JSON: {exc}", "", "fix the syntax error shown"
        ) from None
    return parse_trace(data)


@dataclass(frozen=True)
class Problem:
    """A valid trace in integers. Index order follows the trace's host and model lists.

    `eligible[m][h]`: the model can be placed on the host (runtimes intersect and it fits an
    empty host). `up[h][t]`: host h is not down at minute t. `initial` holds (m, h) index pairs.

    Demand classes: class c < len(model_ids) is model c's own demand (served by it alone, the
    contract's `demand[m]`); the trace's `classes` follow, each served by any of
    `class_models[c]` (in the listed order of preference). `demand[c][t]` is scaled by `scale`.
    A replica of m on h serves `cap(m, h, t)` scaled units at minute t: replica_concurrency ×
    the host's speed × its throttle fraction at t (`caps[m][rate[h][t]]`); `conc[m]` is the most
    one replica of m serves anywhere (equal to every capacity of m on a uniform-speed trace).
    `solo[c]`: the class has one model and that model serves no other class with demand, so
    served(c, t) = min(demand, capacity) with no routing choice (or no model: never served).
    """

    trace: Trace
    minutes: int
    load: int
    hold: int
    scale: int
    host_ids: tuple[str, ...]
    model_ids: tuple[str, ...]
    capacity: tuple[int, ...]
    slots: tuple[int, ...]
    memory: tuple[int, ...]
    conc: tuple[int, ...]
    demand: tuple[tuple[int, ...], ...]
    eligible: tuple[tuple[bool, ...], ...]
    up: tuple[tuple[bool, ...], ...]
    initial: frozenset[tuple[int, int]]
    class_ids: tuple[str, ...] = ()
    class_models: tuple[tuple[int, ...], ...] = ()
    rate: tuple[tuple[int, ...], ...] = ()
    caps: tuple[tuple[int, ...], ...] = ()
    solo: tuple[bool, ...] = ()
    model_classes: tuple[tuple[int, ...], ...] = ()
    even: tuple[bool, ...] = ()  # per model: one capacity on every eligible host-minute

    def pairs(self) -> list[tuple[int, int]]:
        return [
            (m, h)
            for m in range(len(self.model_ids))
            for h in range(len(self.host_ids))
            if self.eligible[m][h]
        ]

    def cap(self, m: int, h: int, t: int) -> int:
        return self.caps[m][self.rate[h][t]]

    @property
    def uniform(self) -> bool:
        """Every replica of a model serves the same wherever and whenever it is ready."""
        return all(self.even)

    @property
    def classic(self) -> bool:
        """A contract-format problem: uniform speed and every class solo."""
        return self.uniform and all(self.solo)


def _decimals(value: Decimal) -> int:
    exponent = value.normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _dec(value: float) -> Decimal:
    return Decimal(repr(value))


def _scaled(value: Decimal, digits: int) -> int:
    return int(value.scaleb(digits).to_integral_value(ROUND_HALF_EVEN))


def _factors(trace: Trace) -> tuple[list[Decimal], list[list[int]]]:
    """Distinct host speed factors (speed × throttle fraction) and each host-minute's index."""
    factors: list[Decimal] = []
    index: dict[Decimal, int] = {}
    rows: list[list[int]] = []
    for host in trace.hosts:
        base = _dec(host.speed)
        per = [base] * trace.minutes
        for start, end, fraction in host.throttle:
            for t in range(start, end):
                per[t] = base * _dec(fraction)
        row = []
        for value in per:
            if value not in index:
                index[value] = len(factors)
                factors.append(value)
            row.append(index[value])
        rows.append(row)
    if not factors:
        factors.append(Decimal(1))
    return factors, rows


def choose_scale(trace: Trace) -> int:
    """The exponent k of the scale S = 10**k (module docstring)."""
    factors, _rows = _factors(trace)
    values = [_dec(v) for series in trace.demand.values() for v in series]
    values += [_dec(m.replica_concurrency) * f for m in trace.models for f in factors]
    digits = min(MAX_DECIMALS, max((_decimals(v) for v in values), default=0))
    total = sum((_dec(v) for series in trace.demand.values() for v in series), Decimal(0))
    while digits > 0 and total.scaleb(digits) > MAX_SCALED_TOTAL:
        digits -= 1
    return digits


def compile_trace(trace: Trace) -> Problem:
    digits = choose_scale(trace)
    hosts, models = trace.hosts, trace.models
    up = []
    for host in hosts:
        row = [True] * trace.minutes
        for start, end in host.down:
            for t in range(start, end):
                row[t] = False
        up.append(tuple(row))
    zero = (0,) * trace.minutes
    m_index = {m.model_id: i for i, m in enumerate(models)}
    class_ids = [m.model_id for m in models] + sorted(trace.classes)
    class_models = [(i,) for i in range(len(models))] + [
        tuple(m_index[x] for x in trace.classes[name]) for name in sorted(trace.classes)
    ]
    demand = tuple(
        tuple(_scaled(_dec(v), digits) for v in trace.demand[c]) if c in trace.demand else zero
        for c in class_ids
    )
    eligible = tuple(
        tuple(
            bool(set(h.runtimes) & set(m.runtimes)) and m.memory_mb <= h.capacity_mb for h in hosts
        )
        for m in models
    )
    factors, rate = _factors(trace)
    caps = tuple(
        tuple(max(1, _scaled(_dec(m.replica_concurrency) * f, digits)) for f in factors)
        for m in models
    )
    used = [
        {rate[h][t] for h in range(len(hosts)) if eligible[i][h] for t in range(trace.minutes)}
        for i in range(len(models))
    ]
    conc = tuple(max((caps[i][f] for f in used[i]), default=caps[i][0]) for i in range(len(models)))
    even = tuple(len({caps[i][f] for f in used[i]}) <= 1 for i in range(len(models)))
    active = [any(series) for series in demand]
    model_classes = tuple(
        tuple(c for c, members in enumerate(class_models) if i in members and active[c])
        for i in range(len(models))
    )
    solo = tuple(
        not members or (len(members) == 1 and model_classes[members[0]] in ((), (c,)))
        for c, members in enumerate(class_models)
    )
    h_index = {h.host_id: i for i, h in enumerate(hosts)}
    return Problem(
        trace=trace,
        minutes=trace.minutes,
        load=trace.load_minutes,
        hold=trace.hold_minutes,
        scale=10**digits,
        host_ids=tuple(h.host_id for h in hosts),
        model_ids=tuple(m.model_id for m in models),
        capacity=tuple(h.capacity_mb for h in hosts),
        slots=tuple(h.max_models for h in hosts),
        memory=tuple(m.memory_mb for m in models),
        conc=conc,
        demand=demand,
        eligible=eligible,
        up=tuple(up),
        initial=frozenset((m_index[p.model_id], h_index[p.host_id]) for p in trace.initial),
        class_ids=tuple(class_ids),
        class_models=tuple(class_models),
        rate=tuple(tuple(r) for r in rate),
        caps=caps,
        solo=solo,
        model_classes=model_classes,
        even=even,
    )
