"""Churn = the allocator's changes of mind (grid/lab/scenario/churn.py), on hand-worked timelines.

Every expected value below is counted by hand from the timeline in the test's comment; the
rule is docs/scenario.md "Churn": healthy unloads, plus starts that take the place of an
unloaded replica; the first fill, growth and reloads after a host outage are not churn.
"""

from __future__ import annotations

import pytest

from grid.lab.scenario.churn import LOST, START, UNLOAD, Change, Churn, count_churn
from grid.lab.scenario.lab import run_scenario
from grid.lab.scenario.report import document
from grid.lab.scenario.world import ScenarioConfig

pytestmark = pytest.mark.unit


def _timeline(text: str) -> list[Change]:
    """`T+h/m` starts m on h at T, `T-h/m` unloads it, `T!h` loses host h (outage or reboot)."""
    out = []
    for token in text.split():
        for mark, kind in (("+", START), ("-", UNLOAD), ("!", LOST)):
            if mark in token:
                at, rest = token.split(mark)
                host, _, model = rest.partition("/")
                out.append(Change(float(at), kind, host, model))
    return out


def test_fill_three_outage_reload_one_swap_is_churn_two() -> None:
    # t0: fill a@h1, b@h1, c@h2 (3 fill); t10: h2 down (c lost); t20: c@h1 (outage reload);
    # t30: unload b@h1 (healthy, +1); t31: d@h1 takes its place (+1)  ->  churn 2
    timeline = _timeline("0+h1/a 0+h1/b 0+h2/c 10!h2 20+h1/c 30-h1/b 31+h1/d")
    assert count_churn(timeline) == Churn(
        churn=2, healthy_unloads=1, replacing_starts=1, fill_starts=3, outage_restarts=1
    )


def test_the_ledger_orders_by_time_not_by_list_position() -> None:
    timeline = _timeline("31+h1/d 30-h1/b 0+h1/b")
    assert count_churn(timeline).churn == 2  # fill b, unload b (+1), d replaces it (+1)


def test_a_flap_costs_two_and_growth_costs_nothing() -> None:
    # a@h1 (fill), b@h2 (growth: nothing was freed), unload a (+1), a@h1 again (+1)
    timeline = _timeline("0+h1/a 5+h2/b 10-h1/a 20+h1/a")
    got = count_churn(timeline)
    assert (got.churn, got.fill_starts) == (2, 2)


def test_a_scale_in_that_is_never_refilled_costs_one() -> None:
    timeline = _timeline("0+h1/a 0+h2/a 50-h2/a")
    assert count_churn(timeline).churn == 1


def test_an_unload_on_a_host_that_went_down_is_not_churn() -> None:
    # a@h1 lost in the outage at t10; the stale unload at t12 removes nothing live; the reload
    # at t20 replaces the lost replica
    timeline = _timeline("0+h1/a 10!h1 12-h1/a 20+h1/a")
    assert count_churn(timeline) == Churn(0, 0, 0, 1, 1)


def test_a_start_finished_at_the_outage_minute_is_lost_with_the_host() -> None:
    # the start completed in the minute before the node event at t60: lost with it, so the
    # reload at t90 is an outage reload, not churn
    timeline = _timeline("60!h1 60+h1/a 90+h2/a")
    assert count_churn(timeline) == Churn(0, 0, 0, 1, 1)


def test_outage_reloads_come_before_replacements() -> None:
    # one healthy unload (+1) and one host loss before two starts: the first start is the outage
    # reload, the second replaces the unloaded replica (+1)
    timeline = _timeline("0+h1/a 0+h2/b 10-h1/a 11!h2 20+h1/b 21+h1/a")
    assert count_churn(timeline) == Churn(2, 1, 1, 2, 1)


def test_the_report_keeps_raw_loads_and_unloads_beside_churn() -> None:
    cfg = ScenarioConfig(machines=2, models=6, users=8, duration_s=1800, seed=3, strategy="greedy")
    s = document(run_scenario(cfg))["summary"]
    d = s["churn_detail"]
    assert s["loads"] == d["fill_loads"] + d["replacing_loads"] + d["outage_reloads"]
    assert s["unloads"] >= d["healthy_unloads"]
    assert s["churn"] == d["healthy_unloads"] + d["replacing_loads"]
    assert d["replacing_loads"] <= d["healthy_unloads"]
