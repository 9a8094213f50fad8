"""Issue 15, defect 3: nodes authenticate controller replies. The controller signs every node
reply with a per-credential key the node learns with its credential; an impostor answering on
the controller URL cannot hand a node commands (its term 10^12 never reaches the fence)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from grid.fleet.errors import GridError
from grid.wire import AllocatorClient
from tests.service.harness import ControllerProcess
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service

HUGE_TERM = 10**12


class _Impostor(BaseHTTPRequestHandler):
    """Anything answering on the controller URL: a well-formed reply with a huge term."""

    signature = ""

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        command = {
            "action_id": "warm-evil",
            "kind": "warm",
            "host_id": "h1",
            "model_id": "m",
            "plan_generation": "e:00000000000000000001:x",
            "controller_term": HUGE_TERM,
            "controller_id": "evil",
            "executable": True,
        }
        body = json.dumps(
            {
                "node_id": "h1.allocator",
                "host_id": "h1",
                "allocator": {
                    "mode": "automatic",
                    "controller_lease_ttl_seconds": 30,
                    "commands": [command],
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.signature:
            self.send_header("X-Grid-Reply-Signature", self.signature)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def impostor() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_real_controller_signs_and_an_impostor_is_refused(
    controller: ControllerProcess, impostor: str
) -> None:
    with controller.admin() as admin:
        minted = admin.node_credential("h1")
    token, reply_key = minted.token, minted.reply_key
    assert reply_key and reply_key not in token
    node = FakeNode("h1", node_id="h1.allocator")
    with AllocatorClient(controller.url, node_token=token, reply_key=reply_key) as real:
        assert real.put_node(node.node_id, node.registration()).host_id == "h1"
    for signature in ("", "AAAA" * 11):
        _Impostor.signature = signature
        fake = AllocatorClient(impostor, node_token=token, reply_key=reply_key)
        with fake, pytest.raises(GridError) as refused:
            fake.put_node(node.node_id, node.heartbeat())
        assert refused.value.code == "controller_reply_unauthenticated"
        assert reply_key not in refused.value.message + refused.value.fix
    # A key for another credential does not verify the real controller's replies either.
    with controller.admin() as admin:
        other = admin.node_credential("h1").reply_key
    mixed = AllocatorClient(controller.url, node_token=token, reply_key=other)
    with mixed, pytest.raises(GridError) as refused:
        mixed.put_node(node.node_id, node.heartbeat())
    assert refused.value.code == "controller_reply_unauthenticated"
