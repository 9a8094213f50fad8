"""PUT /allocator/models/{id} takes a typed partial profile on a real controller process: only
the fields given travel and the rest take the documented defaults (docs/snapshot.md), the
published request schema is that partial profile, and an unknown field is refused with the
closest known name, by the server and by the client before anything is sent."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet import GridError
from grid.fleet.operator import ProfileUpdate
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service

runner = CliRunner()


def _request_schema(openapi: dict[str, Any]) -> jsonschema.Draft202012Validator:
    body = openapi["paths"]["/allocator/models/{model_id}"]["put"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert schema["$ref"].rsplit("/", 1)[-1] == "ProfileUpdate"
    return jsonschema.Draft202012Validator({**schema, "components": openapi["components"]})


def test_a_partial_profile_sends_only_its_fields(controller: ControllerProcess) -> None:
    assert ProfileUpdate(memory_mb=512, priority=3).given() == {"memory_mb": 512, "priority": 3}
    assert ProfileUpdate.model_validate({"chat_template": None}).given() == {"chat_template": None}
    validator = _request_schema(httpx.get(f"{controller.url}/openapi.json", timeout=10).json())
    assert validator.is_valid({"memory_mb": 512})
    assert validator.is_valid({})  # every field is optional on the wire
    assert not validator.is_valid({"memory_mb": 512, "max_replica": 2})
    assert not validator.is_valid({"memory_mb": "lots"})

    result = runner.invoke(
        app,
        ["allocator", "model", "set", "m1", "--memory-mb", "512", "--priority", "3",
         "--pin", "h1", "--state-dir", str(controller.state_dir), "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    saved = json.loads(result.stdout)["profile"]
    assert (saved["memory_mb"], saved["priority"], saved["pinned_hosts"]) == (512, 3, ["h1"])
    # Fields not given take the profile defaults of docs/snapshot.md.
    assert (saved["min_replicas"], saved["max_replicas"]) == (0, 1)
    assert saved["runtimes"] == ["llama.cpp"]
    assert (saved["target_utilization"], saved["chat_template"]) == (0.75, None)

    with controller.admin() as admin:
        # A replace is whole: the earlier priority and pin are not merged in.
        again = admin.put_model("m1", ProfileUpdate(memory_mb=256))
        assert (again.profile.memory_mb, again.profile.priority) == (256, 0)
        assert again.profile.pinned_hosts == []


def test_an_unknown_field_is_refused_with_the_closest_name(controller: ControllerProcess) -> None:
    token = {"X-Grid-Allocator-Token": controller.settings.operator_token}
    answer = httpx.put(
        f"{controller.url}/allocator/models/m2",
        json={"memory_mb": 512, "max_replica": 2},
        headers=token,
        timeout=10,
    )
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "unknown_field"
    assert "max_replica" in error["message"] and "`max_replicas`" in error["fix"]
    nested = httpx.put(
        f"{controller.url}/allocator/models/m2",
        json={"memory_mb": 512, "engine": {"bogus_flag": 1}},
        headers=token,
        timeout=10,
    )
    assert nested.status_code == 422 and nested.json()["error"]["code"] == "unknown_field"
    wrong_type = httpx.put(
        f"{controller.url}/allocator/models/m2",
        json={"memory_mb": "lots"},
        headers=token,
        timeout=10,
    )
    assert wrong_type.status_code == 422
    assert wrong_type.json()["error"]["code"] == "invalid_value"
    assert "memory_mb" in wrong_type.json()["error"]["fix"]
    with controller.admin() as admin:
        with pytest.raises(GridError) as refused:
            admin.put_model("m2", {"memory_mb": 512, "min_replica": 1})
        assert refused.value.code == "unknown_field" and refused.value.path == "min_replica"
        assert [p.model_id for p in admin.status(history=0).profiles] == []
