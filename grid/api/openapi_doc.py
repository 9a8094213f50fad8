"""The controller's OpenAPI document as checked in at `schemas/openapi.json`.

The document is the app's own (`FastAPI.openapi()`), built for a throwaway state folder, with
keys sorted so that a diff shows what changed. `scripts/gen_openapi.py` writes it; a test fails
when the routes or their models drift from the checked-in file (regenerate it with the script).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

OPENAPI_FILE = "schemas/openapi.json"


def openapi_document() -> dict[str, Any]:
    from grid.api.server import build
    from grid.api.settings import load_or_create_settings

    with tempfile.TemporaryDirectory(prefix="grid-openapi-") as tmp:
        folder = Path(tmp)
        app, _service = build(folder, load_or_create_settings(folder))
        return app.openapi()


def openapi_text() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
