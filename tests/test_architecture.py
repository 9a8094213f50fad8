"""The house rules of DESIGN.md, checked on the source with `ast` (issue 8).

Every import of every module under grid/ counts, wherever it is written: module level and
function level (a function-level import is not a way out of a cycle), and in the stricter check
also under `if TYPE_CHECKING:`. `from package import name` counts as an import of the submodule
when `name` is one. The implicit import of a parent package's `__init__` is not counted.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ROOT / "grid"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PRODUCT.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return _modules()[name].name == "__init__.py"


def _resolve(module: str, level: int, importer: str) -> str:
    if level == 0:
        return module
    base = importer.split(".")
    if not _is_package(importer):
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, *, type_only: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement; those under `if TYPE_CHECKING:` only when `type_only`."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if _is_type_checking(node) and not type_only:
            assert isinstance(node, ast.If)
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imports(name: str, *, type_only: bool) -> Iterator[str]:
    """The grid modules `name` imports (the nearest existing module of each import)."""
    tree = ast.parse(_modules()[name].read_text(), filename=str(_modules()[name]))
    known = _modules()
    for node in _import_nodes(tree, type_only=type_only):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = _resolve(node.module or "", node.level, name)
            subs = [f"{base}.{alias.name}" for alias in node.names]
            found = [s for s in subs if s in known]
            sources = _face_sources(base) if base in known and _is_package(base) else {}
            via_face = [sources[a.name] for a in node.names if a.name in sources]
            targets = [*found, *via_face]
            if len(found) + len(via_face) < len(subs) or (via_face and not _is_lazy(base)):
                targets.append(base)  # a name the face defines itself, or an eager face
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target.startswith("grid") and target != name:
                yield target


@cache
def _face_sources(face: str) -> dict[str, str]:
    """name -> the module a face re-exports it from (its `_EXPORTS` and its own imports), so
    `from grid.fleet import Host` counts as an import of grid.fleet.models."""
    tree = ast.parse(_modules()[face].read_text())
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = _resolve(node.module, node.level, face)
            out |= {a.asname or a.name: module for a in node.names if module in _modules()}
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            assert node.value is not None
            for module, names in ast.literal_eval(node.value).items():
                out |= dict.fromkeys(names.split(), module)
    return {n: m for n, m in out.items() if m != face and m.startswith(f"{face}.")}


@cache
def _is_lazy(face: str) -> bool:
    """A lazy face (grid/fleet/faces.py) imports its submodules only when a name is read."""
    return "_EXPORTS" in _modules()[face].read_text()


@cache
def _graph(*, type_only: bool = True) -> dict[str, frozenset[str]]:
    return {name: frozenset(_imports(name, type_only=type_only)) for name in _modules()}


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_cycle_finder_finds_a_known_cycle_and_no_false_one() -> None:
    # A hand-made graph: a -> b -> c -> a is one cycle; d -> a and e alone are not.
    graph = {
        "a": frozenset({"b"}),
        "b": frozenset({"c"}),
        "c": frozenset({"a"}),
        "d": frozenset({"a"}),
        "e": frozenset(),
    }
    assert _cycles(graph) == [["a", "b", "c"]]


def test_relative_and_from_imports_resolve_to_modules() -> None:
    tracker = set(_graph()["grid.demand.tracker"])
    assert {"grid.demand.state", "grid.demand.config", "grid.fleet.models"} <= tracker
    # `from grid.runtime.controller.planning import ...` is planning, not the package face.
    core = _graph()["grid.runtime.controller.core"]
    assert "grid.runtime.controller.planning" in core and "grid.runtime.controller" not in core


# Cycles in other engineers' in-flight work (issue 8), to be removed by their owner; the guard
# below refuses every other cycle.
IN_FLIGHT_CYCLES: set[frozenset[str]] = set()  # none left (the node agent's went with its split)


def test_no_new_import_cycle_among_product_modules() -> None:
    found = [c for c in _cycles(_graph(type_only=True)) if frozenset(c) not in IN_FLIGHT_CYCLES]
    assert found == []


def test_no_import_cycle_among_product_modules_at_run_time() -> None:
    # Module- and function-level imports: what Python executes.
    assert _cycles(_graph(type_only=False)) == []


def test_no_import_cycle_among_product_modules_type_imports_included() -> None:
    assert _cycles(_graph(type_only=True)) == []


def test_demand_state_does_not_import_the_tracker() -> None:
    assert "grid.demand.tracker" not in _graph()["grid.demand.state"]


def test_no_node_module_imports_the_api_package() -> None:
    offenders = {
        name: sorted(t for t in targets if t == "grid.api" or t.startswith("grid.api."))
        for name, targets in _graph().items()
        if name == "grid.node" or name.startswith("grid.node.")
    }
    assert {n: t for n, t in offenders.items() if t} == {}


# The controller's lock and registry are its own: readers take its published views
# (grid/runtime/controller/views.py) and call one method per operation (DESIGN "Controller").
CONTROLLER_INTERNALS = ("lock", "registry")
CONTROLLER_TYPE = re.compile(r"\b(HA)?Controller\b")


def _controller_names(tree: ast.AST) -> set[str]:
    """The names that hold a controller: `ctl`, `controller`, what is annotated `Controller`
    and what is assigned from an attribute `.controller`."""
    names = {"ctl", "controller"}
    for node in ast.walk(tree):
        annotated = getattr(node, "annotation", None)
        if isinstance(node, ast.arg) and annotated is not None:
            if CONTROLLER_TYPE.search(ast.unparse(annotated)):
                names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if CONTROLLER_TYPE.search(ast.unparse(node.annotation)):
                names.add(node.target.id)
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "controller"
        ):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _controller_internals_used(source: str) -> list[str]:
    """Each `X.lock` / `X.registry` where X is a controller (see `_controller_names`)."""
    tree = ast.parse(source)
    names = _controller_names(tree)
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in CONTROLLER_INTERNALS:
            continue
        held = node.value
        if (isinstance(held, ast.Name) and held.id in names) or (
            isinstance(held, ast.Attribute) and held.attr == "controller"
        ):
            found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [f"{line}: {text}" for line, _col, text in sorted(found)]


def test_the_controller_internals_check_catches_each_form() -> None:
    caught = """
with ctl.lock:
    ctl.registry.hosts.clear()
service.controller.lock.acquire()
def f(fresh: Controller, old: HAController | None) -> None:
    fresh.registry.hosts
    old.lock
standby = app.state.service.controller
standby.registry
"""
    assert [line.split(": ")[1] for line in _controller_internals_used(caught)] == [
        "ctl.lock",
        "ctl.registry",
        "service.controller.lock",
        "fresh.registry",
        "old.lock",
        "standby.registry",
    ]
    innocent = """
with self.lock:
    keeper.lock.acquire()
def g(service: ControllerService, config: ControllerConfig) -> None:
    service.lock, config.registry, self._lock
"""
    assert _controller_internals_used(innocent) == []


def test_no_module_outside_the_controller_takes_its_lock_or_reads_its_registry() -> None:
    offenders = {
        name: used
        for name, path in _modules().items()
        if not (name == "grid.runtime.controller" or name.startswith("grid.runtime.controller."))
        and (used := _controller_internals_used(path.read_text()))
    }
    assert offenders == {}


def test_no_product_file_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_test_double_ships_in_the_product() -> None:
    doubles: list[str] = []
    for name, path in _modules().items():
        if "fake" in name.rpartition(".")[2].lower():
            doubles.append(name)
        tree = ast.parse(path.read_text())
        doubles += [
            f"{name}.{node.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and "fake" in node.name.lower()
        ]
    assert doubles == []


# DESIGN.md "Layers": each package uses only the packages listed above it.
LAYERS = ("fleet", "wire", "demand", "planner", "runtime", "router", "node", "api", "lab", "cli")
# (importer, imported) pairs allowed to break the order, each with its reason. Imports of the
# root package `grid` (its `__version__`) are not a layer and are not counted.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _layer_violations(graph: dict[str, frozenset[str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for importer, targets in sorted(graph.items()):
        low = _layer(importer)
        for target in sorted(targets):
            high = _layer(target)
            if low is None or high is None or (importer, target) in LAYER_EXCEPTIONS:
                continue
            if LAYERS.index(high) > LAYERS.index(low):
                out.append((importer, target))
    return out


def test_every_product_package_belongs_to_a_layer() -> None:
    packages = {p.name for p in PRODUCT.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(LAYERS)


def test_the_layer_check_catches_an_upward_import() -> None:
    # Hand-made: runtime -> router is upward (router is listed below runtime), cli -> fleet is
    # downward, and an import of the root package is no layer.
    graph = {
        "grid.runtime.x": frozenset({"grid.router.measure", "grid.fleet.models"}),
        "grid.cli.main": frozenset({"grid.fleet.models", "grid"}),
    }
    assert _layer_violations(graph) == [("grid.runtime.x", "grid.router.measure")]


def test_each_layer_imports_only_the_layers_above_it() -> None:
    # Type-only imports count too: they are the same dependency.
    assert _layer_violations(_graph(type_only=True)) == []


def test_every_layer_exception_is_still_needed() -> None:
    graph = _graph(type_only=True)
    stale = [pair for pair in LAYER_EXCEPTIONS if pair[1] not in graph.get(pair[0], frozenset())]
    assert stale == []


# DESIGN.md: "Every package has a face (`__init__.py` exporting what other packages may use)".
# These faces are lazy (grid/fleet/faces.py): `module -> names` resolved on first read.
LAZY_FACES = (
    "grid.fleet",
    "grid.planner",
    "grid.planner.cpsat",
    "grid.runtime",
    "grid.api",
    "grid.lab",
)
# Names other packages import from a submodule but that the face leaves out, with the reason.
FACE_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("grid.lab", "capacity"): "also the name of the submodule grid.lab.capacity",
    ("grid.runtime", "reconcile"): "also the name of the subpackage grid.runtime.reconcile",
    ("grid.fleet", "lazy_face"): "the faces' own plumbing, imported by each lazy __init__",
    ("grid.cli", "main"): "the console entry point (grid/__main__.py); an eager face would load "
    "the whole Typer app with every import of grid.cli.errors",
}
HEAVY = ("ortools", "scipy", "fastapi", "uvicorn")


def _face_exports(face: str) -> dict[str, list[str]]:
    tree = ast.parse(_modules()[face].read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS":
            assert node.value is not None
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return {module: names.split() for module, names in value.items()}
    return {}


def _face_type_imports(face: str) -> dict[str, str]:
    """name -> module of the face's `if TYPE_CHECKING:` imports."""
    tree = ast.parse(_modules()[face].read_text())
    out: dict[str, str] = {}
    for node in tree.body:
        if _is_type_checking(node):
            assert isinstance(node, ast.If)
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    out |= {alias.name: stmt.module or "" for alias in stmt.names}
    return out


def _nearest_face(module: str) -> str | None:
    """The innermost package (its `__init__` is the face) that holds `module`."""
    faces = [f for f in _modules() if _is_package(f) and module.startswith(f + ".")]
    return max(faces, key=len) if faces else None


def _cross_package_imports() -> dict[str, set[str]]:
    """face -> the public names that modules outside it import from its submodules."""
    out: dict[str, set[str]] = {}
    for importer, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            face = _nearest_face(node.module)
            if (node.module in _modules() and _is_package(node.module)) or _is_package(importer):
                continue  # an import from a face itself, or a face's own re-export
            if face in (None, "grid") or importer == face or importer.startswith(f"{face}."):
                continue
            assert face is not None
            names = {a.name for a in node.names if not a.name.startswith("_")}
            out.setdefault(face, set()).update(
                n for n in names if f"{node.module}.{n}" not in _modules()
            )
    return out


@pytest.mark.parametrize("face", LAZY_FACES)
def test_a_face_lists_each_name_once_for_python_and_for_type_checkers(face: str) -> None:
    exports = _face_exports(face)
    names = [n for group in exports.values() for n in group]
    module = importlib.import_module(face)
    assert names and len(names) == len(set(names))
    assert sorted(module.__all__) == sorted(names)
    assert _face_type_imports(face) == {n: m for m, group in exports.items() for n in group}


@pytest.mark.parametrize("face", LAZY_FACES)
def test_every_face_name_is_the_object_of_its_module(face: str) -> None:
    module = importlib.import_module(face)
    for source, names in _face_exports(face).items():
        for name in names:
            assert getattr(module, name) is getattr(importlib.import_module(source), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_no_face_name_shadows_a_submodule() -> None:
    clashes = [
        f"{face}.{name}"
        for face in LAZY_FACES
        for names in _face_exports(face).values()
        for name in names
        if f"{face}.{name}" in _modules()
    ]
    assert clashes == []


def test_each_face_exports_what_other_packages_import_from_its_modules() -> None:
    # Every package, lazy face or eager: a name another package imports from a submodule is
    # one the face gives too.
    missing = {
        face: sorted(n for n in used - set(getattr(importlib.import_module(face), "__all__", ())))
        for face, used in _cross_package_imports().items()
    }
    missing = {
        face: [n for n in names if (face, n) not in FACE_EXCEPTIONS]
        for face, names in missing.items()
    }
    assert {face: names for face, names in missing.items() if names} == {}


def _around_the_face(sources: dict[str, str]) -> list[str]:
    """`importer: module.name` for each name a module (`importer -> source text`) imports
    from another package's submodule instead of its face (a submodule imported as a module
    is not a name)."""
    out: list[str] = []
    for importer, text in sources.items():
        if importer in _modules() and _is_package(importer):
            continue  # a face re-exports its own package, or imports a sub-face
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            face = _nearest_face(node.module)
            if node.module not in _modules() or _is_package(node.module):
                continue
            if face in (None, "grid") or importer == face or importer.startswith(f"{face}."):
                continue
            out += [
                f"{importer}: {node.module}.{a.name}"
                for a in node.names
                if f"{node.module}.{a.name}" not in _modules()
                and (face, a.name) not in FACE_EXCEPTIONS
            ]
    return sorted(out)


def test_other_packages_import_names_through_the_face() -> None:
    # The face is the way in: `from grid.fleet import Host`, never `from grid.fleet.models
    # import Host`, outside grid.fleet (docs/architecture.md, "Faces").
    product = {name: path.read_text() for name, path in _modules().items()}
    assert _around_the_face(product) == []


def test_the_face_rule_names_an_import_around_a_face() -> None:
    sources = {
        "grid.planner.example": "from grid.fleet.models import Host\n"
        "from grid.fleet import Policy\n"
        "from grid.planner.cpsat.ledger import HostLedger\n"  # planner's own sub-face
        "def f():\n    from grid.demand.config import DemandConfig\n",
        "grid.fleet.example": "from grid.fleet.models import Host\n",  # inside its package
    }
    assert _around_the_face(sources) == [
        "grid.planner.example: grid.demand.config.DemandConfig",
        "grid.planner.example: grid.fleet.models.Host",
        "grid.planner.example: grid.planner.cpsat.ledger.HostLedger",
    ]


def test_importing_the_faces_loads_no_heavy_dependency() -> None:
    # A fresh interpreter: this test process may have loaded them already.
    code = (
        "import importlib, sys\n"
        f"for face in {LAZY_FACES!r}: importlib.import_module(face)\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert run.stdout.strip() == "[]"
