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

from grid.fleet.errors import GridError
from grid.fleet.snapshot import _from_validation_error

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


def _check_down(trace: Trace) -> None:
    for i, host in enumerate(trace.hosts):
        spans = sorted(host.down)
        for j, (start, end) in enumerate(host.down):
            if not 0 <= start < end <= trace.minutes:
                raise _err(
                    "down_out_of_range",
                    f"down interval [{start}, {end}) is not inside [0, {trace.minutes}) "
                    "with start < end",
                    f"hosts[{i}].down[{j}]",
                    f"give [start, end) with 0 <= start < end <= {trace.minutes}",
                )
        for (_s0, e0), (s1, _e1) in itertools.pairwise(spans):
            if s1 < e0:
                j = host.down.index((s1, _e1))
                raise _err(
                    "down_overlap",
                    f"down interval starting at {s1} overlaps one that ends at {e0}",
                    f"hosts[{i}].down[{j}]",
                    "merge overlapping down intervals into one",
                )


def _check_demand(trace: Trace, models: set[str]) -> None:
    for model_id, series in trace.demand.items():
        path = f"demand.{model_id}"
        if model_id not in models:
            raise _err(
                "unknown_model",
                f"demand names model {model_id!r}, which is not under `models`",
                path,
                "add the model under `models`, or remove its demand",
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
        base = _from_validation_error(exc)
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
    _check_demand(trace, {m.model_id for m in trace.models})
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
    empty host). `up[h][t]`: host h is not down at minute t. `demand[m][t]` and `conc[m]` are
    scaled by `scale`; `initial` holds (m, h) index pairs.
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

    def pairs(self) -> list[tuple[int, int]]:
        return [
            (m, h)
            for m in range(len(self.model_ids))
            for h in range(len(self.host_ids))
            if self.eligible[m][h]
        ]


def _decimals(value: float) -> int:
    exponent = Decimal(repr(value)).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _scaled(value: float, digits: int) -> int:
    return int(Decimal(repr(value)).scaleb(digits).to_integral_value(ROUND_HALF_EVEN))


def choose_scale(trace: Trace) -> int:
    """The exponent k of the scale S = 10**k (module docstring)."""
    values = [m.replica_concurrency for m in trace.models]
    values += [v for series in trace.demand.values() for v in series]
    digits = min(MAX_DECIMALS, max((_decimals(v) for v in values), default=0))
    total = sum((Decimal(repr(v)) for series in trace.demand.values() for v in series), Decimal(0))
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
    demand = tuple(
        tuple(_scaled(v, digits) for v in trace.demand[m.model_id])
        if m.model_id in trace.demand
        else zero
        for m in models
    )
    eligible = tuple(
        tuple(
            bool(set(h.runtimes) & set(m.runtimes)) and m.memory_mb <= h.capacity_mb for h in hosts
        )
        for m in models
    )
    h_index = {h.host_id: i for i, h in enumerate(hosts)}
    m_index = {m.model_id: i for i, m in enumerate(models)}
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
        conc=tuple(max(1, _scaled(m.replica_concurrency, digits)) for m in models),
        demand=demand,
        eligible=eligible,
        up=tuple(up),
        initial=frozenset((m_index[p.model_id], h_index[p.host_id]) for p in trace.initial),
    )
