"""Read, validate and write fleet snapshots (JSON, or TOML for hand-written fleets).

Every failure is a `SnapshotError` with a stable code and the field path, for example
`invalid_value at hosts[2].capacity_mb`. Cross-reference rules live here so that the planner
can assume a consistent snapshot.
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from grid.fleet.errors import SnapshotError
from grid.fleet.files import atomic_write_text
from grid.fleet.models import CEILING_ERROR, FleetSnapshot
from grid.fleet.schema import unknown_field_fix

_PYDANTIC_CODES = {
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "enum": "unknown_enum_value",
    "literal_error": "unknown_enum_value",
    "finite_number": "non_finite_number",
    "greater_than_equal": "negative_number",
    "greater_than": "out_of_range",
    "less_than_equal": "out_of_range",
    "less_than": "out_of_range",
    CEILING_ERROR: CEILING_ERROR,
    "string_too_long": "value_too_long",
}


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def snapshot_error_from(exc: ValidationError) -> SnapshotError:
    """The first validation error of a snapshot as a `SnapshotError` with a stable code."""
    # An unknown field comes first: a misspelt name is usually why a required one is missing.
    errors = exc.errors()
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    kind = str(first.get("type", "invalid_value"))
    code = _PYDANTIC_CODES.get(kind, "invalid_value")
    path = _path(tuple(first.get("loc", ())))
    value = first.get("input")
    if code == "negative_number" and isinstance(value, float | int) and not math.isfinite(value):
        code = "non_finite_number"
    message = f"{first.get('msg', 'invalid value')} (got {value!r})"
    if kind == "missing":
        message = "this field is required"
    if kind == "extra_forbidden":
        message = f"`{path.rpartition('.')[2]}` is not a field of schema v1 here"
    ctx = first.get("ctx") or {}
    if code == CEILING_ERROR:
        message = f"{path} is {ctx.get('shown', value)}, above the ceiling of {ctx.get('limit')}"
        message += f" ({ctx.get('what')}): the planner cannot handle larger values"
    fix = {
        "missing_field": f"add `{path}` to the snapshot",
        "unknown_field": unknown_field_fix(tuple(first.get("loc", ())), path),
        "unknown_enum_value": f"use one of the documented values for `{path}`",
        "non_finite_number": f"give `{path}` a finite number",
        "negative_number": f"give `{path}` a value of zero or more",
        "value_too_long": f"shorten `{path}` to at most {ctx.get('max_length')} characters",
        CEILING_ERROR: f"give `{path}` a value of at most {ctx.get('limit')}"
        + (" (memory and disk are whole megabytes)" if "MB" in str(ctx.get("what")) else ""),
    }.get(code, f"correct `{path}`")
    extra = len(exc.errors()) - 1
    if extra:
        message += f"; {extra} more problem{'s' if extra > 1 else ''} after this one"
    return SnapshotError(code=code, message=message, fix=fix, path=path)


def _check_cross_references(snap: FleetSnapshot) -> None:
    seen: set[str] = set()
    for i, host in enumerate(snap.hosts):
        if host.host_id in seen:
            raise SnapshotError(
                "duplicate_id",
                f"host_id {host.host_id!r} appears more than once",
                fix="give every host a unique host_id",
                path=f"hosts[{i}].host_id",
            )
        seen.add(host.host_id)
        resident: set[str] = set()
        for j, res in enumerate(host.residencies):
            if res.model_id in resident:
                raise SnapshotError(
                    "duplicate_residency",
                    f"model {res.model_id!r} is listed twice on host {host.host_id!r}",
                    fix="report one residency per model per host",
                    path=f"hosts[{i}].residencies[{j}].model_id",
                )
            resident.add(res.model_id)
    models: set[str] = set()
    for i, prof in enumerate(snap.models):
        if prof.model_id in models:
            raise SnapshotError(
                "duplicate_id",
                f"model_id {prof.model_id!r} appears more than once",
                fix="give every model profile a unique model_id",
                path=f"models[{i}].model_id",
            )
        models.add(prof.model_id)
        if prof.min_replicas > prof.max_replicas:
            raise SnapshotError(
                "replica_bounds",
                f"min_replicas {prof.min_replicas} exceeds max_replicas {prof.max_replicas}",
                fix="lower min_replicas or raise max_replicas",
                path=f"models[{i}].min_replicas",
            )
        if prof.artifact_source and not (prof.artifact_sha256 and prof.artifact_size_mb):
            raise SnapshotError(
                "artifact_source_incomplete",
                "an artifact_source needs artifact_sha256 and artifact_size_mb too",
                fix="add the exact digest and the size ceiling, or remove artifact_source",
                path=f"models[{i}].artifact_source",
            )
    for model_id in snap.demand:
        if model_id not in models:
            raise SnapshotError(
                "unknown_model",
                f"demand names model {model_id!r}, which has no profile",
                fix="add a profile for it under `models`, or remove the demand entry",
                path=f"demand.{model_id}",
            )


def parse_snapshot(data: Any, *, now: float | None = None) -> FleetSnapshot:
    """Validate a decoded document. `now` fills a missing `now` and missing heartbeats."""
    if not isinstance(data, dict):
        raise SnapshotError(
            "invalid_document",
            "a fleet snapshot must be a JSON object",
            fix="start the file with { and give schema_version, hosts and models",
        )
    data = dict(data)
    version = data.get("schema_version", 1)
    if version != 1:
        raise SnapshotError(
            "unsupported_schema_version",
            f"schema_version {version!r} is not supported (this Grid reads 1)",
            fix="write the snapshot in schema_version 1",
            path="schema_version",
        )
    if data.get("now") is None:
        if now is None:
            raise SnapshotError(
                "missing_field", "this field is required", fix="add `now`", path="now"
            )
        data["now"] = now
    try:
        snap = FleetSnapshot.model_validate(data)
    except ValidationError as exc:
        raise snapshot_error_from(exc) from None
    for host in snap.hosts:
        if host.last_heartbeat is None:
            host.last_heartbeat = snap.now  # hand-written what-if fleets are "seen now"
    _check_cross_references(snap)
    return snap


def load_snapshot(path: str | Path, *, now: float | None = None) -> FleetSnapshot:
    """Read a snapshot file (JSON, or TOML by extension)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(
            "file_not_found",
            f"no snapshot file at {p}",
            fix="check the path; example fleets are under models/",
            next_command="ls models/",
        ) from None
    except OSError as exc:
        raise SnapshotError(
            "file_unreadable",
            f"cannot read {p}: {exc.strerror}",
            fix="make the file readable by this user (its mode and owner), or pass another path",
        ) from None
    if not raw.strip():
        raise SnapshotError(
            "empty_snapshot",
            f"{p} is empty: a fleet snapshot lists hosts and models",
            fix="write schema_version, hosts and models into the file "
            "(`grid lab generate-fleet` writes an example)",
            next_command="grid lab generate-fleet --hosts 8 --models 4",
        )
    try:
        if p.suffix.lower() == ".toml":
            data: Any = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SnapshotError(
            "invalid_syntax",
            f"{p} is not valid {'TOML' if p.suffix.lower() == '.toml' else 'JSON'}: {exc}",
            fix="fix the syntax error at the position shown",
        ) from None
    _check_document(data, p)
    return parse_snapshot(data, now=now)


def _check_document(data: Any, path: Path) -> None:
    """A snapshot file declares its schema and describes something: never silently v1 of
    nothing (parse_snapshot itself accepts builders' documents without a version)."""
    if not isinstance(data, dict):
        return  # parse_snapshot names the problem
    if "schema_version" not in data:
        raise SnapshotError(
            "missing_field",
            f"{path} does not declare schema_version",
            fix='add "schema_version": 1 at the top of the snapshot (this Grid reads 1)',
            path="schema_version",
        )
    if not data.get("hosts") and not data.get("models"):
        raise SnapshotError(
            "empty_snapshot",
            f"{path} lists no hosts and no models: there is nothing to plan",
            fix="add the fleet's hosts and the model profiles to plan for",
            next_command="grid lab generate-fleet --hosts 8 --models 4",
        )


def dump_json(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, allow_nan=False)


def save_snapshot(snap: FleetSnapshot, path: str | Path) -> None:
    """Write atomically (see grid/fleet/files.py); a snapshot holds no secret."""
    text = dump_json(snap.model_dump(mode="json", exclude_defaults=False))
    atomic_write_text(Path(path), text, 0o644)
