#!/usr/bin/env python3
"""Write schemas/snapshot.schema.json and the field tables of docs/snapshot.md from the pydantic
models (grid/fleet/schema.py). Run after changing grid/fleet/models.py or workloads.py:

    .venv/bin/python scripts/gen_schema.py          # write both files
    .venv/bin/python scripts/gen_schema.py --check  # exit 1 when either is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grid.fleet.schema import DOC_FILE, SCHEMA_FILE, render_doc, schema_text  # noqa: E402


def main(argv: list[str]) -> int:
    check = "--check" in argv
    schema_path, doc_path = REPO / SCHEMA_FILE, REPO / DOC_FILE
    wanted = {schema_path: schema_text(), doc_path: render_doc(doc_path.read_text("utf-8"))}
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text("utf-8") != text]
    if check:
        for path in stale:
            print(f"stale: {path.relative_to(REPO)} (run scripts/gen_schema.py)")
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
