"""Every refusal raised in grid/runtime, grid/api, grid/cli, grid/lab, grid/fleet and
grid/demand carries a stable code, a sentence and a fix (shown as "To fix: ..."), and a fix
that names a `grid ...` command sets that command as next_command; read from the source itself
(ast): a GridError (or a subclass) built without them fails here, naming the file and line."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("grid/runtime", "grid/api", "grid/cli", "grid/lab", "grid/fleet", "grid/demand")
# Refusal constructors: name -> index of the code argument (message and fix follow it).
REFUSALS = {"GridError": 0, "SnapshotError": 0, "TraceError": 0, "error_body": 0, "_body": 2}
# Where next_command sits positionally, counted from the code (GridError has `path` before it).
NEXT_AFTER_CODE = {"GridError": 4, "SnapshotError": 4, "TraceError": 4, "error_body": 3, "_body": 3}
CODE = re.compile(r"^[a-z][a-z0-9_]*$")
# A fix that names a Grid command: that command is the refusal's next command.
COMMANDS = "plan|validate|reconcile|up|down|allocator|test|models|chat|lab|capacity"
NAMES_A_COMMAND = re.compile(rf"`grid [^`]+`|\bgrid ({COMMANDS}) ")
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


def _next_command(call: ast.Call) -> ast.expr | None:
    """The next_command argument of a refusal constructor call, keyword or positional."""
    name = _name(call.func)
    kw = next((k.value for k in call.keywords if k.arg == "next_command"), None)
    pos = REFUSALS.get(name, 0) + NEXT_AFTER_CODE.get(name, 99)
    return kw if kw is not None or len(call.args) <= pos else call.args[pos]


def _fields(call: ast.Call, first: int, names: tuple[str, ...]) -> dict[str, ast.expr | None]:
    """The code, message and fix expressions of a call whose code is positional `first`."""
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    out: dict[str, ast.expr | None] = {}
    for i, field in enumerate(names):
        pos = first + i
        out[field] = call.args[pos] if len(call.args) > pos else kw.get(field)
    return out


# A local helper that builds a refusal from its own parameters: (field -> (position, name,
# default) of the helper parameter it comes from, the fields the helper fills itself, its own
# next command).
Param = tuple[int, str, ast.expr | None]
Factory = tuple[dict[str, Param], dict[str, ast.expr | None], ast.expr | None]


def _factories(tree: ast.Module) -> dict[str, Factory]:
    """Local helpers that build a refusal from their own parameters (`_forbidden(code, msg,
    fix)`, `_err(code, message, path, fix)`, `_invalid(message)`): their call sites are
    refusals too, each field read from the argument of the parameter the helper forwards it
    from, the others from the helper's own construction."""
    out: dict[str, Factory] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        defaults = dict(
            zip(params[len(params) - len(fn.args.defaults) :], fn.args.defaults, strict=True)
        )
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call) or _name(call.func) not in REFUSALS:
                continue
            got = _fields(call, REFUSALS[_name(call.func)], FIELDS)
            forwarded = {
                f: (params.index(e.id), e.id, defaults.get(e.id))
                for f, e in got.items()
                if isinstance(e, ast.Name) and e.id in params
            }
            if forwarded:
                own = _next_command(call)
                out[fn.name] = (forwarded, got, own)
    return out


def _call_site(call: ast.Call, factory: Factory) -> dict[str, ast.expr | None]:
    forwarded, inner, _ = factory
    kw = {k.arg: k.value for k in call.keywords if k.arg is not None}
    out = dict(inner)  # the helper's own text for the fields it does not forward
    for field, (pos, param, default) in forwarded.items():
        out[field] = call.args[pos] if len(call.args) > pos else kw.get(param, default)
    return out


def _constructions(path: Path) -> list[Construction]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    factories = _factories(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        next_command = _next_command(node)
        if name in REFUSALS:
            got = _fields(node, REFUSALS[name], FIELDS)
        elif name in factories:
            next_command = next_command or factories[name][2]
            got = _call_site(node, factories[name])
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
    for package in PACKAGES:
        assert any(c.where.startswith(f"{package}/") for c in found), package


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
            '    raise _forbidden("no_entry", "a sentence", "")\n'
            # A helper whose fix is not next to its code, and one with a default fix.
            "def _err(code, message, path, fix):\n"
            "    return GridError(code, message, fix=fix, path=path)\n"
            "def m():\n"
            '    raise _err("bad_trace", "a sentence", "minutes", "")\n'
            "def n():\n"
            '    raise _err("bad_trace", "a sentence", "", "run `grid lab oracle --help`")\n'
            'def _plan(code, why, fix="rerun the plan", where=""):\n'
            '    return GridError(code, why, fix, where, "grid plan x.json")\n'
            "def o():\n"
            '    raise _plan("plan_gone", "is gone")\n'
            "def q():\n"
            '    raise GridError("c", "s", "run `grid up`", "", "grid up")\n'
            # A helper that forwards only the sentence: the code and fix are its own.
            "def _bad(message):\n"
            '    return GridError("bad_input", message)\n'
            "def r():\n"
            '    raise _bad("a sentence")\n',
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
        ["no fix"],  # the path argument is not the fix
        ["the fix names a command but next_command is not set"],
        [],  # the default fix and the helper's own next command
        [],  # a positional next_command counts
        ["no fix"],
    ]


def test_every_refusal_in_the_scanned_packages_has_code_sentence_and_fix() -> None:
    bad = [f"{c.where}: {', '.join(p)}" for c in _all() if (p := problems(c))]
    assert bad == []
