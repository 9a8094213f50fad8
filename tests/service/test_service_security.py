"""Credentials: admin routes refuse without the capability and change nothing; node credentials
are host-scoped, signed and expiring; no secret appears in ps, status, logs or error bodies."""

from __future__ import annotations

import base64
import json
import subprocess
import time
from typing import Any

import httpx
import pytest

from grid.fleet.errors import GridError
from grid.fleet.wire import wire_json
from grid.wire import AllocatorClient
from tests.service.harness import ControllerProcess, mint
from tests.service.harness import node_client as harness_client
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service

PUBLIC = {("get", "/allocator/status"), ("get", "/metrics"), ("get", "/healthz")}
NODE_ROUTES = {("put", "/nodes/{node_id}")}
# The one-time enrollment token travels in the body (tests/service/test_enroll.py).
ENROLL_ROUTES = {("post", "/enroll")}
# The OpenAI-compatible inference boundary takes client keys, not the operator capability
# (tests/router/test_client_keys.py); this controller is on loopback with open access.
INFERENCE = {
    ("get", "/v1/models"),
    ("get", "/v1/models/{model_id}"),
    ("post", "/v1/chat/completions"),
    ("post", "/v1/completions"),
    ("post", "/v1/embeddings"),
}
BODIES: dict[str, Any] = {
    "/allocator/models/{model_id}": {"memory_mb": 1024},
    "/allocator/mode": {"mode": "automatic"},
    "/allocator/observations": {"observations": [{"model_id": "m", "timestamp": 1.0}]},
    "/allocator/node-credentials": {"host_id": "h9"},
    "/allocator/node-credentials/revoke": {"host_id": "h9"},
    "/allocator/enrollments": {"host_id": "h9"},
    "/allocator/externals/{name}": {"url": "https://127.0.0.1:1", "models": ["m"]},
    "/allocator/evaluations": {"model": "m", "workload": "coding", "quality": 0.5},
    "/allocator/hosts/{host_id}/drain": {"reason": "maintenance"},
    "/allocator/models/{model_id}/replicas": {"min_replicas": 1, "max_replicas": 2},
    "/allocator/keys": {"name": "k1"},
}


def admin_routes(server: ControllerProcess) -> list[tuple[str, str]]:
    schema = httpx.get(f"{server.url}/openapi.json").json()
    routes = [(m, p) for p, ops in schema["paths"].items() for m in ops]
    return sorted(set(routes) - PUBLIC - NODE_ROUTES - INFERENCE - ENROLL_ROUTES)


def observable_state(server: ControllerProcess) -> dict[str, Any]:
    with server.public() as public:
        doc = public.status().model_dump(mode="json")
    return {k: doc[k] for k in ("mode", "profiles", "tombstones", "pending_commands")} | {
        "dirty": doc["revisions"]["dirty"],
        "observations": doc["counters"]["observations_accepted"],
        "client_keys": doc["client_keys"]["keys"],
    }


def test_every_admin_route_refuses_without_a_valid_capability(
    controller: ControllerProcess,
) -> None:
    routes = admin_routes(controller)
    # models put/delete, mode, tick, observations, node-credentials (mint, list, revoke),
    # evaluations, enrollments, the dashboard's: host drain put/delete, model replica bounds;
    # externals put/get/delete; client keys create/list/revoke
    assert len(routes) == 19
    with controller.admin() as admin:
        admin.put_model("m", {"memory_mb": 1024})
    before = observable_state(controller)
    wrong = "not-the-capability-" + "x" * 20
    for method, path in routes:
        url = controller.url + (
            path.replace("{model_id}", "m").replace("{host_id}", "h1").replace("{name}", "k1")
        )
        body = BODIES.get(path)
        for headers, expected in (
            ({}, 401),
            ({"X-Grid-Allocator-Token": wrong}, 403),
            ({"Authorization": f"Bearer {wrong}"}, 403),
            ({"X-Grid-Allocator-Node-Token": mint(controller, "h1")}, 401),
        ):
            response = httpx.request(method.upper(), url, json=body, headers=headers)
            assert response.status_code == expected, (method, path, headers)
            assert wrong not in response.text
            assert response.json()["error"]["code"] in {"unauthorized", "invalid_operator_token"}
    assert observable_state(controller) == before


def node_client(server: ControllerProcess, token: str) -> AllocatorClient:
    return harness_client(server.url, token)


def refusal(call: Any) -> tuple[int, str]:
    with pytest.raises(GridError) as err:
        call()
    status = err.value.details["http_status"]
    assert isinstance(status, int)
    return status, err.value.code


def test_node_credentials_are_host_scoped_signed_and_expiring(
    controller: ControllerProcess,
) -> None:
    h1, h2 = FakeNode("h1"), FakeNode("h2")
    t1, t2 = mint(controller, "h1"), mint(controller, "h2")
    with node_client(controller, t1) as c1, node_client(controller, t2) as c2:
        c1.put_node(h1.node_id, h1.registration())
        # h1's credential cannot register as h2, nor h2's drive h1's node record.
        assert refusal(lambda: c1.put_node("n-x", h2.registration())) == (403, "wrong_host")
        assert refusal(lambda: c2.put_node(h1.node_id, h2.heartbeat())) == (403, "wrong_host")
        assert refusal(lambda: c2.put_node("new", h2.heartbeat())) == (409, "not_registered")
    payload, signature = t1.split(".")[1:]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["h"] = "h2"
    forged_payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    for bad in (f"gan1.{forged_payload}.{signature}", t1[:-4] + "AAAA", "gan1.x.y", "junk"):
        with node_client(controller, bad) as forged:
            status, code = refusal(lambda f=forged: f.put_node("n2", h2.registration()))
        assert (status, code) == (403, "invalid_node_credential")
    with controller.admin() as admin:
        short = admin.node_credential("h2", ttl_s=1.0).token
    time.sleep(1.2)
    with node_client(controller, short) as expired:
        assert refusal(lambda: expired.put_node("n2", h2.registration())) == (
            403,
            "expired_node_credential",
        )
    operator = controller.settings.operator_token  # sent, with some key: no node credential
    with AllocatorClient(controller.url, operator_token=operator, reply_key="k") as op:
        assert refusal(lambda: op.put_node("n2", h2.registration())) == (401, "unauthorized")
    with controller.public() as public:
        hosts = [h["host_id"] for h in public.status().model_dump(mode="json")["hosts"]]
    assert hosts == ["h1"]


def test_no_secret_in_process_list_status_metrics_logs_or_errors(
    controller: ControllerProcess,
) -> None:
    node_token = mint(controller, "h1")
    secrets = [controller.settings.operator_token, controller.settings.node_signing_key, node_token]
    h1 = FakeNode("h1")
    with node_client(controller, node_token) as c1:
        c1.put_node(h1.node_id, h1.registration())
    bodies = [
        httpx.put(
            f"{controller.url}/allocator/mode",
            json={"mode": "automatic"},
            headers={"X-Grid-Allocator-Token": node_token},
        ).text,
        httpx.put(
            f"{controller.url}/nodes/n1",
            json=wire_json(h1.registration()),
            headers={"X-Grid-Allocator-Node-Token": node_token + "tampered"},
        ).text,
        httpx.put(
            f"{controller.url}/allocator/models/m",
            json={"memory_mb": "lots"},
            headers={"X-Grid-Allocator-Token": controller.settings.operator_token},
        ).text,
    ]
    with controller.public() as public:
        exposed = [json.dumps(public.status().model_dump(mode="json")), public.metrics()]
    assert controller.proc is not None
    pid = controller.proc.pid
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        argv = fh.read().decode()
    with open(f"/proc/{pid}/environ", "rb") as fh:
        environ = fh.read().decode(errors="replace")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    log = controller.log_path.read_text()
    assert "grid.api.server" in argv and "GET /allocator/status" in log
    for secret in secrets:
        for text in [*bodies, *exposed, argv, environ, ps, log]:
            assert secret not in text
