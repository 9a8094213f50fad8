"""Starvation reclaim and its reservation (preempt.py, reserve.py), on hand-worked fleets.

Two one-slot hosts each hold a READY replica of `gen` (research); `vid` (video) fits either
host's memory but no slot is free. The only way to serve video at all is to free one of the two
slots, and one copy of `gen` must stay so research keeps its model. Worked by hand: exactly one
`gen` replica is named as the victim, the other stays assigned, and video waits for the drain.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.planner.portfolio.builders import NOW, host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import candidate, hosts_of, planned, row

pytestmark = pytest.mark.unit

GEN = {"workload_scores": {"research": 1.0}, "max_replicas": 4}
VID = model("vid", 8192, workload_scores={"video": 1.0})
BUSY = {"loaded_at": NOW - 3600, "last_used_at": NOW - 5, "active_requests": 1}


def _gen(state: str = "ready", **fields: Any) -> dict[str, Any]:
    doc = dict(BUSY)
    doc.update(fields)
    return resident("gen", 4096, state, **doc)


def _fleet(
    hosts: list[dict[str, Any]],
    gen_profile: dict[str, Any] | None = None,
    demand: dict[str, Any] | None = None,
    extra_models: list[dict[str, Any]] | None = None,
    workloads: dict[str, Any] | None = None,
) -> Any:
    return wsnapshot(
        hosts,
        [gen_profile or model("gen", 4096, **GEN), VID, *(extra_models or [])],
        workloads or {"research": work(5, 0.5), "video": work(5, 2.0)},
        demand=demand,
    )


def _two_copies(**fields: Any) -> list[dict[str, Any]]:
    return [
        host("h1", 16384, max_models=1, residencies=[_gen(**fields)]),
        host("h2", 16384, max_models=1, residencies=[_gen()]),
    ]


def test_an_excess_replica_is_reclaimed_for_a_starved_workload() -> None:
    plan, report = planned(_fleet(_two_copies()))
    staged = [(p.victim_model_id, p.host_id, p.beneficiary_model_id) for p in plan.preemptions]
    assert len(staged) == 1
    victim, host_id, beneficiary = staged[0]
    assert (victim, beneficiary) == ("gen", "vid")
    other = {"h1": "h2", "h2": "h1"}[host_id]
    assert hosts_of(plan, "gen") == [other]  # the protected copy stays in the plan
    assert report.mapping.get("research") == "gen"  # research keeps its model
    assert row(report, "video").state == "awaiting-plan"
    reclaimed = [u for u in plan.unsatisfied if u.code == "portfolio_reclaimed"]
    assert [(u.model_id, u.host_id, u.missing_replicas) for u in reclaimed] == [("gen", host_id, 1)]


YOUNG = [
    host("h1", 16384, max_models=1, residencies=[_gen(loaded_at=NOW - 10)]),
    host("h2", 16384, max_models=1, residencies=[_gen(loaded_at=NOW - 10)]),
]


# research at 1.5 units: video's 2.0 is below the mature-beneficiary 1.5x, so only the
# reclaim's own fences decide (replace.py's rule is tested in test_portfolio_replacement.py)
CLOSE = {"research": work(5, 1.5), "video": work(5, 2.0)}


@pytest.mark.parametrize(
    ("hosts", "profile", "demand"),
    [
        ([host("h1", 16384, max_models=1, residencies=[_gen()])], None, None),  # only copy
        (YOUNG, None, None),  # both copies younger than their minimum residency
        (None, model("gen", 4096, min_replicas=1, **GEN), None),  # configured minimum
        (None, model("gen", 4096, pinned_hosts=["h1", "h2"], **GEN), None),  # pinned
        (None, None, {"gen": {"offered_concurrency": 0.4, "rpm": 6}}),  # direct named demand
    ],
    ids=["only-copy", "young", "min-replicas", "pinned", "direct"],
)
def test_fenced_replicas_are_never_reclaimed(
    hosts: list[dict[str, Any]] | None,
    profile: dict[str, Any] | None,
    demand: dict[str, Any] | None,
) -> None:
    fleet = hosts or _two_copies()
    plan, report = planned(_fleet(fleet, profile, demand, workloads=CLOSE))
    assert plan.preemptions == []
    assert hosts_of(plan, "gen") == sorted(h["host_id"] for h in fleet)
    assert row(report, "video").state == "capacity-contended"


def test_a_covered_workload_never_reclaims() -> None:
    # Video has a feasible model (a free slot on h3): it is placed, nothing is drained.
    hosts = [*_two_copies(), host("h3", 16384, max_models=1)]
    plan, _report = planned(_fleet(hosts))
    assert plan.preemptions == []
    assert hosts_of(plan, "vid") == ["h3"]
    assert hosts_of(plan, "gen") == ["h1", "h2"]


def test_draining_room_is_held_for_the_starved_workload() -> None:
    # h1's gen is DRAINING (the reclaim of an earlier tick); h1 has two slots, so a coder for
    # the coding workload would fit beside the draining replica now, while vid (12 GiB) fits
    # only once the drain is done (live memory: 4 + 12 > 16 − headroom). Without the
    # reservation the coder takes h1 and video stays starved; with it, h1 gets nothing new.
    coder = model("coder", 4096, workload_scores={"coding": 1.0})
    vid = model("vid", 12288, workload_scores={"video": 1.0})
    snap = wsnapshot(
        [
            host("h1", 16384, max_models=2, residencies=[_gen("draining", active_requests=0)]),
            host("h2", 16384, max_models=1, residencies=[_gen()]),
        ],
        [model("gen", 4096, **GEN), vid, coder],
        {"research": work(5, 0.5), "video": work(5, 2.0), "coding": work(5, 0.5)},
    )
    plan, report = planned(snap)
    assert "h1" not in hosts_of(plan, "coder")
    assert hosts_of(plan, "vid") == []
    assert row(report, "video").state == "capacity-contended"


def test_without_a_starved_workload_the_draining_room_is_free() -> None:
    coder = model("coder", 4096, workload_scores={"coding": 1.0})
    snap = wsnapshot(
        [
            host("h1", 16384, max_models=2, residencies=[_gen("draining", active_requests=0)]),
            host("h2", 16384, max_models=1, residencies=[_gen()]),
        ],
        [model("gen", 4096, **GEN), coder],
        {"research": work(5, 0.5), "coding": work(5, 0.5)},
    )
    plan, _report = planned(snap)
    assert hosts_of(plan, "coder") == ["h1"]


def test_a_ready_replica_on_a_silent_host_is_not_resident() -> None:
    # h1 stopped heartbeating an hour ago but still lists coder READY; h2 is empty. The only
    # way to serve coding is a cold start on h2: load 60 s + warm 20 s = 80 s, so the transition
    # penalty is min(max_transition_penalty 10, 80 / 4) = 10 points (a resident model pays 0).
    coder = model("coder", 4096, workload_scores={"coding": 1.0})
    snap = wsnapshot(
        [
            host(
                "h1",
                16384,
                last_heartbeat=NOW - 3600,
                residencies=[resident("coder", 4096, loaded_at=NOW - 7200)],
            ),
            host("h2", 16384),
        ],
        [coder],
        {"coding": work(5, 0.5)},
    )
    plan, report = planned(snap)
    assert candidate(report, "coding", "coder").transition_penalty == 10.0
    assert hosts_of(plan, "coder") == ["h2"]
