#!/usr/bin/env python3
"""Write schemas/openapi.json, the controller's OpenAPI document (grid/api/openapi_doc.py).
Run after changing a route or an operator/node wire model:

    .venv/bin/python scripts/gen_openapi.py          # write it
    .venv/bin/python scripts/gen_openapi.py --check  # exit 1 when it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grid.api.openapi_doc import OPENAPI_FILE, openapi_text  # noqa: E402


def main(argv: list[str]) -> int:
    path = REPO / OPENAPI_FILE
    text = openapi_text()
    stale = not path.exists() or path.read_text("utf-8") != text
    if "--check" in argv:
        if stale:
            print(f"stale: {OPENAPI_FILE} (run scripts/gen_openapi.py)")
        return 1 if stale else 0
    if stale:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {OPENAPI_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
