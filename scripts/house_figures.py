#!/usr/bin/env python3
"""Print the house figures of issue 26 for grid/: `dict[str, Any]` occurrences, functions over
80 lines and classes over 400 lines (each listed, longest first).

    python3 scripts/house_figures.py [ROOT]
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

FUNCTION_LINES = 80
CLASS_LINES = 400


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1] / "grid")
    anys = 0
    functions: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        anys += len(re.findall(r"dict\[str, Any\]", text))
        for node in ast.walk(ast.parse(text)):
            end = getattr(node, "end_lineno", None)
            if end is None or not hasattr(node, "lineno"):
                continue
            length = end - node.lineno + 1
            where = f"{path.relative_to(root.parent)}:{getattr(node, 'name', '')}"
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and length > FUNCTION_LINES:
                functions.append((length, where))
            elif isinstance(node, ast.ClassDef) and length > CLASS_LINES:
                classes.append((length, where))
    print(f"dict[str, Any]: {anys}")
    for label, rows in (("functions over 80 lines", functions), ("classes over 400", classes)):
        print(f"{label}: {len(rows)}")
        for length, where in sorted(rows, reverse=True):
            print(f"  {length:5d}  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
