"""The mutation lease on a real etcd cluster: the term rule under concurrent takeovers, renewal,
the fence that fails a deposed leader's writes (grid/runtime/controller/etcd/lease.py)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.errors import GridError
from grid.runtime.controller.etcd import EtcdClient, EtcdLease, EtcdStore, parse_store_url
from tests.ha.cluster import EtcdCluster

pytestmark = pytest.mark.service


def lease(client: EtcdClient, prefix: str, name: str, ttl_s: float = 5.0) -> EtcdLease:
    return EtcdLease(client, prefix, controller_id=name, url=f"http://{name}", ttl_s=ttl_s)


def store_for(client: EtcdClient, held: EtcdLease) -> EtcdStore:
    return EtcdStore(
        client, held.prefix, fence=held.fence, term_key=held.term_key, leader_key=held.leader_key
    )


def campaign(contender: EtcdLease, floor: int) -> bool:
    with contender.campaigning():
        return contender.acquire(time.time(), floor_term=floor).granted


def race(contenders: list[EtcdLease], floors: list[int]) -> dict[int, bool]:
    """Every contender campaigns at the same instant; who was granted the lease."""
    barrier = threading.Barrier(len(contenders))
    won: dict[int, bool] = {}

    def run(i: int) -> None:
        barrier.wait()
        won[i] = campaign(contenders[i], floors[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(contenders))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return won


@pytest.mark.property
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rounds=st.lists(
        st.lists(st.integers(min_value=0, max_value=40), min_size=2, max_size=5),
        min_size=1,
        max_size=4,
    )
)
def test_concurrent_takeovers_never_share_a_term(
    cluster: EtcdCluster, rounds: list[list[int]]
) -> None:
    """Each round, every contender campaigns at once (each with its own fleet floor) for a free
    lease; then the winner gives it up. Oracle: exactly one winner per round, its term above
    every term before it and above its own floor, and no term ever held twice."""
    prefix = f"/prop{time.monotonic_ns()}"
    client = EtcdClient(parse_store_url(cluster.store_url))
    taken: list[tuple[int, str]] = []
    try:
        for r, floors in enumerate(rounds):
            contenders = [lease(client, prefix, f"c{r}-{i}") for i in range(len(floors))]
            won = race(contenders, floors)
            winners = [i for i, ok in won.items() if ok]
            assert len(winners) == 1, won
            held = contenders[winners[0]].held
            assert held is not None
            previous = max((t for t, _ in taken), default=0)
            assert held.term > previous
            assert held.term > floors[winners[0]]
            taken.append((held.term, held.controller_id))
            for i, c in enumerate(contenders):
                if i != winners[0]:
                    assert c.held is None
            contenders[winners[0]].release()
        terms = [t for t, _ in taken]
        assert len(terms) == len(set(terms))
    finally:
        client.close()


def test_renewal_keeps_the_term_and_a_takeover_fences_the_old_leader(
    client: EtcdClient, store_url: str
) -> None:
    prefix = parse_store_url(store_url).prefix
    a, b = lease(client, prefix, "a", ttl_s=2), lease(client, prefix, "b", ttl_s=2)
    assert campaign(a, 0)
    first = a.held
    assert first is not None and first.term == 1
    assert a.acquire(time.time()).granted  # a renewal, outside any campaign
    assert a.held is not None and a.held.term == 1
    assert not campaign(b, 0)  # a leader is alive
    assert b.authority(time.time(), 0) == {
        "role": "standby",
        "term": 1,
        "controller_id": "b",
        "leader_url": "http://a",
    }
    store_a = store_for(client, a)
    store_a.save({"mode": "automatic", "saved_at": 1.0})
    # a stops renewing (a paused process): etcd expires its lease, b takes over.
    deadline = time.monotonic() + 10
    while not campaign(b, 0):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert b.held is not None and b.held.term == 2
    # a still believes it leads (its clock says so), but every write fails on the fence.
    a.held = type(first)(**{**first.__dict__, "expires_at": time.time() + 60})
    with pytest.raises(GridError) as refused:
        store_a.save({"mode": "observe", "saved_at": 2.0})
    assert refused.value.code == "state_fenced"
    assert store_for(client, b).load().document == {"mode": "automatic", "saved_at": 1.0}
    assert not a.acquire(time.time()).granted  # its renewal finds the lease gone
    assert a.held is None


def test_a_standby_never_takes_the_lease_outside_a_campaign(
    client: EtcdClient, store_url: str
) -> None:
    prefix = parse_store_url(store_url).prefix
    standby = lease(client, prefix, "s")
    decision = standby.acquire(time.time())
    assert not decision.granted and standby.held is None
    assert client.get(f"{prefix}/leader") is None


def test_a_fleet_floor_raises_the_term_of_a_renewal_by_cas(
    client: EtcdClient, store_url: str
) -> None:
    prefix = parse_store_url(store_url).prefix
    a = lease(client, prefix, "a")
    assert campaign(a, 0)
    assert a.acquire(time.time(), floor_term=7).granted
    assert a.held is not None and a.held.term == 7
    term = client.get(f"{prefix}/term")
    assert term is not None and term.value == b"7"
    b = lease(client, prefix, "b")
    a.release()
    assert campaign(b, 0)
    assert b.held is not None and b.held.term == 8
