"""The inputs of `grid capacity`: host templates (one host object per file, JSON or TOML),
--max and the snapshot's demand.

A template is validated exactly like a host of a snapshot (schema v1), and must describe a host
that could take work the day it is added: an admitting state and Grid ownership. Residencies
are dropped (a host copied from a live fleet is fine: an added host starts empty). Its
`host_id` names the template; added hosts get IDs derived from it (`<host_id>-1`, `-2`, …).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from grid.fleet import (
    ADMITTING_STATES,
    FleetSnapshot,
    GridError,
    Host,
    Ownership,
    Plan,
    SnapshotError,
    parse_snapshot,
)

DEFAULT_MAX = 64  # hosts per template considered by default


def _refuse(code: str, message: str, fix: str, path: Path, field: str = "") -> GridError:
    return GridError(
        code,
        message,
        fix=fix,
        path=f"{path}:{field}" if field else str(path),
        next_command="cat models/templates/gpu-server.json  # a valid template",
    )


def _read(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise GridError(
            "template_not_found",
            f"no template file at {path}",
            fix="check the path; a GPU-server template ships under models/templates/",
            next_command="ls models/templates/",
        ) from None
    except OSError as exc:
        raise GridError(
            "template_unreadable",
            f"cannot read {path}: {exc.strerror}",
            fix="make the file readable by this user (its mode and owner), or pass another path",
        ) from None
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(raw.decode("utf-8"))
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _refuse(
            "invalid_template",
            f"the template is not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}: "
            f"{exc}",
            "fix the syntax error at the position shown",
            path,
        ) from None


def load_template(path: str | Path) -> Host:
    """Read and check one host template."""
    p = Path(path)
    data = _read(p)
    if not isinstance(data, dict):
        raise _refuse(
            "invalid_template",
            "a template must be one host object (as under `hosts` in a snapshot)",
            'write {"host_id": "gpu-server", "capacity_mb": 81920, ...}',
            p,
        )
    try:
        # Validated as the only host of a snapshot: the same rules, codes and messages.
        host = parse_snapshot({"schema_version": 1, "now": 0.0, "hosts": [data]}).hosts[0]
    except SnapshotError as err:
        field = err.path.removeprefix("hosts[0].").removeprefix("hosts[0]")
        raise _refuse(
            "invalid_template",
            f"the template is not a valid host: {err.message}",
            err.fix.replace("hosts[0].", "").replace("the snapshot", "the template")
            or "correct the template",
            p,
            field,
        ) from None
    # A template copied from a live host may list its residencies; an added host starts empty.
    host.residencies = []
    if host.state not in ADMITTING_STATES or host.ownership is Ownership.MANUAL:
        raise _refuse(
            "invalid_template",
            f"a template host in state {host.state.value!r} with ownership "
            f"{host.ownership.value!r} could never take work",
            'use "state": "accepting" and "ownership": "managed"',
            p,
            "state",
        )
    return host


def load_templates(paths: list[Path]) -> list[Host]:
    templates = [load_template(p) for p in paths]
    seen: dict[str, Path] = {}
    for path, template in zip(paths, templates, strict=True):
        if template.host_id in seen:
            raise _refuse(
                "duplicate_template",
                f"templates {seen[template.host_id]} and {path} share host_id "
                f"{template.host_id!r}; answers are keyed by it",
                "give every template its own host_id",
                path,
                "host_id",
            )
        seen[template.host_id] = path
    return templates


def check_max(max_per_template: int) -> None:
    if max_per_template <= 0:
        raise GridError(
            "invalid_max",
            f"--max {max_per_template} leaves no host to add; it must be 1 or more",
            fix="pass --max with a positive number of hosts per template, e.g. --max 16",
            next_command="grid capacity SNAPSHOT --add TEMPLATE.json --max 16",
        )


def check_demand(snap: FleetSnapshot, before: Plan, source: str = "SNAPSHOT") -> None:
    if not snap.demand or sum(before.desired_replicas.values()) == 0:
        raise GridError(
            "no_demand",
            "the snapshot has no demand, so no replica is desired and there is nothing to size",
            fix='add a `demand` entry per model, e.g. "demand": {"coder": {"desired_replicas": 2}}',
            next_command=f"grid validate {source}",
        )
