"""Planning off the tick's critical path (`ControllerConfig.plan_worker` "thread" or "process").

A tick whose inputs changed does not wait for the solver. It takes, in order:
1. the newest background result that no later plan has fenced off (`take`), if the plan
   passes the hard-constraint checks of `grid/planner/validate.py` against the tick's own
   snapshot (`carry_blockers`): "adopted";
2. otherwise the plan it already acts on, under the same check: "carried";
3. otherwise (no plan yet, or the fleet changed so that the plan breaks a hard constraint: a
   host left, memory shrank, a model was reconfigured) a solve inline, as in "inline" mode,
   which fences every older background request off (`supersede`): "solved".
Whenever the plan taken was solved for other inputs than the tick's, the tick asks the worker
for a plan of its own snapshot (`request`; the newest request replaces a queued one, so at most
one solve runs and one waits). The reconciler and its gates run every tick on the tick's own
snapshot whichever plan it takes, so a carried or adopted plan changes only which target the
fleet converges to, never which safety checks an action passes.

The solve is the inline one (`planning.solve`: the configured engine within its budget, the
heuristic if it fails), so a plan adopted once the inputs stop changing is the plan an inline
tick would have solved for the same snapshot.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

from grid.fleet import FleetSnapshot, Plan
from grid.planner import Target, violations
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.live_state import LastTick, Warnings
from grid.runtime.controller.planning import Planner, describe, solve
from grid.runtime.controller.reports import TickReport

# Findings that make a plan solved for older inputs stale but not unsafe: a residency that
# finished loading since (its `existing` flag), and a target that moved since (a shortfall or
# pin the plan's explanations do not cover yet, a surplus replica or one off its pins after a
# scale-down). The reconciler's floors and gates use the tick's own targets whatever the plan
# says, and the next background plan follows the new target. Every other finding (a host gone or
# not admitting, memory, slots, disk, runtime, colocation, an unmanaged replica missing) is a
# hard constraint the fleet no longer allows: such a plan is never acted on.
SOLVE_SAMPLES = 256
MAX_FAILURES = 3  # background solves in a row without a plan before a tick solves inline
WORKER_NICENESS = 10  # on two shared cores a solve beside a tick doubled its latency
TOLERATED_CODES = frozenset(
    {
        "existing_flag",
        "unexplained_shortfall",
        "unexplained_pin",
        "replica_bounds",
        "pin_substituted",
    }
)


@dataclass(frozen=True)
class Solved:
    """One finished background solve."""

    ticket: int
    digest: str  # the input digest of the snapshot it solved
    solved_at: float  # that snapshot's `now`
    plan: Plan | None
    error: str
    wall_ms: float


@dataclass(frozen=True)
class PlanNeed:
    """A tick's snapshot with its input digest and targets (computed once per tick)."""

    snap: FleetSnapshot
    digest: str
    targets: dict[str, Target]


@dataclass(frozen=True)
class Choice:
    plan: Plan
    digest: str  # the inputs it was solved for (the generation follows these)
    solved_at: float
    source: str  # "adopted" or "carried"


def carry_blockers(plan: Plan, snap: FleetSnapshot, targets: dict[str, Target]) -> list[str]:
    """Why `plan` may not be acted on against `snap` (empty: it may)."""
    found = violations(snap, plan, targets)
    out = [f"{v.code}: {v.message}" for v in found if v.code not in TOLERATED_CODES]
    for p in plan.preemptions:
        # An eviction staged for a model whose target has since dropped may be needless, and
        # an eviction is destructive.
        target = targets.get(p.beneficiary_model_id)
        wanted = plan.desired_replicas.get(p.beneficiary_model_id, 0)
        if target is None or target.desired < wanted:
            out.append(
                f"preemption_target_dropped: {p.beneficiary_model_id} wanted {wanted} "
                f"replica(s) when the eviction on {p.host_id} was staged, now "
                f"{target.desired if target is not None else 0}"
            )
    return out


def tick_plan(
    worker: PlanWorker | None,
    planner: Planner,
    config: ControllerConfig,
    last: LastTick,
    need: PlanNeed,
    report: TickReport,
) -> tuple[Plan | None, str, float]:
    """The plan a tick whose inputs changed acts on: (plan, the digest it was solved for, the
    clock it was solved at). Without a worker, after MAX_FAILURES background solves in a row
    failed, or when neither the newest background result nor the plan in use passes
    `carry_blockers`, it solves inline (and fences older requests)."""
    snap = need.snap
    if worker is not None:
        result = worker.take()  # a failed one (no plan: both engines failed, a crash) is dropped
        choice: Choice | None = None
        if result is not None and result.plan is not None:
            choice = Choice(result.plan, result.digest, result.solved_at, "adopted")
        if choice is not None and carry_blockers(choice.plan, snap, need.targets):
            choice = None
        if choice is None and last.plan is not None and worker.failures < MAX_FAILURES:
            choice = Choice(last.plan, last.plan_digest, last.solved_at, "carried")
            if carry_blockers(last.plan, snap, need.targets):
                choice = None
        if choice is not None:
            if choice.digest != need.digest:
                worker.request(snap, need.digest, planner)
            report.plan_source = choice.source
            return choice.plan, choice.digest, choice.solved_at
        worker.supersede()
    report.plan_source = "solved"
    return solve(planner, snap, config, report), need.digest, snap.now


def note_failures(worker: PlanWorker | None, warnings: Warnings) -> None:
    """Warn while background solves fail (the caller holds the controller's lock)."""
    if worker is not None and worker.failures:
        warnings.warn(
            "background_plan_failed",
            f"{worker.failures} background plan solve(s) in a row failed, the last: "
            f"{worker.last_error}; after {MAX_FAILURES} the controller solves in the tick",
        )
    else:
        warnings.pop("background_plan_failed", None)


def solve_job(planner: Planner, snap: FleetSnapshot, config: ControllerConfig) -> Solved:
    """The background solve (module-level, so a process pool can run it)."""
    started = time.perf_counter()
    report = TickReport(ok=False, at=snap.now, revision=0)
    plan = solve(planner, snap, config, report)
    wall_ms = round((time.perf_counter() - started) * 1000, 1)
    return Solved(0, "", snap.now, plan, report.error, wall_ms)


def background_priority(niceness: int) -> None:
    """The worker process yields the CPU to the ticks (and everything else) it runs beside."""
    with contextlib.suppress(OSError):  # not permitted here: the normal priority
        os.nice(niceness)


class PlanWorker:
    """At most one background solve in flight and one queued; results fenced by ticket."""

    def __init__(
        self, kind: str, config: ControllerConfig, on_ready: Callable[[], None] | None = None
    ) -> None:
        self.kind = kind
        self.config = config
        self.on_ready = on_ready
        self._executor: Executor | None = None
        self._cond = threading.Condition()
        self._ticket = 0  # the newest request issued
        self._fence = 0  # results with a ticket up to this are superseded
        self._in_flight: tuple[int, str] | None = None
        self._pending: tuple[int, str, FleetSnapshot, Planner] | None = None
        self._done: Solved | None = None
        self.failures = 0  # background solves in a row that ended without a plan
        self.last_error = ""
        self.solves_ms: deque[float] = deque(maxlen=SOLVE_SAMPLES)  # recent solves' wall times

    # -- the tick's side -----------------------------------------------------------------
    def request(self, snap: FleetSnapshot, digest: str, planner: Planner) -> None:
        """Ask for a plan of these inputs; a queued older request is replaced."""
        with self._cond:
            wanted = {self._in_flight[1] if self._in_flight else None}
            wanted.add(self._pending[1] if self._pending else None)
            if self._done is not None and self._done.ticket > self._fence:
                wanted.add(self._done.digest)
            if digest in wanted:
                return
            self._ticket += 1
            if self._in_flight is None:
                self._start(self._ticket, digest, snap, planner)
            else:
                self._pending = (self._ticket, digest, snap, planner)

    def take(self) -> Solved | None:
        """The newest finished result no later plan has fenced off (each is taken once)."""
        with self._cond:
            done, self._done = self._done, None
            return done if done is not None and done.ticket > self._fence else None

    def supersede(self) -> None:
        """A plan was solved inline for the newest inputs: every earlier request is obsolete.
        After MAX_FAILURES failures the next change is tried in the background once more."""
        with self._cond:
            self.failures = min(self.failures, MAX_FAILURES - 1)
            self._fence = self._ticket
            self._pending = None
            self._done = None

    def idle(self) -> bool:
        with self._cond:
            return self._in_flight is None and self._pending is None

    def wait(self, timeout_s: float) -> bool:
        """Block until nothing is in flight or queued (tests and the bench); False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._in_flight is None and self._pending is None, timeout_s
            )

    def close(self) -> None:
        with self._cond:
            executor, self._executor = self._executor, None
            self._pending = None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    # -- the worker's side ---------------------------------------------------------------
    def _pool(self) -> Executor:
        if self._executor is None:
            if self.kind == "process":
                context = multiprocessing.get_context("spawn")  # no fork of a threaded server
                self._executor = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=context,
                    initializer=background_priority,
                    initargs=(WORKER_NICENESS,),
                )
            else:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grid-plan")
        return self._executor

    def _start(self, ticket: int, digest: str, snap: FleetSnapshot, planner: Planner) -> None:
        """Submit one solve (the condition is held)."""
        self._in_flight = (ticket, digest)
        try:
            future = self._pool().submit(solve_job, planner, snap, self.config)
        except Exception as exc:  # a broken pool: report it and start afresh next time
            self._executor = None
            self._finish(ticket, digest, Solved(ticket, digest, snap.now, None, describe(exc), 0))
            return
        future.add_done_callback(lambda f: self._collect(ticket, digest, snap.now, f))

    def _collect(self, ticket: int, digest: str, at: float, future: Future[Solved]) -> None:
        broken = False
        try:
            got = future.result()
            solved = Solved(ticket, digest, at, got.plan, got.error, got.wall_ms)
        except BaseException as exc:  # a crashed worker process, a cancelled future
            broken = True
            solved = Solved(ticket, digest, at, None, f"background solve: {describe(exc)}", 0)
        with self._cond:
            if broken:
                self._executor = None  # a broken pool is not reused; the next request starts one
            self._finish(ticket, digest, solved)
        if self.on_ready is not None:
            self.on_ready()

    def _finish(self, ticket: int, digest: str, solved: Solved) -> None:
        """Record a result and start the queued request (the condition is held)."""
        if self._done is None or self._done.ticket < ticket:
            self._done = solved
        if solved.wall_ms:
            self.solves_ms.append(solved.wall_ms)
        if solved.plan is None:
            self.failures, self.last_error = self.failures + 1, solved.error
        else:
            self.failures = 0
        self._in_flight = None
        pending, self._pending = self._pending, None
        if pending is not None:
            self._start(*pending)
        self._cond.notify_all()
