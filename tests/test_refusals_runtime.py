"""Every refusal raised in grid/runtime and grid/api carries a stable code, a sentence and a
fix (shown as "To fix: ..."), read from the source itself (ast): a GridError (or a subclass)
built without them fails here, naming the file and line."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grid/runtime", "grid/api")
# Refusal constructors: name -> index of the code argument (message and fix follow it).
REFUSALS = {"GridError": 0, "SnapshotError": 0, "error_body": 0, "_body": 2}
CODE = re.compile(r"^[a-z][a-z0-9_]*$")
# A fix that names a Grid command: that command is the refusal's next command.
NAMES_A_COMMAND = re.compile(r"`grid [^`]+`|\bgrid (allocator|up|down|plan|validate|test) ")
FIELDS = ("code", "message", "fix")


@dataclass(frozen=True)
class Construction:
    where: str
    code: ast.expr | None
    message: ast.expr | None
    fix: ast.expr | None
    next_command: ast.expr | None
    spread: bool  # *args or **kwargs: the fields come from elsewhere


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _fields(call: ast.Call, first: int, names: tuple[str, ...]) -> dict[str, ast.expr | None]:
    """The code, message and fix expressions of a call whose code is positional `first`."""
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    out: dict[str, ast.expr | None] = {}
    for i, field in enumerate(names):
        pos = first + i
        out[field] = call.args[pos] if len(call.args) > pos else kw.get(field)
    return out


Factory = tuple[int, tuple[str, ...], dict[str, ast.expr | None], ast.expr | None]


def _factories(tree: ast.Module) -> dict[str, Factory]:
    """Local helpers that build a refusal from their own parameters (`_forbidden(code, msg,
    fix)`): their call sites are refusals too. name -> (index of the first refusal parameter
    among the helper's positional parameters, the refusal fields in order, the next command
    the helper sets itself)."""
    out: dict[str, Factory] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call) or _name(call.func) not in REFUSALS:
                continue
            got = _fields(call, REFUSALS[_name(call.func)], FIELDS)
            forwarded = {
                f: params.index(e.id)
                for f, e in got.items()
                if isinstance(e, ast.Name) and e.id in params
            }
            if "code" in forwarded:
                ordered = tuple(sorted(forwarded, key=lambda f: forwarded[f]))
                own = next((k.value for k in call.keywords if k.arg == "next_command"), None)
                out[fn.name] = (forwarded["code"], ordered, got, own)
    return out


def _constructions(path: Path) -> list[Construction]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    factories = _factories(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        next_command = next((k.value for k in node.keywords if k.arg == "next_command"), None)
        if name in REFUSALS:
            got = _fields(node, REFUSALS[name], FIELDS)
        elif name in factories:
            first, names, inner, own = factories[name]
            next_command = next_command or own
            got = inner | _fields(node, first, names)  # the helper's own text otherwise
        else:
            continue
        if any(isinstance(e, ast.Name) for e in got.values()) and _inside_factory(
            node, tree, factories
        ):
            continue  # the helper's own construction: checked at its call sites
        out.append(
            Construction(
                where=f"{path.relative_to(ROOT)}:{node.lineno}",
                code=got["code"],
                message=got["message"],
                fix=got["fix"],
                next_command=next_command,
                spread=any(k.arg is None for k in node.keywords)
                or any(isinstance(a, ast.Starred) for a in node.args),
            )
        )
    return out


def _inside_factory(node: ast.Call, tree: ast.Module, factories: dict[str, Factory]) -> bool:
    for fn in ast.walk(tree):
        if (
            isinstance(fn, ast.FunctionDef)
            and fn.name in factories
            and any(n is node for n in ast.walk(fn))
        ):
            return True
    return False


def _all() -> list[Construction]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found += _constructions(path)
    return found


def _empty(expr: ast.expr | None) -> bool:
    if expr is None:
        return True
    return isinstance(expr, ast.Constant) and (expr.value is None or expr.value == "")


def _text(expr: ast.expr | None) -> str:
    """The literal text of a fix (an f-string's literal parts), "" when it is computed."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr):
        return "".join(_text(v) for v in expr.values if isinstance(v, ast.Constant))
    return ""


def problems(c: Construction) -> list[str]:
    if c.spread:
        return []  # forwarded: checked where the fields are written
    out = []
    if _empty(c.code):
        out.append("no code")
    elif isinstance(c.code, ast.Constant) and not CODE.match(str(c.code.value)):
        out.append(f"code {c.code.value!r} is not a stable snake_case code")
    if _empty(c.message):
        out.append("no sentence")
    if _empty(c.fix):
        out.append("no fix")
    elif isinstance(c.fix, ast.Constant) and str(c.fix.value).lower().startswith("to fix"):
        out.append("the fix repeats 'To fix:' (the renderer adds it)")
    if c.next_command is not None and _empty(c.next_command):
        out.append("an empty next_command")
    fix_text = _text(c.fix)
    if c.next_command is None and fix_text and NAMES_A_COMMAND.search(fix_text):
        out.append("the fix names a command but next_command is not set")
    return out


def test_the_scan_finds_the_refusals() -> None:
    found = _all()
    assert len(found) > 30  # the scan reads the packages (not an empty walk)
    assert any(c.where.startswith("grid/api/") for c in found)
    assert any(c.where.startswith("grid/runtime/") for c in found)


def test_the_checker_flags_a_refusal_without_a_fix(tmp_path: Path) -> None:
    sample = ROOT / "grid" / "runtime" / "_refusal_sample_for_test.py"
    try:
        sample.write_text(
            "from grid.fleet.errors import GridError\n"
            "def f():\n"
            '    raise GridError("bad_thing", "a sentence")\n'
            "def g():\n"
            '    raise GridError("Bad Thing", "", fix="")\n'
            "def h(**kw):\n"
            '    raise GridError("ok_code", "a sentence", fix="do this", **kw)\n'
            "def _forbidden(code, message, fix):\n"
            "    return GridError(code, message, fix=fix)\n"
            "def k():\n"
            '    raise _forbidden("no_entry", "a sentence", "")\n',
            encoding="utf-8",
        )
        seen = [problems(c) for c in _constructions(sample)]
    finally:
        sample.unlink()
    assert seen == [
        ["no fix"],
        ["code 'Bad Thing' is not a stable snake_case code", "no sentence", "no fix"],
        [],
        ["no fix"],  # a helper's call site is a refusal too
    ]


def test_every_refusal_in_runtime_and_api_has_code_sentence_and_fix() -> None:
    bad = [f"{c.where}: {', '.join(p)}" for c in _all() if (p := problems(c))]
    assert bad == []
