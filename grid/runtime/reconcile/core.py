"""The reconciler: (plan, actual fleet, history, mode, now, tombstones) -> actions and deferrals.

Pure: no I/O and no clock; `now` is the snapshot's. One tick runs these stages in order:
1. index the snapshot, the plan and the history once;
2. retirement: cancel every open load or warm of a tombstoned model;
3. destructive blocks: delivered drains or unloads that were withdrawn and never acknowledged
   block their model until a newer heartbeat proves the outcome; open drains that fresh
   evidence makes unsafe withdraw their model's whole destructive batch;
4. availability work (LOAD, WARM) for missing planned replicas;
5. staged preemptions (prefetch, victim drain and unload);
6. cleanup of obsolete and retired managed residencies (drain, then unload once idle), then
   the predictive cache's cache-only prefetches and exact evictions (cache.py);
   stages 3, 5 and 6 pass every drain and unload through the one gate list (`gates.py`), and
   open drains count as gone for every floor check after stage 3;
7. undelivered open records that no stage still wants are withdrawn (`plan_changed`);
8. the governors admit proposals in service order; the mode sets their authority.
An open record whose work is still wanted keeps its id and is not proposed again (`in_flight`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from grid.fleet import (
    CONSTRUCTIVE_KINDS,
    ActionRecord,
    FleetSnapshot,
    Mode,
    Plan,
    ReconcileResult,
    Tombstone,
)
from grid.planner import Target
from grid.runtime.reconcile.cache import propose_cache_work
from grid.runtime.reconcile.constructive import propose_constructive
from grid.runtime.reconcile.destructive import (
    block_dangling,
    note_open_drains,
    propose_cleanup,
    revalidate_open_batches,
)
from grid.runtime.reconcile.governors import Governor
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.modes import apply_mode, parse_mode
from grid.runtime.reconcile.preempt import preemption_victims, propose_preemptions
from grid.runtime.reconcile.proposals import TickState
from grid.runtime.reconcile.view import FleetView


def reconcile(
    plan: Plan,
    snapshot: FleetSnapshot,
    history: Iterable[ActionRecord] = (),
    *,
    mode: Mode | str = Mode.RECOMMEND,
    tombstones: Iterable[Tombstone] = (),
    now: float | None = None,
    targets: dict[str, Target] | None = None,
    plan_current: bool = True,
) -> ReconcileResult:
    """Decide this tick's actions. `now` defaults to the snapshot's own `now`; `targets`:
    compute_targets of the snapshot at that `now`, when the caller has computed it.
    `plan_current`: the plan was solved for this snapshot's inputs (the tick's generation);
    pass False for a plan solved for older inputs (a carried or stored plan): its staged
    preemptions then keep every availability floor (gates.py `_unless_outranked`)."""
    chosen = parse_mode(mode)
    snap = snapshot if now is None else snapshot.model_copy(update={"now": now})
    if now is not None and now != snapshot.now:
        targets = None  # computed for another clock
    view = FleetView(
        snap=snap,
        plan=plan,
        tombstones=list(tombstones),
        given_targets=targets,
        plan_current=plan_current,
    )
    index = HistoryIndex(list(history))
    tick = TickState(now=snap.now, retry_soon=view.retry_soon())

    for record in index.open_records():
        if record.model_id in view.retired and record.kind in CONSTRUCTIVE_KINDS:
            tick.withdraw(record, "model_retired")

    victims = preemption_victims(view)
    block_dangling(view, index, tick)
    revalidate_open_batches(view, index, tick, victims)
    note_open_drains(view, index, tick)  # every later floor check sees them as gone
    propose_constructive(view, index, tick)
    propose_preemptions(view, index, tick, victims)
    propose_cleanup(view, index, tick, victims)
    propose_cache_work(view, index, tick)

    for record in index.open_records():
        wanted = record.action_id in tick.in_flight
        if not wanted and not record.was_delivered and not tick.is_withdrawn(record):
            tick.withdraw(record, "plan_changed")

    governor = Governor(view, index, tick, allow_yield=chosen is not Mode.OBSERVE)
    admitted = governor.admit(tick.proposals)
    actions, deferred = apply_mode(chosen, admitted, tick.deferred, retry_at=tick.retry_soon)
    return ReconcileResult(
        mode=chosen,
        now=snap.now,
        actions=actions,
        deferred=sorted(deferred, key=lambda d: (d.model_id, d.host_id, d.kind.value, d.code)),
        withdrawn=sorted(tick.withdrawn.values(), key=lambda w: w.action_id),
        in_flight=sorted(tick.in_flight),
        blocked_models=sorted(tick.blocked_models),
    )


def result_document(result: ReconcileResult, plan: Plan) -> dict[str, Any]:
    """The `grid reconcile --json` document: actions, deferrals, withdrawals and the plan."""
    doc = result.model_dump(mode="json")
    doc["plan"] = plan.model_dump(mode="json")
    return doc
