"""Controller tick benchmark: full ticks (forecast -> plan -> reconcile -> durable save).

    .venv/bin/python bench/bench_controller.py [--sizes 8,64,256] [--ticks 15] [--budget 2]
                                               [--engine cpsat] [--json]

Per size it registers a generated fleet (grid.lab.fleetgen) through the node wire contract,
configures its model profiles, feeds five minutes of request observations matching the
generated demand, then runs ticks in recommend mode (the same planning and reconciliation work
as automatic mode, without commands) with a heartbeat before each so every tick is dirty.

Two columns per size: `changing` heartbeats alter one host's external memory use every tick,
so every tick re-solves; `idle` heartbeats repeat the same facts, so the controller keeps the
proven plan (its inputs, clock-derived facts included, are unchanged) and only reconciles.
It prints tick latency p50/p95/max and the solver status. Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.demand import Observation
from grid.fleet.models import Host
from grid.fleet.wire import NodeUpdate, WireAllocator, WireResources
from grid.lab.fleetgen import generate_fleet
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.core import Controller
from grid.runtime.controller.lease import LeaseFile
from grid.runtime.controller.store import StateStore

MODELS_FOR_HOSTS = {8: 6, 64: 32, 256: 96}
NOW = 1_785_300_000.0
MAX_OBS_PER_MODEL = 300


def wire_update(host: Host, *, external_mb: int | None = None) -> NodeUpdate:
    """The registration a node of this host would send (the fleet wire models, typed)."""
    return NodeUpdate(
        role="allocator",
        host_id=host.host_id,
        request_commands=False,
        resources=WireResources(
            capacity_mb=host.capacity_mb,
            reserved_mb=host.reserved_mb,
            external_mb=host.external_mb if external_mb is None else external_mb,
            runtimes=host.runtimes,
            backends=host.backends,
            memory_bandwidth_gbps=host.memory_bandwidth_gbps,
            compute_gflops=host.compute_gflops,
            failure_domain=host.failure_domain,
            tags=host.tags,
            data_tiers=host.data_tiers,
            max_models=host.max_models,
            disk_free_mb=host.disk_free_mb,
        ),
        allocator=WireAllocator(
            schema_version=1,
            state=host.state.value,
            throttle_fraction=host.throttle_fraction,
            cached_models=host.cached_models,
            residencies=[r.model_dump(mode="json") for r in host.residencies],
            actuator_capabilities=host.actuator_capabilities,
        ),
    )


def observations(model_id: str, rpm: float, concurrency: float, now: float) -> list[Observation]:
    count = min(MAX_OBS_PER_MODEL, max(1, round(rpm * 5)))
    service = min(3600.0, concurrency * 60.0 / rpm) if rpm > 0 else 1.0
    step = 300.0 / count
    return [
        Observation(model_id=model_id, timestamp=now - i * step, service_time_s=service)
        for i in range(count)
    ]


def run_size(hosts: int, ticks: int, budget: float, engine: str, changing: bool) -> dict[str, Any]:
    models = MODELS_FOR_HOSTS.get(hosts, max(2, hosts // 3))
    snap = generate_fleet(hosts, models, seed=42, now=NOW)
    folder = Path(tempfile.mkdtemp(prefix="grid-bench-"))
    config = ControllerConfig(engine=engine, plan_budget_s=budget, membership_grace_s=0.0)
    lease = LeaseFile(folder / "state.json.lease", controller_id="bench")
    ctl = Controller(StateStore(folder / "state.json"), now=NOW, config=config, lease=lease)
    for host in snap.hosts:
        ctl.node_update(f"node-{host.host_id}", host.host_id, wire_update(host), NOW)
    for profile in snap.models:
        ctl.put_profile(profile.model_id, profile.model_dump(mode="json"), NOW)
    for model_id, entry in snap.demand.items():
        ctl.observe(observations(model_id, entry.rpm, entry.offered_concurrency, NOW), NOW)
    latencies: list[float] = []
    statuses: set[str] = set()
    reused = 0
    now = NOW
    for i in range(ticks):
        now += 5.0
        host = snap.hosts[i % len(snap.hosts)]
        external = host.external_mb + 16 * (i + 1) if changing else None
        update = wire_update(host, external_mb=external)
        ctl.node_update(f"node-{host.host_id}", host.host_id, update, now)
        report = ctl.tick(now)
        if not report.ok:
            raise SystemExit(f"tick failed at {hosts} hosts: {report.error}")
        latencies.append(report.duration_ms)
        reused += report.reused_plan
        statuses.add(f"{report.engine}:{report.solver_status}")
    ordered = sorted(latencies)
    plan = ctl.last_plan
    assert plan is not None
    return {
        "inputs": "changing" if changing else "idle",
        "hosts": hosts,
        "models": models,
        "ticks": ticks,
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
        "max_ms": round(ordered[-1], 1),
        "solver": sorted(statuses),
        "reused": reused,
        "assignments": len(plan.assignments),
        "unmet": sum(u.missing_replicas for u in plan.unsatisfied),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,256")
    parser.add_argument("--ticks", type=int, default=15)
    parser.add_argument("--budget", type=float, default=2.0)
    parser.add_argument("--engine", default="cpsat", choices=["cpsat", "heuristic"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [
        run_size(int(size), args.ticks, args.budget, args.engine, changing)
        for size in args.sizes.split(",")
        for changing in (True, False)
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'hosts':>5} {'models':>6} {'inputs':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}"
        "  solver"
    )
    for r in rows:
        print(
            f"{r['hosts']:>5} {r['models']:>6} {r['inputs']:>8} {r['p50_ms']:>8} "
            f"{r['p95_ms']:>8} {r['max_ms']:>8}  {', '.join(r['solver'])} "
            f"(plans reused {r['reused']}/{r['ticks']}, unmet replicas {r['unmet']})"
        )


if __name__ == "__main__":
    main()
