"""The typed operator wire on a real controller process: every operator reply validates against
the schema the server publishes (jsonschema, not pydantic, is the judge), and the client's
typed replies dump back to exactly the JSON the server sent (no field lost, renamed or added)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest

from grid.fleet.operator import AllocatorStatus, ModeReply, ProfileReply, TickReply
from tests.service.harness import ControllerProcess, HttpNode, converge, mint
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service

# (method, path) -> the component its 200/201 answer is published as.
PUBLISHED = {
    ("get", "/healthz"): "Health",
    ("get", "/allocator/status"): "AllocatorStatus",
    ("put", "/allocator/models/{model_id}"): "ProfileReply",
    ("delete", "/allocator/models/{model_id}"): "TombstoneReply",
    ("put", "/allocator/mode"): "ModeReply",
    ("post", "/allocator/tick"): "TickReply",
    ("post", "/allocator/observations"): "ObservationReply",
    ("post", "/allocator/evaluations"): "EvaluationReply",
    ("post", "/allocator/node-credentials"): "MintedCredential",
    ("get", "/allocator/node-credentials"): "CredentialList",
    ("post", "/allocator/node-credentials/revoke"): "RevokeReply",
    ("post", "/allocator/enrollments"): "Enrollment",
    ("post", "/enroll"): "EnrolledCredential",
    ("post", "/allocator/keys"): "CreatedKey",
    ("get", "/allocator/keys"): "ClientKeys",
    ("delete", "/allocator/keys/{name}"): "KeyRevokeReply",
}


def _component(ref: dict[str, Any]) -> str:
    return str(ref["$ref"]).rsplit("/", 1)[-1].removesuffix("-Output")


def _validator(openapi: dict[str, Any], component: str) -> jsonschema.Draft202012Validator:
    names = openapi["components"]["schemas"]
    name = f"{component}-Output" if f"{component}-Output" in names else component
    schema = {"$ref": f"#/components/schemas/{name}", "components": openapi["components"]}
    return jsonschema.Draft202012Validator(schema)


def test_every_operator_reply_is_a_published_model(controller: ControllerProcess) -> None:
    openapi = httpx.get(f"{controller.url}/openapi.json", timeout=10).json()
    for (method, path), component in PUBLISHED.items():
        answers = openapi["paths"][path][method]["responses"]
        ok = answers.get("200") or answers["201"]
        schema = ok["content"]["application/json"]["schema"]
        assert _component(schema) == component, (method, path, schema)


def test_replies_match_the_published_schema_and_the_typed_client(
    controller: ControllerProcess,
) -> None:
    openapi = httpx.get(f"{controller.url}/openapi.json", timeout=10).json()
    node = HttpNode(FakeNode("h1", capacity_mb=8192), controller.url, mint(controller, "h1"))
    node.register()
    with controller.admin() as admin:
        raw: dict[str, Any] = admin.request(
            "PUT", "/allocator/models/m1", json={"memory_mb": 1024, "min_replicas": 1}
        )
        _validator(openapi, "ProfileReply").validate(raw)
        assert ProfileReply.model_validate(raw).model_dump(mode="json") == raw
        mode = admin.set_mode("automatic")
        assert (mode.previous.value, mode.mode.value) == ("recommend", "automatic")
        raw = admin.request("PUT", "/allocator/mode", json={"mode": "automatic"})
        _validator(openapi, "ModeReply").validate(raw)
        assert ModeReply.model_validate(raw).model_dump(mode="json") == raw
        raw = admin.request("POST", "/allocator/tick")
        _validator(openapi, "TickReply").validate(raw)
        assert TickReply.model_validate(raw).model_dump(mode="json") == raw
        converge([node])
        # The operator's status (with reachability rows) and the public one, both as sent.
        for client in (admin, controller.public()):
            raw = client.request("GET", "/allocator/status", params={"history": 50})
            _validator(openapi, "AllocatorStatus").validate(raw)
            dumped = AllocatorStatus.model_validate(raw).model_dump(mode="json")
            assert list(dumped) == list(raw)  # the same keys in the same order
            assert dumped == raw
            assert ("reachability" in raw["hosts"][0]) is (client is admin)
            typed = client.status(history=50)  # what the client hands the CLI
            assert isinstance(typed, AllocatorStatus)
            assert [h.host_id for h in typed.hosts] == ["h1"]
            assert [p.model_id for p in typed.profiles] == ["m1"]
            assert typed.mode.value == "automatic" and typed.client_keys.open_access
