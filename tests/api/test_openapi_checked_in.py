"""The controller's OpenAPI document is checked in and cannot drift (issue 26, part 1).

`schemas/openapi.json` is what the running app publishes at /openapi.json; a route, parameter or
wire model that changes without regenerating it (scripts/gen_openapi.py) fails here, so every
change to the operator or node wire shows in review as a diff of that file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.api.openapi_doc import OPENAPI_FILE, openapi_document

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_the_checked_in_openapi_document_is_the_apps_own() -> None:
    checked_in = json.loads((REPO / OPENAPI_FILE).read_text("utf-8"))
    live = openapi_document()
    added = sorted(set(live["paths"]) - set(checked_in["paths"]))
    removed = sorted(set(checked_in["paths"]) - set(live["paths"]))
    assert (added, removed) == ([], []), "run scripts/gen_openapi.py"
    for path, operations in live["paths"].items():
        assert operations == checked_in["paths"][path], f"{path} drifted: scripts/gen_openapi.py"
    assert live == checked_in, "schemas/openapi.json is stale: run scripts/gen_openapi.py"


def test_the_document_names_the_node_wire_and_the_openai_surface() -> None:
    paths = json.loads((REPO / OPENAPI_FILE).read_text("utf-8"))["paths"]
    assert "put" in paths["/nodes/{node_id}"]
    assert "post" in paths["/v1/chat/completions"]
