"""The host-type model's threshold cuts (cpsat/aggregate.py `_threshold_cuts`) are valid: every
replica count that some per-host packing reaches satisfies them (brute force over all packings
of tiny types), and they exclude a count the memory, slot and k-item constraints still allow
(hand-worked).

A packing puts, on each of |T| identical hosts, a set of distinct models (one replica of a model
per host) of at most `cap` items whose sizes sum to at most `limit`; the counts are how many
hosts hold each model. The cuts are checked on the model's own linear constraints with the
counts substituted, no solver involved.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from grid.planner.cpsat.aggregate import _threshold_cuts

pytestmark = pytest.mark.property


def _achievable(sizes: list[int], limit: int, cap: int, hosts: int) -> set[tuple[int, ...]]:
    """Every count vector some packing of `hosts` hosts reaches (brute force)."""
    models = range(len(sizes))
    fits = [
        frozenset(subset)
        for r in range(cap + 1)
        for subset in itertools.combinations(models, r)
        if sum(sizes[m] for m in subset) <= limit
    ]
    out = set()
    for chosen in itertools.combinations_with_replacement(fits, hosts):
        out.add(tuple(sum(1 for s in chosen if m in s) for m in models))
    return out


def _cut_violations(
    sizes: list[int], limit: int, cap: int, hosts: int, counts: tuple[int, ...]
) -> int:
    model = cp_model.CpModel()
    ns = [model.new_int_var(0, hosts, f"n{i}") for i in range(len(sizes))]
    _threshold_cuts(model, ns, sizes, limit, cap, hosts)
    broken = 0
    for ct in model.proto.constraints:
        lin = ct.linear
        pairs = zip(list(lin.vars), list(lin.coeffs), strict=True)
        total = sum(c * counts[v] for v, c in pairs)
        domain = list(lin.domain)
        lo, hi = domain[0], domain[-1]
        if not lo <= total <= hi:
            broken += 1
    return broken


@settings(max_examples=200, deadline=None)
@example([8, 2, 3], 10, 2, 1)  # an item one below t = 3 fits beside the big one
@given(
    st.lists(st.integers(min_value=1, max_value=12), min_size=2, max_size=4),
    st.integers(min_value=6, max_value=16),
    st.integers(min_value=2, max_value=3),
    st.integers(min_value=1, max_value=3),
)
def test_every_packable_count_satisfies_the_threshold_cuts(
    sizes: list[int], limit: int, cap: int, hosts: int
) -> None:
    for counts in _achievable(sizes, limit, cap, hosts):
        assert _cut_violations(sizes, limit, cap, hosts, counts) == 0, counts


def test_the_cuts_exclude_a_count_no_packing_reaches() -> None:
    # Three 2-slot hosts of 10: model A (8) must sit alone-ish (nothing of 3 or more beside
    # it), so with A on two hosts, B (3) and C (3) share the third host: at most one each.
    sizes, limit, cap, hosts = [8, 3, 3], 10, 2, 3
    reachable = _achievable(sizes, limit, cap, hosts)
    assert (2, 1, 1) in reachable and (2, 2, 1) not in reachable
    # Memory 8·2 + 3·2 + 3 = 25 <= 30, slots 5 <= 6, at most one item > 5 per host (2 <= 3):
    # the older constraints allow (2, 2, 1); the cut with t = 3 (2·2 + 2 + 1 = 7 > 6) does not.
    memory, slots = 8 * 2 + 3 * 2 + 3, 2 + 2 + 1
    assert memory <= limit * hosts and slots <= cap * hosts
    assert _cut_violations(sizes, limit, cap, hosts, (2, 2, 1)) >= 1
    assert _cut_violations(sizes, limit, cap, hosts, (2, 1, 1)) == 0
