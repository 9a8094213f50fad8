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


def test_the_model_listing_does_not_wait_for_a_busy_controller_while_it_is_fresh() -> None:
    """Issue 22: GET /v1/models under a heartbeat flood waited for the controller lock (ticks,
    updates). A listing published at most LISTING_MAX_AGE_S ago answers while the lock is held;
    an older one waits for it, and is then republished."""
    import threading

    from grid.api.proxy_state import LISTING_MAX_AGE_S

    ctl, proxy = _controller(concurrency=4), ProxyState()
    assert proxy.model_listing(ctl, T0) == (["m"], [])  # published
    held, release = threading.Event(), threading.Event()

    def busy() -> None:
        with ctl.lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=busy)
    holder.start()
    assert held.wait(5)
    got: list[tuple[list[str], list[str]]] = []

    def listing(at: float) -> threading.Thread:
        thread = threading.Thread(target=lambda: got.append(proxy.model_listing(ctl, at)))
        thread.start()
        return thread

    fresh = listing(T0 + LISTING_MAX_AGE_S / 2)
    fresh.join(5)
    assert not fresh.is_alive() and got == [(["m"], [])]  # answered while the lock is held
    stale = listing(T0 + LISTING_MAX_AGE_S * 2)
    stale.join(0.3)
    assert stale.is_alive()  # too old to stand in: it waits for the controller
    release.set()
    stale.join(5)
    holder.join(5)
    assert not stale.is_alive() and got[-1] == (["m"], [])
