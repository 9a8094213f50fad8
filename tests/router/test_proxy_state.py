"""The proxy's in-memory bookkeeping on a real controller registry (no HTTP, fixed clock)."""

from __future__ import annotations

import pytest

from grid.api.proxy_state import ProxyState, Upstream
from grid.router import RouteRefusal
from grid.runtime.controller import RouteJudge
from grid.runtime.controller.core import Controller
from grid.runtime.controller.store import MemoryStore
from grid.runtime.controller.wire import NodeUpdate
from tests.runtime.controller.harness import FAST, T0

pytestmark = pytest.mark.unit

KEY = "engine-key-" + "k" * 32


def _controller(concurrency: int | None = 1) -> Controller:
    ctl = Controller(MemoryStore(), now=T0, config=FAST)
    update = NodeUpdate.model_validate(
        {
            "host_id": "h",
            "resources": {"capacity_mb": 4096},
            "allocator": {
                "state": "accepting",
                "residencies": [{"model_id": "m", "memory_mb": 100, "state": "ready"}],
                "routes": [{"model_id": "m", "port": 39100, "concurrency": concurrency}],
                "engine_key": KEY,
            },
        }
    )
    # An operator registered the route (a pin): the proxy's rules are what this file tests.
    judge = RouteJudge(ctl.gate.attestor, {}, frozenset({"m"}))
    ctl.registry.apply("node-h", "h", update, now=T0, judge=judge)
    ctl.publish_views()  # what the controller does after any change of its own
    return ctl


def _choose(proxy: ProxyState, ctl: Controller, now: float) -> Upstream | RouteRefusal:
    return proxy.choose(ctl, "m", now, affinity=None, max_tokens=None)


def test_the_chosen_upstream_carries_the_key_without_showing_it() -> None:
    ctl, proxy = _controller(), ProxyState()
    chosen = _choose(proxy, ctl, T0)
    assert isinstance(chosen, Upstream)
    assert chosen.engine_key == KEY and chosen.base_url == "http://127.0.0.1:39100"
    assert KEY not in repr(chosen)
    assert proxy.ready_models(ctl, T0) == ["m"]


def test_an_abandoned_request_frees_its_slot_and_is_no_failure() -> None:
    ctl, proxy = _controller(concurrency=1), ProxyState()
    for _ in range(3):  # more abandons than it takes failures to open a circuit
        chosen = _choose(proxy, ctl, T0)
        assert isinstance(chosen, Upstream)
        refused = _choose(proxy, ctl, T0)  # the single slot is taken
        assert isinstance(refused, RouteRefusal) and refused.code == "at_capacity"
        proxy.abandon(chosen, T0)
        proxy.abandon(chosen, T0)  # a second report of the same request changes nothing
    assert proxy.breakers.state(("h:39100", "m"), T0) == "closed"


def test_an_abandoned_probe_lets_the_next_probe_go() -> None:
    ctl, proxy = _controller(concurrency=None), ProxyState()
    for _ in range(2):
        failing = _choose(proxy, ctl, T0)
        assert isinstance(failing, Upstream)
        proxy.finish(failing, 502, T0, latency_s=0.1, completion_tokens=None)
    assert isinstance(_choose(proxy, ctl, T0 + 0.5), RouteRefusal)  # open for one second
    probe = _choose(proxy, ctl, T0 + 1.5)
    assert isinstance(probe, Upstream)
    blocked = _choose(proxy, ctl, T0 + 1.6)  # one probe at a time
    assert isinstance(blocked, RouteRefusal) and blocked.code == "circuit_open"
    proxy.abandon(probe, T0 + 1.7)
    assert isinstance(_choose(proxy, ctl, T0 + 1.8), Upstream)


def test_the_model_listing_never_waits_for_a_busy_controller() -> None:
    """Issue 22: GET /v1/models under a heartbeat flood waited for the controller lock (ticks,
    updates). It reads the published routing table and plan view, so it answers while the
    controller lock is held, each route still judged at `now`."""
    import threading

    ctl, proxy = _controller(concurrency=4), ProxyState()
    held, release = threading.Event(), threading.Event()

    def busy() -> None:
        with ctl.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=busy)
    holder.start()
    assert held.wait(5)
    got: list[tuple[list[str], list[str]]] = []
    try:
        for at in (T0, T0 + 2.0):
            reader = threading.Thread(target=lambda at=at: got.append(proxy.model_listing(ctl, at)))
            reader.start()
            reader.join(5)
            assert not reader.is_alive()  # answered while the lock is held
    finally:
        release.set()
        holder.join(5)
    assert got == [(["m"], []), (["m"], [])]
    lapsed = T0 + ctl.config.node_ttl_s + 60.0
    assert proxy.model_listing(ctl, lapsed) == ([], [])  # a lapsed route lease is not listed
