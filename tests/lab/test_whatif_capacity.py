"""grid.lab.capacity: hand-computed answers on tiny fleets, and a brute-force cross-check.

The brute force is independent of the count model: it plans every candidate fleet (each
template added 0..K times) with the real planner and keeps the smallest one (hosts, then
allocatable memory) that places every desired replica.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot, Host
from grid.lab import whatif
from grid.lab.capacity import capacity, solve_counts
from grid.planner.problem import allocatable_mb
from tests.planner.fleets import host, model, resident, snapshot, want

pytestmark = pytest.mark.unit

NO_HEADROOM = {"memory_headroom_fraction": 0.0}


def _template(host_id: str, capacity_mb: int, **fields: object) -> Host:
    return Host.model_validate({"host_id": host_id, "capacity_mb": capacity_mb, **fields})


def test_nothing_to_add_when_every_replica_is_placed() -> None:
    snap = snapshot([host("h", 8000)], [model("a", 1000)], {"a": want(1)}, policy=NO_HEADROOM)
    answer = capacity(snap, [_template("t", 8000)])
    assert answer.to_dict() == {
        "schema_version": 1,
        "added": {"t": 0},
        "placed_before": 1,
        "placed_after": 1,
        "desired": 1,
        "status": "OPTIMAL",
        "binding": [],
    }


def test_one_replica_per_host_needs_one_host_per_missing_replica() -> None:
    # a (10000 MB) wants 3; h0 takes one; each added host takes one more: 2 hosts.
    snap = snapshot(
        [host("h0", 16000)],
        [model("a", 10000, max_replicas=3)],
        {"a": want(3)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("big", 64000)])
    assert answer.added == {"big": 2}
    assert (answer.placed_before, answer.placed_after, answer.desired) == (1, 3, 3)
    assert answer.status == "OPTIMAL"


def test_fewer_hosts_beat_less_memory() -> None:
    # b1 and b2 (10000 MB each) fit nowhere now; one 24000 MB host takes both, a 12000 MB
    # host only one: 1 large (24000 MB) beats 2 small (24000 MB) on hosts.
    snap = snapshot(
        [host("h0", 4000)],
        [model("b1", 10000), model("b2", 10000)],
        {"b1": want(1), "b2": want(1)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("small", 12000), _template("large", 24000)])
    assert answer.added == {"small": 0, "large": 1}
    assert answer.placed_after == 2


def test_min_memory_tie_break_picks_the_smaller_template() -> None:
    # Two replicas of a (10000 MB) are missing; either template needs 2 hosts (one replica
    # per host); small: 2 x 12000 = 24000 MB, large: 2 x 64000 MB. Listed large first.
    snap = snapshot(
        [host("h0", 4000)],
        [model("a", 10000, max_replicas=2)],
        {"a": want(2)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("large", 64000), _template("small", 12000)])
    assert answer.added == {"large": 0, "small": 2}
    assert answer.status == "OPTIMAL"


def test_infeasible_names_the_tag_no_template_has() -> None:
    snap = snapshot(
        [host("h0", 64000)],
        [model("v", 8000, required_tags=["gpu"])],
        {"v": want(1)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("cpu-box", 64000, tags=["server"])])
    assert answer.status == "INFEASIBLE"
    assert answer.added == {"cpu-box": 0}
    assert answer.placed_after == answer.placed_before == 0
    tags = [b for b in answer.binding if b["constraint"] == "missing_tag"]
    assert tags and tags[0]["value"] == "gpu" and tags[0]["model_id"] == "v"
    assert "'gpu'" in str(tags[0]["detail"])


@pytest.mark.parametrize(
    ("profile", "template", "constraint"),
    [
        ({"runtimes": ["vllm"]}, {}, "runtime_mismatch"),
        ({"data_tier": "confidential"}, {}, "data_tier"),
        ({"pinned_hosts": ["ghost"]}, {}, "pin"),
        ({"memory_mb": 90000}, {}, "memory"),
        ({"forbidden_tags": ["laptop"]}, {"tags": ["laptop"]}, "forbidden_tag"),
    ],
)
def test_infeasible_names_the_constraint(
    profile: dict[str, object], template: dict[str, object], constraint: str
) -> None:
    fields = {"memory_mb": 8000, **profile}
    snap = snapshot([host("h0", 4000)], [model("m", **fields)], {"m": want(1)}, policy=NO_HEADROOM)
    answer = capacity(snap, [_template("t", 64000, **template)])
    assert answer.status == "INFEASIBLE"
    assert constraint in {b["constraint"] for b in answer.binding}


def test_infeasible_part_still_sizes_what_can_be_placed() -> None:
    # x needs a tag no template has; y (8000 MB) fits an added host: 1 host, y placed.
    snap = snapshot(
        [host("h0", 4000)],
        [model("x", 1000, required_tags=["tpu"]), model("y", 8000)],
        {"x": want(1), "y": want(1)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("t", 16000)])
    assert answer.status == "INFEASIBLE"
    assert answer.added == {"t": 1}
    assert (answer.placed_before, answer.placed_after, answer.desired) == (0, 1, 2)
    assert {b["model_id"] for b in answer.binding} == {"x"}


def test_max_too_small_is_infeasible_and_says_so() -> None:
    snap = snapshot(
        [host("h0", 4000)],
        [model("a", 8000, max_replicas=3)],
        {"a": want(3)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("t", 16000)], max_per_template=2)
    assert answer.status == "INFEASIBLE"
    assert "max_hosts" in {b["constraint"] for b in answer.binding}
    assert capacity(snap, [_template("t", 16000)], max_per_template=3).added == {"t": 3}


# ----------------------------------------------------------------------------- brute force


def _placed(snap: FleetSnapshot) -> int:
    return sum(whatif.placed_by_model(whatif.plan(snap)).values())


def _brute_force(snap: FleetSnapshot, templates: list[Host], limit: int) -> tuple[int, int] | None:
    """(hosts, memory) of the smallest fleet that places everything, or None."""
    desired = sum(whatif.plan(snap).desired_replicas.values())
    best: tuple[int, int] | None = None
    for counts in itertools.product(range(limit + 1), repeat=len(templates)):
        hosts = sum(counts)
        memory = sum(n * allocatable_mb(t) for n, t in zip(counts, templates, strict=True))
        if best is not None and (hosts, memory) >= best:
            continue
        added = {t.host_id: n for t, n in zip(templates, counts, strict=True)}
        fleet, _ = whatif.augment(snap, added, templates)
        if _placed(fleet) == desired:
            best = (hosts, memory)
    return best


def _random_case(seed: int) -> tuple[FleetSnapshot, list[Host]]:
    rng = random.Random(seed)
    hosts = [
        host(f"h{i}", rng.choice([6000, 10000, 16000]), max_models=rng.choice([0, 1, 2]))
        for i in range(rng.randint(1, 2))
    ]
    models = []
    demand = {}
    for j in range(rng.randint(2, 4)):
        replicas = rng.randint(1, 2)
        fields: dict[str, object] = {"max_replicas": replicas}
        if rng.random() < 0.3:
            fields["max_colocated_models"] = 1
        models.append(model(f"m{j}", rng.choice([3000, 5000, 7000, 9000]), **fields))
        demand[f"m{j}"] = want(replicas)
    snap = snapshot(hosts, models, demand, policy=NO_HEADROOM)
    templates = [
        _template("s", rng.choice([8000, 10000]), max_models=rng.choice([0, 2])),
        _template("l", rng.choice([16000, 20000])),
    ]
    return snap, templates


@pytest.mark.parametrize("seed", range(8))
def test_matches_brute_force_over_small_counts(seed: int) -> None:
    snap, templates = _random_case(seed)
    limit = 3
    expected = _brute_force(snap, templates, limit)
    answer = capacity(snap, templates, max_per_template=limit)
    if expected is None:
        assert answer.status == "INFEASIBLE"
        return
    hosts = sum(answer.added.values())
    memory = sum(answer.added[t.host_id] * allocatable_mb(t) for t in templates)
    assert answer.status == "OPTIMAL"
    assert (hosts, memory) == expected
    assert answer.placed_after == answer.desired


def test_verification_cuts_exclude_the_refused_counts_and_every_smaller_vector() -> None:
    # The tie-break fleet: a (10000 MB) needs 2 new hosts. Refusing (large 0, small 2) leaves
    # (1, 1) as the smallest 2-host answer (64000 + 12000 MB); refusing that too leaves (2, 0)
    # (2 hosts, 128000 MB) ahead of (0, 3) (3 hosts): a cut also removes vectors below it.
    snap = snapshot(
        [host("h0", 4000)],
        [model("a", 10000, max_replicas=2)],
        {"a": want(2)},
        policy=NO_HEADROOM,
    )
    templates = [_template("large", 64000), _template("small", 12000)]
    need = {"a": 2}
    first = solve_counts(snap, templates, 3, need, [], 5.0)
    assert first.counts == {"large": 0, "small": 2}
    cuts = [{"large": 0, "small": 2}]
    assert solve_counts(snap, templates, 3, need, cuts, 5.0).counts == {"large": 1, "small": 1}
    cuts.append({"large": 1, "small": 1})
    assert solve_counts(snap, templates, 3, need, cuts, 5.0).counts == {"large": 2, "small": 0}
    cuts.append({"large": 3, "small": 3})  # nothing within the bound is left
    assert solve_counts(snap, templates, 3, need, cuts, 5.0).status == "INFEASIBLE"


@st.composite
def _fleets(draw: st.DrawFn) -> tuple[FleetSnapshot, list[Host]]:
    hosts = [
        host(
            f"h{i}",
            draw(st.sampled_from([4000, 8000, 12000])),
            max_models=draw(st.sampled_from([0, 1, 2])),
        )
        for i in range(draw(st.integers(1, 2)))
    ]
    models, demand = [], {}
    for j in range(draw(st.integers(1, 3))):
        replicas = draw(st.integers(1, 2))
        fields: dict[str, object] = {"max_replicas": replicas}
        if draw(st.booleans()):
            fields["max_colocated_models"] = draw(st.sampled_from([1, 2]))
        models.append(model(f"m{j}", draw(st.sampled_from([2000, 5000, 9000])), **fields))
        demand[f"m{j}"] = want(replicas)
    templates = [
        _template(
            "s", draw(st.sampled_from([6000, 10000])), max_models=draw(st.sampled_from([0, 1]))
        ),
        _template("l", draw(st.sampled_from([16000, 24000]))),
    ]
    return snapshot(hosts, models, demand, policy=NO_HEADROOM), templates


@pytest.mark.property
@settings(max_examples=12, deadline=None)
@given(_fleets())
def test_an_optimal_answer_places_everything_and_one_host_less_does_not(
    case: tuple[FleetSnapshot, list[Host]],
) -> None:
    snap, templates = case
    answer = capacity(snap, templates, max_per_template=4)
    assert answer.status in {"OPTIMAL", "INFEASIBLE"}
    desired = answer.desired
    if answer.status == "INFEASIBLE":
        # The real planner on the largest fleet considered cannot place everything either.
        fleet, _ = whatif.augment(snap, {t.host_id: 4 for t in templates}, templates)
        assert _placed(fleet) < desired
        return
    fleet, _ = whatif.augment(snap, answer.added, templates)
    assert _placed(fleet) == desired
    for t in templates:
        if answer.added[t.host_id]:
            fewer = dict(answer.added) | {t.host_id: answer.added[t.host_id] - 1}
            smaller, _ = whatif.augment(snap, fewer, templates)
            assert _placed(smaller) < desired


def test_a_pin_to_a_host_whose_memory_is_live_now_is_named() -> None:
    # h0 (10000 MB) runs b (8000 MB, managed, ready); a (5000 MB) is pinned to h0. Only 2000 MB
    # is free now, and a new replica must fit the free memory: no added host moves the pin.
    snap = snapshot(
        [host("h0", 10000, residencies=[resident("b", 8000)])],
        [model("a", 5000, pinned_hosts=["h0"]), model("b", 8000)],
        {"a": want(1), "b": want(1)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("t", 64000)])
    assert answer.status == "INFEASIBLE"
    pins = [b for b in answer.binding if b["constraint"] == "pin"]
    assert pins and pins[0]["host_id"] == "h0" and pins[0]["model_id"] == "a"
    assert "2000 MB free" in str(pins[0]["detail"])


def test_models_that_fit_alone_but_not_together_get_a_core() -> None:
    # a and c (6000 MB each) are both pinned to h0 (10000 MB): either fits alone, not both.
    snap = snapshot(
        [host("h0", 10000)],
        [model("a", 6000, pinned_hosts=["h0"]), model("c", 6000, pinned_hosts=["h0"])],
        {"a": want(1), "c": want(1)},
        policy=NO_HEADROOM,
    )
    answer = capacity(snap, [_template("t", 64000)])
    assert answer.status == "INFEASIBLE"
    assert answer.added == {"t": 0}
    on_h0 = {b["constraint"] for b in answer.binding if b.get("host_id") == "h0"}
    assert on_h0 & {"memory", "live_memory"}
    pinned = {b["model_id"] for b in answer.binding if b["constraint"] == "pin"}
    assert pinned <= {"a", "c"} and pinned
    assert "max_hosts" not in {b["constraint"] for b in answer.binding}
