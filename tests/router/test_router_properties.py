from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.errors import GridError
from grid.fleet.models import ADMITTING_STATES, HostState, ResidencyState
from grid.router import Route, RouteChoice, RouteRefusal, choose_route, hash_affinity_key
from tests.router.builders import NOW, TTL

pytestmark = pytest.mark.property


@st.composite
def routes(draw: st.DrawFn) -> list[Route]:
    count = draw(st.integers(min_value=0, max_value=8))
    out = []
    for index in range(count):
        concurrency = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=16)))
        out.append(
            Route(
                host_id=f"h{index}",
                model_id=draw(st.sampled_from(["m", "m", "other"])),
                port=39100 + index,
                host_state=draw(st.sampled_from(list(HostState))),
                residency_state=draw(st.sampled_from(list(ResidencyState))),
                lease_at=NOW - draw(st.floats(min_value=-30, max_value=2 * TTL)),
                throttle_fraction=draw(st.floats(min_value=0, max_value=1)),
                concurrency=concurrency,
                active=draw(st.integers(min_value=0, max_value=20)),
                queued=draw(st.integers(min_value=0, max_value=20)),
            )
        )
    return out


@settings(derandomize=True, max_examples=300, deadline=None)
@given(routes(), st.one_of(st.none(), st.text(min_size=1, max_size=20)))
def test_never_a_non_ready_or_non_admitting_route(candidates: list[Route], raw: str | None) -> None:
    try:
        key = hash_affinity_key(raw)
    except GridError:  # an invalid key is refused before routing
        key = None
    result = choose_route(candidates, "m", NOW, lease_ttl_s=TTL, affinity=key)
    if isinstance(result, RouteRefusal):
        return
    chosen = result.route
    assert chosen.model_id == "m"
    assert chosen.residency_state is ResidencyState.READY
    assert chosen.host_state in ADMITTING_STATES
    assert NOW - chosen.lease_at <= TTL
    limit = chosen.admission_limit()
    assert limit is None or chosen.active < limit
    # The protection class is a hard preference: no admitted accepting route was passed over.
    if chosen.host_state is HostState.THROTTLED:
        for other in candidates:
            alone = choose_route([other], "m", NOW, lease_ttl_s=TTL)
            assert not (isinstance(alone, RouteChoice) and other.host_state is HostState.ACCEPTING)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=8),
    st.lists(st.text(min_size=1, max_size=12).filter(str.isprintable), min_size=1, max_size=30),
)
def test_adding_an_equivalent_engine_moves_sessions_only_onto_it(
    count: int, sessions: list[str]
) -> None:
    pool = [
        Route(f"h{i}", "m", 39100 + i, HostState.ACCEPTING, ResidencyState.READY, NOW - 1)
        for i in range(count)
    ]
    extra = Route("new", "m", 39999, HostState.ACCEPTING, ResidencyState.READY, NOW - 1)
    for raw in sessions:
        key = hash_affinity_key(raw)
        before = choose_route(pool, "m", NOW, lease_ttl_s=TTL, affinity=key)
        after = choose_route([*pool, extra], "m", NOW, lease_ttl_s=TTL, affinity=key)
        assert isinstance(before, RouteChoice) and isinstance(after, RouteChoice)
        assert after.route in (before.route, extra)
