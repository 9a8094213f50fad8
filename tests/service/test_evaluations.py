"""POST /allocator/evaluations on a real controller process (uvicorn on loopback)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service

SHA = "c0ffee" + "0" * 58
ROUTE = "/allocator/evaluations"


def post(
    server: ControllerProcess, body: Any, token: str | None = None, *, raw: str | None = None
) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["X-Grid-Allocator-Token"] = token
    content = raw if raw is not None else None
    if content is None:
        return httpx.post(server.url + ROUTE, json=body, headers=headers, timeout=10)
    return httpx.post(server.url + ROUTE, content=content, headers=headers, timeout=10)


def refused(reply: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert reply.status_code == status, reply.text
    error: dict[str, str] = reply.json()["error"]
    assert error["code"] == code and error["message"] and error["fix"]
    return error


def test_evaluations_need_the_operator_and_a_configured_revision(
    controller: ControllerProcess,
) -> None:
    token = controller.settings.operator_token
    with controller.admin() as admin:
        admin.put_model("coder", {"memory_mb": 1024, "artifact_sha256": SHA})
        admin.put_model("plain", {"memory_mb": 1024})
    good = {"model": "coder", "workload": "coding", "quality": 0.8}

    refused(post(controller, good), 401, "unauthorized")
    refused(
        post(controller, good, "not-the-operator-capability-at-all"), 403, "invalid_operator_token"
    )
    refused(post(controller, {**good, "model": "nope"}, token), 404, "unknown_model")
    refused(post(controller, {**good, "workload": "cooking"}, token), 422, "unknown_workload")
    refused(post(controller, {**good, "quality": 1.5}, token), 422, "invalid_quality")
    refused(post(controller, {**good, "quality": -0.1}, token), 422, "invalid_quality")
    nan = '{"model": "coder", "workload": "coding", "quality": NaN}'
    refused(post(controller, None, token, raw=nan), 422, "invalid_quality")
    mismatch = {**good, "artifact_sha256": "d" * 64}
    error = refused(post(controller, mismatch, token), 409, "artifact_mismatch")
    assert SHA in error["message"]  # it names the configured revision
    no_sha = {"model": "plain", "workload": "coding", "quality": 0.5, "artifact_sha256": SHA}
    refused(post(controller, no_sha, token), 409, "artifact_mismatch")
    refused(post(controller, {**good, "extra": 1}, token), 422, "invalid_request")
    refused(post(controller, {**good, "quality": "high"}, token), 422, "invalid_request")

    with controller.public() as public:
        dirty_before = public.status().model_dump(mode="json")["revisions"]["dirty"]
    # Nothing above was recorded: the first accepted evaluation is the record's only sample.
    first = post(controller, {**good, "artifact_sha256": SHA.upper()}, token)
    assert first.status_code == 200, first.text
    recorded = first.json()["evaluation"]
    assert recorded["model_id"] == "coder" and recorded["artifact_sha256"] == SHA
    assert recorded["quality_samples"] == pytest.approx(1.0)
    assert recorded["quality"] == pytest.approx(0.8)
    assert recorded["quality_confidence"] == pytest.approx(1 / 8)  # one of eight evaluations

    second = post(controller, {**good, "quality": 0.4}, token)  # no SHA: the configured one
    assert second.status_code == 200, second.text
    recorded = second.json()["evaluation"]
    # Seconds apart, the 7-day decay is below 1e-5: the mean of 0.8 and 0.4.
    assert recorded["quality_samples"] == pytest.approx(2.0, abs=1e-4)
    assert recorded["quality"] == pytest.approx(0.6, abs=1e-4)
    with controller.public() as public:
        assert (
            public.status().model_dump(mode="json")["revisions"]["dirty"] > dirty_before
        )  # a new input
