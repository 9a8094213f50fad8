"""Controller tick benchmark: full ticks (forecast -> plan -> reconcile -> durable save).

    .venv/bin/python bench/bench_controller.py [--sizes 8,64,256,1000] [--ticks 15] [--budget 2]
                                               [--engine cpsat] [--workers inline,process]
                                               [--interval 0.5] [--idle] [--niceness 10]
                                               [--stores file,etcd] [--prefetch off,on] [--json]

Per size it registers a generated fleet (grid.lab.fleetgen) through the node wire contract,
configures its model profiles, feeds five minutes of request observations matching the
generated demand, then runs ticks in recommend mode (the same planning and reconciliation work
as automatic mode, without commands) with a heartbeat before each so every tick is dirty.

Two columns per size: `changing` heartbeats alter one host's external memory use every tick,
so every tick has new plan inputs; `idle` (with `--idle`) heartbeats repeat the same facts, so
the controller keeps the plan while its inputs (clock-derived facts included) are unchanged
and only reconciles. With 5 s of simulated time per tick keep `--ticks` under ~15: hosts
without a heartbeat go stale after 90 s.
It prints tick latency p50/p95/max and the solver status. Prints figures only; asserts nothing.
`--stores file,etcd` runs every column on the state file (the baseline) and on a real
three-member etcd cluster (the fenced, chunked store of a controller cluster) in the same run.

`--prefetch off,on` runs every column once per setting of the predictive cache in the same run:
every model gets an exact artifact source, every snapshot carries predictions for up to 32
models (each a learned edge with confidence 0.8) and every fourth host reports an unused
predictive entry past its TTL, so "on" plans advisories and expiries and reconciles their loads
and evicts, while "off"
(`policy.prefetch.enabled = false`) plans the same snapshots without them. `advise ms` is the
advisory step alone (`plan_prefetch` on the last tick's snapshot and plan, median of 20).

`--workers` runs every size once per `ControllerConfig.plan_worker` in the same run: "inline"
(the solve inside the tick: the baseline) and "thread"/"process" (the solve off the tick's
critical path, docs/controller-tick.md). The first tick of a fresh controller has no plan to
act on and always solves inline: it is reported apart (`first ms`), not in p50/p95. Between
ticks the bench sleeps `--interval` real seconds (the service ticks every 5 s), so a background
solve can finish and be adopted; `sources` counts each tick's plan source (reused, solved,
adopted, carried) and `caught up` says whether, once the inputs stop changing and the worker
is idle, one more tick acts on a plan solved for exactly its inputs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.demand import Observation
from grid.fleet.models import FleetSnapshot, Host
from grid.fleet.prefetch import Prediction, PrefetchPolicy
from grid.fleet.wire import NodeUpdate, WireAllocator, WirePredictiveEntry, WireResources
from grid.lab.fleetgen import generate_fleet
from grid.planner.prefetch import plan_prefetch
from grid.runtime.controller import plan_worker
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.core import Controller
from grid.runtime.controller.lease import LeaseFile
from grid.runtime.controller.store import StateStore

MODELS_FOR_HOSTS = {8: 6, 64: 32, 256: 96, 1000: 200}
NOW = 1_785_300_000.0
MAX_OBS_PER_MODEL = 300


def wire_update(
    host: Host, *, external_mb: int | None = None, predictive: list[Any] | None = None
) -> NodeUpdate:
    """The registration a node of this host would send (the fleet wire models, typed)."""
    caps = list(host.actuator_capabilities) + (["evict"] if predictive is not None else [])
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
            actuator_capabilities=caps,
            predictive_cache=predictive or [],
        ),
    )


def prefetch_inputs(snap: FleetSnapshot) -> tuple[list[Prediction], dict[str, list[Any]]]:
    """Predictions for up to 32 models, and an expired unused predictive entry on every fourth
    host (of a model without demand that no prediction names)."""
    exact = [m for m in snap.models if m.artifact_sha256 and m.artifact_size_mb]
    quiet = [m for m in exact if m.model_id not in snap.demand]
    rest = quiet[-2:]
    predictions = [
        Prediction(
            model_id=m.model_id,
            source="general",
            target=f"w{i}",
            confidence=0.8,
            offered_concurrency=1.0,
            lead_s=60.0,
        )
        for i, m in enumerate([m for m in exact if m not in rest][:32])
    ]
    entries: dict[str, list[Any]] = {}
    for i, host in enumerate(snap.hosts):
        if i % 4 or not rest:
            continue
        m = rest[i % len(rest)]
        entries[host.host_id] = [
            WirePredictiveEntry(
                model_id=m.model_id,
                sha256=m.artifact_sha256,
                size_mb=m.artifact_size_mb,
                cached_age_s=7 * 3600.0,
            )
        ]
    return predictions, entries


def observations(model_id: str, rpm: float, concurrency: float, now: float) -> list[Observation]:
    count = min(MAX_OBS_PER_MODEL, max(1, round(rpm * 5)))
    service = min(3600.0, concurrency * 60.0 / rpm) if rpm > 0 else 1.0
    step = 300.0 / count
    return [
        Observation(model_id=model_id, timestamp=now - i * step, service_time_s=service)
        for i in range(count)
    ]


def p95(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def etcd_store(args: argparse.Namespace, *key: object) -> tuple[Any, Any]:
    """A fenced etcd store on the bench's three-member cluster, under its own prefix."""
    from grid.runtime.controller.etcd import EtcdClient, EtcdLease, EtcdStore, parse_store_url

    target = parse_store_url(f"{args.cluster.store_url}/bench-{'-'.join(map(str, key))}")
    client = EtcdClient(target)
    # Ticks run on a virtual clock: a long etcd lease outlives the run without renewals.
    lease = EtcdLease(client, target.prefix, controller_id="bench", url="", ttl_s=3600)
    with lease.campaigning():
        lease.acquire(time.time())
    store = EtcdStore(
        client, target.prefix, fence=lease.fence, term_key=lease.term_key,
        leader_key=lease.leader_key,
    )  # fmt: skip
    return store, lease


def run_size(
    hosts: int,
    ticks: int,
    args: argparse.Namespace,
    worker: str,
    changing: bool,
    store_kind: str = "file",
    prefetch: str | None = None,
) -> dict[str, Any]:
    models = MODELS_FOR_HOSTS.get(hosts, max(2, hosts // 3))
    snap = generate_fleet(hosts, models, seed=42, now=NOW)
    predictions, entries = prefetch_inputs(snap) if prefetch else ([], {})
    folder = Path(tempfile.mkdtemp(prefix="grid-bench-"))
    config = ControllerConfig(
        engine=args.engine,
        plan_budget_s=args.budget,
        membership_grace_s=0.0,
        plan_worker=worker,
    )
    if store_kind == "etcd":
        store, lease = etcd_store(args, hosts, worker, changing, prefetch)
    else:
        lease = LeaseFile(folder / "state.json.lease", controller_id="bench")
        store = StateStore(folder / "state.json")
    ctl = Controller(store, now=NOW, config=config, lease=lease)
    if prefetch:
        ctl.policy = ctl.policy.model_copy(
            update={"prefetch": PrefetchPolicy(enabled=prefetch == "on")}
        )
        built = ctl.snapshot
        ctl.snapshot = lambda now: built(now).model_copy(  # type: ignore[method-assign]
            update={"predictions": predictions}
        )

    def update_of(host: Host, external_mb: int | None = None) -> NodeUpdate:
        if not prefetch:
            return wire_update(host, external_mb=external_mb)
        return wire_update(host, external_mb=external_mb, predictive=entries.get(host.host_id, []))

    for host in snap.hosts:
        ctl.node_update(f"node-{host.host_id}", host.host_id, update_of(host), NOW)
    for profile in snap.models:
        body = profile.model_dump(mode="json")
        if prefetch and profile.artifact_sha256 and profile.artifact_size_mb:
            # an exact operator-authorized source: what an advisory needs
            body["artifact_source"] = f"hf://bench/{profile.model_id}/{profile.model_id}.gguf"
        ctl.put_profile(profile.model_id, body, NOW)
    for model_id, entry in snap.demand.items():
        ctl.observe(observations(model_id, entry.rpm, entry.offered_concurrency, NOW), NOW)
    latencies: list[float] = []
    statuses: set[str] = set()
    sources: Counter[str] = Counter()
    now = NOW
    first_ms = 0.0
    for i in range(ticks + 1):
        now += 5.0
        host = snap.hosts[i % len(snap.hosts)]
        external = host.external_mb + 16 * (i + 1) if changing else None
        update = update_of(host, external)
        ctl.node_update(f"node-{host.host_id}", host.host_id, update, now)
        report = ctl.tick(now)
        if not report.ok:
            raise SystemExit(f"tick failed at {hosts} hosts: {report.error}")
        if i == 0:
            first_ms = report.duration_ms  # no plan yet: always an inline solve
        else:
            latencies.append(report.duration_ms)
            sources[report.plan_source] += 1
        statuses.add(f"{report.engine}:{report.solver_status}")
        time.sleep(args.interval)
    caught_up = True
    if ctl.plan_worker is not None:  # inputs stop changing: the next tick acts on their plan
        ctl.plan_worker.wait(120.0)
        now += 5.0
        ctl.request_tick()
        report = ctl.tick(now)
        caught_up = report.plan_source in ("adopted", "reused") and report.ok
    solves = sorted(ctl.plan_worker.solves_ms) if ctl.plan_worker is not None else []
    ctl.close()
    ordered = sorted(latencies)
    plan = ctl.last_plan
    assert plan is not None
    advise_ms = None
    if prefetch:
        last = ctl.snapshot(now)
        timings = []
        for _ in range(20):
            started = time.perf_counter()
            plan_prefetch(last, plan)
            timings.append((time.perf_counter() - started) * 1000)
        advise_ms = round(statistics.median(timings), 2)
    report_doc = plan.prefetch
    return {
        "store": store_kind,
        "prefetch": prefetch or "-",
        "advise_ms": advise_ms,
        "advisories": len(report_doc.advisories) if report_doc else 0,
        "evictions": len(report_doc.evictions) if report_doc else 0,
        "worker": worker,
        "inputs": "changing" if changing else "idle",
        "hosts": hosts,
        "models": models,
        "ticks": ticks,
        "first_ms": first_ms,
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(p95(ordered), 1),
        "max_ms": round(ordered[-1], 1),
        "solver": sorted(statuses),
        "sources": dict(sorted(sources.items())),
        "background_solve_p50_ms": round(statistics.median(solves), 1) if solves else None,
        "caught_up": caught_up,
        "reused": sources["reused"],
        "assignments": len(plan.assignments),
        "unmet": sum(u.missing_replicas for u in plan.unsatisfied),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64,256", help="comma-separated host counts")
    parser.add_argument("--ticks", type=int, default=15, help="measured ticks per column")
    parser.add_argument("--budget", type=float, default=2.0, help="plan budget per solve (s)")
    parser.add_argument("--engine", default="cpsat", choices=["cpsat", "heuristic"])
    parser.add_argument(
        "--workers",
        default="inline,process",
        help="comma-separated plan_worker settings to compare (inline is the baseline)",
    )
    parser.add_argument(
        "--interval", type=float, default=0.5, help="real seconds slept between ticks"
    )
    parser.add_argument("--idle", action="store_true", help="also run the idle-inputs column")
    parser.add_argument(
        "--niceness",
        type=int,
        default=plan_worker.WORKER_NICENESS,
        help="niceness of the process worker (plan_worker.WORKER_NICENESS)",
    )
    parser.add_argument(
        "--prefetch",
        default="",
        help="comma-separated predictive-cache settings to compare (off,on); default: neither",
    )
    parser.add_argument(
        "--stores",
        default="file",
        help="comma-separated stores: file (the state file, the baseline) and etcd (a real "
        "three-member cluster on loopback, started by the bench: tests/ha/cluster.py)",
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    plan_worker.WORKER_NICENESS = args.niceness
    stores = args.stores.split(",")
    settings = [p for p in args.prefetch.split(",") if p] or [None]
    args.cluster = None
    if "etcd" in stores:
        from tests.ha.cluster import EtcdCluster

        args.cluster = EtcdCluster(Path(tempfile.mkdtemp(prefix="grid-bench-etcd-"))).start()
    try:
        rows = [
            run_size(int(size), args.ticks, args, worker, changing, store, prefetch)
            for size in args.sizes.split(",")
            for changing in ((True, False) if args.idle else (True,))
            for worker in args.workers.split(",")
            for store in stores
            for prefetch in settings
        ]
    finally:
        if args.cluster is not None:
            args.cluster.stop()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"process worker niceness {args.niceness}, {args.interval} s between ticks")
    print(
        f"{'hosts':>5} {'models':>6} {'store':>5} {'worker':>8} {'inputs':>8} {'prefetch':>8} "
        f"{'first ms':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}  solver"
    )
    for r in rows:
        solve = r["background_solve_p50_ms"]
        extra = f", background solve p50 {solve} ms" if solve is not None else ""
        if r["advise_ms"] is not None:
            extra += (
                f", advise {r['advise_ms']} ms, {r['advisories']} advisories, "
                f"{r['evictions']} evictions"
            )
        print(
            f"{r['hosts']:>5} {r['models']:>6} {r['store']:>5} {r['worker']:>8} {r['inputs']:>8} "
            f"{r['prefetch']:>8} "
            f"{r['first_ms']:>8} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['max_ms']:>8}  "
            f"{', '.join(r['solver'])} (sources {r['sources']}{extra}, caught up "
            f"{r['caught_up']}, unmet replicas {r['unmet']})"
        )


if __name__ == "__main__":
    main()
