"""`grid test demo`: the focused portfolio flow on a logical fleet with real llama.cpp.

1. A logical fleet starts with the baseline SmolLM2 (min_replicas 1) and the coding candidate
   gemma-3-270m (min_replicas 0, workload score coding=1) in every node's catalog.
2. SmolLM2 becomes READY and answers a named request.
3. Three users send genuine coding requests as `model: "auto"`; no ready model serves coding
   yet, so each gets an honest 503 that says what is being prepared.
4. Those requests are the evidence (3 observations): the allocator maps coding to the
   candidate and loads and warms it with no request naming it and no injected demand.
5. A named call to the candidate returns real output, and an `auto` coding request is now
   served by it.
The report lists every residency transition the controller saw and every command it issued.
The fleet is stopped at the end unless `--keep` is given.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from grid.cli.demo_personas import (
    PersonaRound,
    answer_problem,
    chat,
    genuine,
    persona_round,
    text_of,
)
from grid.fleet import CONSTRUCTIVE_KINDS, GridError
from grid.lab import (
    DEFAULT_ENGINE_PORT_BASE,
    CandidateModel,
    FleetSettings,
    LogicalFleet,
    available_mb,
    capacity_shares,
    resolve_model,
)
from grid.node.artifacts import GEMMA3_270M_MODEL_ID, SMOLLM2_MODEL_ID

DEMO_PORT = 22180
CODING_REQUESTS = (
    ("user-1", "Write a Python function that returns the n-th Fibonacci number iteratively."),
    ("user-2", "Fix the bug in this JavaScript function: function add(a, b) { return a - b; }"),
    ("user-3", "Write a SQL query that selects the ten newest rows from the orders table."),
)
NAMED_PROMPT = "Write a Python function that adds two numbers."
STEPS = (
    "baseline_ready_and_answering",
    "auto_coding_requests_get_honest_503s",
    "allocator_loads_the_coding_candidate",
    "named_call_returns_real_output",
    "auto_coding_request_is_served_by_the_candidate",
    "personas_served_by_both_models",
)


@dataclass
class Transition:
    at_s: float  # seconds since the demo started
    host_id: str
    model_id: str
    before: str | None  # None: the row appeared
    after: str | None  # None: the row went away

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def line(self) -> str:
        return (
            f"{self.at_s:7.1f}s  {self.host_id}/{self.model_id}: "
            f"{self.before or '(none)'} -> {self.after or '(gone)'}"
        )


@dataclass
class Watcher:
    """Polls the controller status and records residency transitions and command records."""

    fleet: LogicalFleet
    started: float
    interval_s: float = 0.25
    transitions: list[Transition] = field(default_factory=list)
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)
    last: dict[str, Any] | None = None
    _states: dict[tuple[str, str], str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()

    def poll(self) -> None:
        doc = self.fleet.controller_status()
        if doc is None:
            return
        self.last = doc
        at = round(time.monotonic() - self.started, 2)
        now: dict[tuple[str, str], str] = {
            (h["host_id"], r["model_id"]): r["state"]
            for h in doc.get("hosts", [])
            for r in h.get("residencies", [])
        }
        for key in sorted(set(now) | set(self._states)):
            before, after = self._states.get(key), now.get(key)
            if before != after:
                self.transitions.append(Transition(at, key[0], key[1], before, after))
        self._states = now
        for record in doc.get("history", []):
            self.commands[record["action_id"]] = {
                "kind": record["kind"],
                "model_id": record["model_id"],
                "host_id": record["host_id"],
                "status": record["status"],
                "reason": record.get("reason", ""),
            }

    def ready_hosts(self, model_id: str) -> list[str]:
        return sorted(h for (h, m), s in self._states.items() if m == model_id and s == "ready")


def _step(name: str, ok: bool, **facts: Any) -> dict[str, Any]:
    return {"step": name, "ok": ok, **facts}


def _wait(check: Any, timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval_s)
    return bool(check())


def demo_settings(machines: int, run_dir: Path, port: int, engine_port_base: int) -> FleetSettings:
    weights = run_dir / "weights"
    baseline = resolve_model(SMOLLM2_MODEL_ID, weights)
    coder = resolve_model(GEMMA3_270M_MODEL_ID, weights)
    candidate = CandidateModel(**coder.model_dump(), workload_scores={"coding": 1.0})
    biggest = max(baseline.memory_mb, coder.memory_mb)
    return FleetSettings(
        machines=machines,
        model=baseline,
        capacities_mb=capacity_shares(machines, None, biggest, available_mb()),
        port=port,
        engine_port_base=engine_port_base,
        heartbeat_s=0.5,
        min_replicas=1,
        max_replicas=1,
        candidates=[candidate],
    )


@dataclass
class _Run:
    """What the demo's steps share: the fleet's URL, the two models and the watcher."""

    watcher: Watcher
    timeout_s: float
    started: float
    personas: PersonaRound
    baseline: str
    coder: str
    url: str = ""


def _baseline_answers(run: _Run, ready: list[str]) -> dict[str, Any]:
    reply = chat(run.url, run.baseline, "Say hello in five words.") if ready else None
    problem = answer_problem(text_of(reply)) if reply is not None else "no answer"
    return _step(
        "baseline_ready_and_answering",
        reply is not None and reply.status_code == 200 and not problem,
        model_id=run.baseline,
        ready_hosts=ready,
        status=reply.status_code if reply is not None else None,
        text=text_of(reply) if reply is not None else "",
        problem=problem,
    )


def _auto_gets_honest_503s(run: _Run) -> dict[str, Any]:
    replies: list[dict[str, Any]] = []
    for user, prompt in CODING_REQUESTS:
        got = chat(run.url, "auto", prompt, user)
        json_body = got.headers.get("content-type", "").startswith("application/json")
        body = got.json() if json_body else {}
        replies.append(
            {
                "user": user,
                "status": got.status_code,
                "code": (body.get("error") or {}).get("code"),
                "preparing": body.get("preparing"),
            }
        )
    honest = all(
        r["status"] == 503
        and r["code"] == "workload_preparing"
        and (r["preparing"] or {}).get("workload") == "coding"
        for r in replies
    )
    return _step("auto_coding_requests_get_honest_503s", honest, replies=replies)


def _allocator_loads_the_candidate(run: _Run) -> dict[str, Any]:
    watcher, coder = run.watcher, run.coder
    loaded = _wait(lambda: bool(watcher.ready_hosts(coder)), run.timeout_s)
    # The allocator's own commands for it (load, or warm where the weights are on disk).
    issued = [
        r
        for r in watcher.commands.values()
        if r["model_id"] == coder and r["kind"] in CONSTRUCTIVE_KINDS
    ]
    return _step(
        "allocator_loads_the_coding_candidate",
        loaded and bool(issued),
        model_id=coder,
        ready_hosts=watcher.ready_hosts(coder),
        commands=issued,
        after_s=round(time.monotonic() - run.started, 1),
    )


def _named_call_answers(run: _Run) -> dict[str, Any]:
    named = chat(run.url, run.coder, NAMED_PROMPT)
    problem = answer_problem(text_of(named))
    return _step(
        "named_call_returns_real_output",
        named.status_code == 200 and not problem,
        model_id=run.coder,
        status=named.status_code,
        text=text_of(named),
        problem=problem,
    )


def _auto_served_by_the_candidate(run: _Run) -> dict[str, Any]:
    again = chat(run.url, "auto", CODING_REQUESTS[0][1], CODING_REQUESTS[0][0])
    return _step(
        "auto_coding_request_is_served_by_the_candidate",
        again.status_code == 200
        and again.headers.get("X-Grid-Model") == run.coder
        and not answer_problem(text_of(again)),
        status=again.status_code,
        served_model=again.headers.get("X-Grid-Model"),
        text=text_of(again),
    )


def _personas_served(run: _Run) -> dict[str, Any]:
    rows = persona_round(run.url, [run.baseline, run.coder], run.personas)
    samples = _performance_samples(run.watcher, {run.baseline, run.coder})
    return _step(
        "personas_served_by_both_models",
        all(genuine(r) for r in rows) and set(samples) == {run.baseline, run.coder},
        requests=rows,
        performance_samples=samples,
    )


# After the baseline: each step, and when the demo stops after it (a named call that fails
# still lets the `auto` step show whether routing works; a candidate that became READY without
# a command of its own still lets the calls run).
_LATER_STEPS: tuple[
    tuple[Callable[[_Run], dict[str, Any]], Callable[[dict[str, Any]], bool]], ...
] = (
    (_auto_gets_honest_503s, lambda step: not step["ok"]),
    (_allocator_loads_the_candidate, lambda step: not step["ready_hosts"]),
    (_named_call_answers, lambda step: False),
    (_auto_served_by_the_candidate, lambda step: not step["ok"]),
    (_personas_served, lambda step: not step["ok"]),
)


def run_demo(
    fleet: LogicalFleet,
    settings: FleetSettings,
    timeout_s: float,
    personas: PersonaRound | None = None,
) -> dict[str, Any]:
    """The demo's steps, in order; stops at the first failed one that the next ones need."""
    started = time.monotonic()
    run = _Run(
        watcher=Watcher(fleet, started),
        timeout_s=timeout_s,
        started=started,
        personas=personas or PersonaRound(),
        baseline=settings.model.model_id,
        coder=settings.candidates[0].model_id,
    )
    run.watcher.start()
    try:
        report = fleet.start(settings, wait_ready_s=timeout_s)
        run.url = report.url
        steps = [_baseline_answers(run, report.ready_hosts)]
        for step, stops_after in _LATER_STEPS if steps[0]["ok"] else ():
            steps.append(step(run))
            if stops_after(steps[-1]):
                break
        return _report(steps, run.watcher, started)
    finally:
        run.watcher.stop()


def _performance_samples(watcher: Watcher, models: set[str]) -> dict[str, dict[str, float]]:
    """Per model, each host's measured token throughput in the planning snapshot (the proxy's
    measurements of the served revision), once every model has one (or after 10 s)."""

    def read() -> dict[str, dict[str, float]]:
        watcher.poll()
        out: dict[str, dict[str, float]] = {}
        for host in (watcher.last or {}).get("snapshots", []):
            for model_id, rate in (host.get("measured_tokens_per_s") or {}).items():
                if model_id in models:
                    out.setdefault(model_id, {})[host["host_id"]] = round(float(rate), 2)
        return out

    _wait(lambda: set(read()) == models, 10.0)
    return read()


def _report(steps: list[dict[str, Any]], watcher: Watcher, started: float) -> dict[str, Any]:
    watcher.poll()
    doc = watcher.last or {}
    portfolio = (doc.get("workloads") or {}).get("portfolio") or {}
    return {
        "ok": all(s["ok"] for s in steps) and len(steps) == len(STEPS),
        "seconds": round(time.monotonic() - started, 1),
        "steps": steps,
        "transitions": [t.to_dict() for t in watcher.transitions],
        "commands": sorted(watcher.commands.values(), key=lambda c: (c["model_id"], c["kind"])),
        "mapping": portfolio.get("mapping", {}),
        "outcomes": (doc.get("workloads") or {}).get("outcomes", []),
        "admission": portfolio.get("admission", []),
    }


def _print(report: dict[str, Any]) -> None:
    for step in report["steps"]:
        mark = "ok  " if step["ok"] else "FAIL"
        facts = {k: v for k, v in step.items() if k not in ("step", "ok", "requests")}
        typer.echo(f"[{mark}] {step['step']}: {json.dumps(facts)[:400]}")
        for row in step.get("requests", []):
            usage = row.get("usage") or {}
            typer.echo(
                f"       {row['user']} -> {row['model_id']}@{row['served_by']}: {row['status']} "
                f"in {row['latency_s']} s ({row['attempts']} attempt(s)), "
                f"{usage.get('completion_tokens', 0)} tokens, id {row['response_id']}"
            )
    typer.echo("Residency transitions:")
    for row in report["transitions"]:
        typer.echo("  " + Transition(**row).line())
    typer.echo("Commands:")
    for c in report["commands"]:
        typer.echo(f"  {c['kind']} {c['model_id']}@{c['host_id']}: {c['status']}")
    typer.echo(f"Portfolio mapping: {report['mapping']}")
    typer.echo(f"Demo {'passed' if report['ok'] else 'FAILED'} in {report['seconds']} s")


def _fresh(fleet: LogicalFleet) -> None:
    """A demo starts from no evidence: a stopped demo's controller and node folders go (the
    assembled weights stay)."""
    for part in ("controller", "nodes"):
        shutil.rmtree(fleet.run_dir / part, ignore_errors=True)
    (fleet.run_dir / "fleet.json").unlink(missing_ok=True)


def register(app: typer.Typer) -> None:
    """Add `demo` to the `grid test` sub-app."""
    app.command("demo")(demo)


def demo(
    machines: Annotated[
        int, typer.Option("--machines", min=1, max=8, help="Logical machines.")
    ] = 2,
    port: Annotated[int, typer.Option("--port", help="Controller port.")] = DEMO_PORT,
    engine_port_base: Annotated[
        int, typer.Option("--engine-port-base", help="First engine port of the first node.")
    ] = DEFAULT_ENGINE_PORT_BASE + 400,
    timeout_s: Annotated[
        float, typer.Option("--timeout-seconds", min=10, help="Wait this long for each READY.")
    ] = 150.0,
    users: Annotated[
        int, typer.Option("--users", min=1, max=16, help="Client personas in the last round.")
    ] = 3,
    requests: Annotated[
        int, typer.Option("--requests", min=1, max=64, help="Requests in the persona round.")
    ] = 6,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, max=512, help="max_tokens of every request.")
    ] = 24,
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the fleet running afterwards.")
    ] = False,
    run_dir: Annotated[
        Path | None, typer.Option("--run-dir", help="Run folder (default ~/.grid/demo).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Run the portfolio demo: auto coding requests make the allocator load a coding model.

    The run folder's controller and node state is replaced (the demo needs fresh evidence)."""
    folder = run_dir or Path.home() / ".grid" / "demo"
    fleet = LogicalFleet(folder)
    if fleet.settings() is not None and fleet.running():
        raise GridError(
            "demo_fleet_running",
            f"a logical fleet already runs in {fleet.run_dir}",
            fix="stop it first (the demo needs fresh evidence), or pass another --run-dir",
            next_command=f"grid test stop --run-dir {fleet.run_dir}",
        )
    _fresh(fleet)
    settings = demo_settings(machines, fleet.run_dir, port, engine_port_base)
    try:
        plan = PersonaRound(users=users, requests=requests, max_tokens=max_tokens)
        report = run_demo(fleet, settings, timeout_s, plan)
    finally:
        stopped = None if keep else fleet.stop(timeout_s=30)
    if stopped is not None:
        report["stopped"] = {"controller": stopped.controller, "leftover": stopped.leftover}
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        _print(report)
    if not report["ok"]:
        raise typer.Exit(1)
