"""Lazy package faces: a package's `__init__` names what other packages may use, and a name
is imported from its module only when it is first read.

DESIGN.md: "Every package has a face". An eager face would import every module of its package
(OR-Tools for the planner, FastAPI for the api) whenever any one of them is imported, and
`grid --version` imports grid.fleet.errors; so a face lists `module -> "name name ..."` and
resolves each name through a module-level `__getattr__` (PEP 562). The package's
`if TYPE_CHECKING:` imports name the same things for type checkers, and its `__all__` lists
them; tests/test_architecture.py checks that the three agree and that every name resolves.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def face_names(exports: Mapping[str, str]) -> dict[str, str]:
    """name -> module, from a face's `module -> "name name ..."` table."""
    return {name: module for module, names in exports.items() for name in names.split()}


def lazy_face(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`; `exports` maps each module to the names
    (separated by spaces) it gives the face."""
    where = face_names(exports)
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next read is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
