"""N−1 drill: for each host, what its failure would cost (pure but for the planner's timing).

For a host h, the fleet without h is planned again with the real planner (the allocator would
re-place what it can on the survivors). Per host the drill reports:

    replicas      replicas the baseline plan puts on h (they stop at once)
    unmet         per model, replicas the survivors cannot absorb:
                  max(0, placed_baseline(m) − placed_without_h(m))
    last_replica  models whose every baseline replica is on h (an outage until re-placed)
    lost          models left with no replica at all even after re-planning

A host that the baseline plan leaves empty is not re-planned: the baseline placement is still
valid without it, so (the planner maximizing replicas level by level) nothing goes unmet.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import FleetSnapshot, Plan
from grid.lab.whatif import DEFAULT_TIME_LIMIT_S, placed_by_model, plan, remove_hosts


@dataclass(frozen=True)
class DrillRow:
    host_id: str
    replicas: int
    unmet: dict[str, int]
    last_replica: list[str]
    lost: list[str]
    replanned: bool

    @property
    def unmet_total(self) -> int:
        return sum(self.unmet.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "host_id": self.host_id,
            "replicas": self.replicas,
            "unmet_replicas": self.unmet_total,
            "unmet": dict(self.unmet),
            "last_replica": list(self.last_replica),
            "lost": list(self.lost),
        }


@dataclass(frozen=True)
class Drill:
    baseline_placed: int
    baseline_desired: int
    rows: list[DrillRow]

    def to_dict(self) -> dict[str, object]:
        return {
            "schema_version": 1,
            "desired": self.baseline_desired,
            "placed": self.baseline_placed,
            "hosts": [r.to_dict() for r in self.rows],
        }

    def table(self) -> list[dict[str, object]]:
        """Rows for a notebook table, worst failure first."""
        ordered = sorted(self.rows, key=lambda r: (-r.unmet_total, -r.replicas, r.host_id))
        return [
            {
                "host": r.host_id,
                "replicas on host": r.replicas,
                "unmet after failure": r.unmet_total,
                "unmet models": ", ".join(f"{m}×{n}" for m, n in sorted(r.unmet.items())) or "-",
                "last replica": ", ".join(r.last_replica) or "-",
                "lost after replan": ", ".join(r.lost) or "-",
            }
            for r in ordered
        ]


def drill(
    snap: FleetSnapshot,
    baseline: Plan | None = None,
    *,
    engine: str = "cpsat",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> Drill:
    """The N−1 drill over every host of the snapshot (in snapshot order)."""
    if baseline is None:
        baseline = plan(snap, engine=engine, time_limit_s=time_limit_s)
    base = baseline
    placed0 = placed_by_model(base)
    on_host: dict[str, list[str]] = {}
    for a in base.assignments:
        on_host.setdefault(a.host_id, []).append(a.model_id)
    models_with_replicas = {a.model_id for a in base.assignments}
    rows: list[DrillRow] = []
    for host in snap.hosts:
        here = sorted(set(on_host.get(host.host_id, [])))
        last = [
            m
            for m in here
            if all(a.host_id == host.host_id for a in base.assignments if a.model_id == m)
        ]
        if not here:
            rows.append(DrillRow(host.host_id, 0, {}, [], [], replanned=False))
            continue
        without = remove_hosts(snap, [host.host_id])
        after = placed_by_model(plan(without, engine=engine, time_limit_s=time_limit_s))
        unmet = {
            m: placed0[m] - after.get(m, 0) for m in sorted(placed0) if placed0[m] > after.get(m, 0)
        }
        lost = sorted(m for m in models_with_replicas if placed0.get(m, 0) and not after.get(m))
        rows.append(
            DrillRow(
                host.host_id,
                len(on_host[host.host_id]),
                unmet,
                last,
                lost,
                replanned=True,
            )
        )
    return Drill(
        baseline_placed=sum(placed0.values()),
        baseline_desired=sum(base.desired_replicas.values()),
        rows=rows,
    )
