"""The fleet snapshot's JSON Schema, generated from the pydantic models, and field suggestions.

`schemas/snapshot.schema.json` in the repository is `snapshot_schema()` as written by
`scripts/gen_schema.py`; a test fails when the committed file is stale. docs/snapshot.md is the
human page (its field tables are generated the same way). `closest_field` suggests the nearest
known field name for an unknown one, walking the schema along the error's field path.
"""

from __future__ import annotations

import json
from difflib import get_close_matches
from typing import Any, get_args

from pydantic import BaseModel

from grid.fleet.models import FleetSnapshot

SCHEMA_FILE = "schemas/snapshot.schema.json"
DOC_FILE = "docs/snapshot.md"
SCHEMA_ID = "https://grid.invalid/schemas/snapshot.schema.json"
TABLES_BEGIN = "<!-- BEGIN GENERATED FIELD TABLES (scripts/gen_schema.py) -->"
TABLES_END = "<!-- END GENERATED FIELD TABLES -->"


def snapshot_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a fleet snapshot, schema_version 1."""
    schema = FleetSnapshot.model_json_schema(mode="validation")
    # A file may omit `now` (planned as of the current time): not required in a file.
    schema["required"] = [name for name in schema.get("required", []) if name != "now"]
    if not schema["required"]:
        del schema["required"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "description": "Grid fleet snapshot, schema_version 1 (docs/snapshot.md)",
        **schema,
    }


def schema_text() -> str:
    return json.dumps(snapshot_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Follow $ref and pick the object branch of anyOf (an optional field)."""
    for _ in range(8):
        if "$ref" in node:
            node = defs[str(node["$ref"]).rsplit("/", 1)[-1]]
        elif "anyOf" in node:
            objects = [n for n in node["anyOf"] if n.get("type") != "null"]
            node = objects[0] if objects else node
            if "anyOf" in node:
                break
        else:
            break
    return node


def fields_at(path: tuple[int | str, ...]) -> list[str]:
    """The field names allowed in the object at `path` (a pydantic error location without its
    last part), or [] when the path does not lead to an object with named fields."""
    schema = snapshot_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    node = _resolve(schema, defs)
    for part in path:
        if isinstance(part, int):
            node = _resolve(node.get("items", {}), defs)
        elif part in node.get("properties", {}):
            node = _resolve(node["properties"][part], defs)
        elif isinstance(node.get("additionalProperties"), dict):
            node = _resolve(node["additionalProperties"], defs)  # a map: any key
        else:
            return []
    return sorted(node.get("properties", {}))


def closest_field(loc: tuple[int | str, ...]) -> str | None:
    """For an unknown field at `loc` (its last part is the unknown name), the nearest allowed
    field name there, if one is close enough to be a likely typo."""
    if not loc or not isinstance(loc[-1], str):
        return None
    matches = get_close_matches(loc[-1], fields_at(loc[:-1]), n=1, cutoff=0.6)
    return matches[0] if matches else None


def field_tables() -> str:
    """Markdown tables, one per object of the schema: field, type, default (required: none)."""
    schema = snapshot_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    objects = {"FleetSnapshot": schema, **defs}
    classes = _model_classes(FleetSnapshot, {})
    out: list[str] = []
    for name, node in objects.items():
        props = node.get("properties")
        if not props:
            continue
        required = set(node.get("required", []))
        model = classes.get(name)
        out += [f"### {name}", "", "| field | type | default |", "|---|---|---|"]
        for field, spec in props.items():
            default = "**required**" if field in required else _default(model, field, spec)
            out.append(f"| `{field}` | {_type(spec, defs)} | {default} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _model_classes(model: type[BaseModel], found: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """Every pydantic class reachable from `model`'s fields, by name (the schema's $defs)."""
    found[model.__name__] = model
    pending = [f.annotation for f in model.model_fields.values()]
    while pending:
        kind = pending.pop()
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            if kind.__name__ not in found:
                _model_classes(kind, found)
        else:
            pending.extend(get_args(kind))
    return found


def _default(model: type[BaseModel] | None, field: str, spec: dict[str, Any]) -> str:
    info = model.model_fields.get(field) if model is not None else None
    if info is not None and info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "its own defaults"
        return "`" + json.dumps(value) + "`"
    if "default" not in spec:
        return "the current time" if field == "now" else "none"
    return "`" + json.dumps(spec["default"]) + "`"


def unknown_field_fix(loc: tuple[int | str, ...], path: str) -> str:
    """The fix for an unknown field: the closest known name there, and where fields are listed."""
    where = "docs/snapshot.md, schemas/snapshot.schema.json"
    suggestion = closest_field(loc)
    if suggestion is None:
        return f"remove `{path}` or check its spelling against {where}"
    parent = path.rpartition(".")[0]
    better = f"{parent}.{suggestion}" if parent else suggestion
    return f"did you mean `{better}`? Rename it, or remove `{path}` (fields: {where})"


def _type(spec: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in spec:
        name = str(spec["$ref"]).rsplit("/", 1)[-1]
        target = defs.get(name, {})
        return _type(target, defs) if "enum" in target else f"[{name}](#{name.lower()})"
    if "anyOf" in spec:
        return " or ".join(_type(s, defs) for s in spec["anyOf"])
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    kind = spec.get("type", "any")
    if kind == "array":
        return f"list of {_type(spec.get('items', {}), defs)}"
    if kind == "object" and isinstance(spec.get("additionalProperties"), dict):
        return f"map of {_type(spec['additionalProperties'], defs)}"
    return str(kind)


def render_doc(current: str) -> str:
    """docs/snapshot.md with its generated section replaced by the current field tables."""
    head, sep, rest = current.partition(TABLES_BEGIN)
    if not sep:
        return current.rstrip() + f"\n\n{TABLES_BEGIN}\n{field_tables()}{TABLES_END}\n"
    _old, _sep, tail = rest.partition(TABLES_END)
    return f"{head}{TABLES_BEGIN}\n{field_tables()}{TABLES_END}{tail}"
