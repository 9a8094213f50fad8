"""`grid test scenario` and `grid test graduate`: the deterministic scenario lab
(grid/lab/scenario, docs/scenario.md). Registered on the `test` sub-app."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from grid.fleet import GridError
from grid.lab.scenario import (
    DEFAULT_ORACLE_TIME_LIMIT_S,
    ORACLE,
    STRATEGIES,
    WORDS,
    ScenarioConfig,
    document,
    graduate,
    oracle_document,
    oracle_report,
    parse_option,
    read_trace,
    run_oracle,
    run_oracle_strategy,
    run_scenario,
)

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
NEXT = "grid test scenario --help"


def parse_duration(text: str) -> int:
    """'2h', '30m', '90s' or plain seconds -> whole minutes' seconds (at least one minute)."""
    found = DURATION.match(text.lower())
    if found is None:
        raise GridError(
            "invalid_duration",
            f"--duration {text!r} is not a duration",
            fix="pass e.g. 2h, 30m or 600s",
            path="--duration",
            next_command=NEXT,
        )
    value = float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[found.group(2)]
    seconds = int(value // 60) * 60
    if seconds < 60 or seconds > 24 * 3600:
        raise GridError(
            "invalid_duration",
            f"--duration {text!r} must be between one minute and 24 hours",
            fix="pass e.g. 30m or 2h",
            path="--duration",
            next_command=NEXT,
        )
    return seconds


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise GridError(
            "invalid_list",
            f"{option} {text!r} is not a comma-separated list of positive whole numbers",
            fix=f"pass e.g. {option} 2,4,8",
            path=option,
            next_command="grid test graduate --help",
        )
    return values


def _check_strategy(strategy: str) -> None:
    if strategy not in (*STRATEGIES, ORACLE):
        raise GridError(
            "unknown_strategy",
            f"strategy {strategy!r} is not one of {', '.join((*STRATEGIES, ORACLE))}",
            fix="pass --strategy smart, reactive, greedy, static or oracle",
            path="--strategy",
            next_command=NEXT,
        )


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, allow_nan=False)


_ScenarioMachines = Annotated[
    int, typer.Option("--machines", min=1, max=64, help="Logical machines.")
]
_ScenarioModels = Annotated[int, typer.Option("--models", min=1, max=40, help="Catalogue models.")]
_ScenarioUsers = Annotated[int, typer.Option("--users", min=1, max=5000, help="Simulated users.")]
_ScenarioDuration = Annotated[
    str, typer.Option("--duration", help="Virtual run length: 30m, 2h, 600s.")
]
_ScenarioSeed = Annotated[int, typer.Option("--seed", help="Seed of topology, users and arrivals.")]
_ScenarioStrategy = Annotated[
    str,
    typer.Option(
        "--strategy",
        help="smart | reactive | greedy | static | oracle (the oracle's schedule replayed).",
    ),
]
_ScenarioOracle = Annotated[
    bool, typer.Option("--oracle", help="Also solve the hindsight oracle on the run's trace.")
]
_ScenarioOracleTimeLimit = Annotated[
    float, typer.Option("--oracle-time-limit", min=0.1, help="Oracle budget in seconds.")
]
_ScenarioWorkloadTrace = Annotated[
    list[str] | None,
    typer.Option(
        "--workload-trace",
        help="WORKLOAD=CSV (headerless timestamp_seconds,request_rate); repeatable.",
    ),
]
_ScenarioTimeline = Annotated[bool, typer.Option("--timeline", help="Print every changing tick.")]
_ScenarioAsJson = Annotated[bool, typer.Option("--json", help="Print one stable JSON document.")]
_ScenarioHtmlOut = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Also write the report as pictures (served and demand per workload, residencies "
        "per machine, every strategy compared on the same seed) to this HTML file; the "
        "dashboard serves the newest one at /ui/scenario.",
    ),
]


def scenario_cmd(
    machines: _ScenarioMachines = 8,
    models: _ScenarioModels = 8,
    users: _ScenarioUsers = 50,
    duration: _ScenarioDuration = "30m",
    seed: _ScenarioSeed = 42,
    strategy: _ScenarioStrategy = "smart",
    oracle: _ScenarioOracle = False,
    oracle_time_limit: _ScenarioOracleTimeLimit = 30.0,
    workload_trace: _ScenarioWorkloadTrace = None,
    timeline: _ScenarioTimeline = False,
    as_json: _ScenarioAsJson = False,
    html_out: _ScenarioHtmlOut = None,
) -> None:
    """Run one seeded workday on logical machines with the production planner and reconciler."""
    _check_strategy(strategy)
    seconds = parse_duration(duration)
    traces: dict[str, list[tuple[float, float]]] = {}
    for option in workload_trace or []:
        word, path = parse_option(option, WORDS)
        traces[word] = read_trace(path)
    cfg = ScenarioConfig(
        machines=machines,
        models=models,
        users=users,
        duration_s=seconds,
        seed=seed,
        strategy=strategy,
        traces=traces,
    )
    started = time.perf_counter()
    if strategy == ORACLE:
        replayed = run_oracle_strategy(cfg, time_limit_s=oracle_time_limit)
        run = replayed.run
        doc = document(run, timeline=timeline)
        if oracle:
            doc["oracle"] = oracle_report(run, replayed.problem, replayed.result)
    else:
        run = run_scenario(cfg)
        doc = document(run, timeline=timeline)
        if oracle:
            doc["oracle"] = run_oracle(run, oracle_time_limit)
    doc["wall_s"] = round(time.perf_counter() - started, 3)
    note = _write_scenario_html(html_out, cfg, run, doc) if html_out is not None else ""
    if as_json:
        typer.echo(_dump(doc))
    else:
        _render(doc, timeline)
    if note:
        typer.echo(note, err=as_json)


def _write_scenario_html(out: Path, cfg: ScenarioConfig, run: Any, doc: dict[str, Any]) -> str:
    """The HTML report: the run asked for, and every other strategy on the same config."""
    from grid.lab import save_report, scenario_html

    runs, docs = {cfg.strategy: run}, {cfg.strategy: doc}
    for name in STRATEGIES:
        if name not in runs:
            runs[name] = run_scenario(replace(cfg, strategy=name))
            docs[name] = document(runs[name])
    last = save_report(scenario_html(cfg.strategy, docs, runs), out)
    return f"Wrote {out} (the dashboard serves the newest report at /ui/scenario: {last})"


def _render(doc: dict[str, Any], timeline: bool) -> None:
    console = Console(highlight=False)
    s = doc["summary"]
    console.print(
        f"scenario {doc['strategy']}: {doc['machines']} machines, {doc['models']} models, "
        f"{doc['users']} users, {doc['duration_s'] // 60} min, seed {doc['seed']}"
    )
    if timeline:
        for e in doc.get("timeline", []):
            parts = [f"t+{e['minute']:>3} {e['phase']:<17} served {e['served_fraction']:.0%}"]
            keys = ("events", "actions", "withdrawn", "evicted", "overloaded", "shortfalls")
            for key in (*keys, "violations"):
                if e[key]:
                    parts.append(f"{key}: {' '.join(e[key])}")
            if e["portfolio_changes"]:
                parts.append(
                    "portfolio: "
                    + " ".join(f"{w}->{m or '-'}" for w, m in e["portfolio_changes"].items())
                )
            console.print("  ".join(parts))
    table = Table(title="Workloads", box=box.SIMPLE_HEAD)
    for col in ("workload", "demand", "served", "SLO", "best model", "admission minutes"):
        table.add_column(col, justify="left" if col in ("workload", "best model") else "right")
    for word, w in doc["workloads"].items():
        adm = " ".join(f"{k}:{v}" for k, v in w["admission_minutes"].items())
        table.add_row(
            word,
            f"{w['demand']:.2f}",
            f"{w['served_fraction']:.1%}",
            f"{w['slo_attainment']:.1%}",
            w["best_model"] or "(none)",
            adm,
        )
    console.print(table)
    console.print(
        f"served {s['served_fraction']:.1%}  least workload {s['least_workload_service']:.1%}  "
        f"SLO {s['slo_attainment']:.1%}  suitability {s['suitability']:.2f}  "
        f"score {s['score']:.1f}"
    )
    console.print(
        f"loads {s['loads']}  unloads {s['unloads']}  cold starts {s['cold_starts']}  "
        f"startup {s['startup_s']:.0f} s  cache locality {s['cache_locality']:.0%}  "
        f"memory {s['memory_use_mean']:.0%} (peak {s['memory_use_peak']:.0%})  "
        f"disk peak {s['disk_used_mb_peak']} MB  safety violations {s['safety_violations']}"
    )
    p = doc["prefetch"]
    console.print(
        f"prefetch: {p['downloads']} downloads, {p['hits']} hits, {p['unused']} unused, "
        f"{p['expired']} expired, {p['replaced']} replaced ({p['reclaimed_mb']} MB reclaimed), "
        f"{p['avoided_load_s']:.0f} s of load avoided"
        + (f", mean lead {p['mean_lead_s']:.0f} s" if p["mean_lead_s"] is not None else "")
    )
    if doc["overloaded_model_minutes"]:
        console.print(
            "overloaded: "
            + ", ".join(f"{m} {n} min" for m, n in doc["overloaded_model_minutes"].items())
        )
    for rec in doc["capacity_recommendations"]:
        console.print(f"[yellow]recommendation[/] {rec['code']}: {rec['message']}")
    if "oracle" in doc:
        o = doc["oracle"]
        console.print(
            f"oracle {o['status']}: ceiling {o['service_ceiling']:.1%}, bound "
            f"{o['bound']:.2f}, potential gain {o['potential_gain']:.1%} (placement "
            f"{o['placement_gain']:.1%}, routing {o['routing_gain']:.1%}), gap {o['gap']:.2%}; "
            "the run's placements serve "
            f"{o['run_placements_served']:.2f} of the oracle's {o['served']:.2f} "
            f"({o['run_placement_changes']} changes); {o['winning_changes_total']} oracle "
            "residencies the run lacked"
        )
        for c in o["winning_changes"]:
            console.print(
                f"  {c['model_id']}@{c['host_id']} minutes {c['from_minute']}-{c['to_minute']}: "
                f"+{c['served_gain']:.2f} served"
            )
    console.print(f"wall {doc['wall_s']:.1f} s")


def graduate_cmd(
    machines: Annotated[
        str, typer.Option("--machines", help="Fleet sizes, comma-separated.")
    ] = "2,4,8",
    seeds: Annotated[str, typer.Option("--seeds", help="Seeds, comma-separated.")] = "42,144",
    duration: Annotated[str, typer.Option("--duration", help="Virtual run length.")] = "2h",
    models: Annotated[int, typer.Option("--models", min=1, max=40, help="Catalogue models.")] = 8,
    users: Annotated[int, typer.Option("--users", min=1, max=5000, help="Users per cell.")] = 50,
    oracle_time_limit: Annotated[
        float,
        typer.Option(
            "--oracle-time-limit", min=0.1, help="Oracle budget per largest-fleet cell (s)."
        ),
    ] = DEFAULT_ORACLE_TIME_LIMIT_S,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    html_out: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Also write the matrix and its gates (failed ones marked) as HTML."
        ),
    ] = None,
) -> None:
    """All four strategies on every (machines, seed) cell, then the graduation gates."""
    sizes, seed_list = _ints(machines, "--machines"), _ints(seeds, "--seeds")
    seconds = parse_duration(duration)
    started = time.perf_counter()
    result = graduate(
        sizes,
        seed_list,
        models=models,
        users=users,
        duration_s=seconds,
        oracle_time_limit_s=oracle_time_limit,
    )
    result["wall_s"] = round(time.perf_counter() - started, 3)
    if as_json:
        typer.echo(_dump(result))
    else:
        _render_graduate(result)
    if html_out is not None:
        from grid.lab import graduate_html, save_report

        last = save_report(graduate_html(result), html_out)
        typer.echo(f"Wrote {html_out} (also served at /ui/scenario: {last})", err=as_json)
    if not result["passed"]:
        raise typer.Exit(1)


def _render_graduate(result: dict[str, Any]) -> None:
    console = Console(highlight=False)
    cells = Table(title="Graduate matrix (served / score / churn / startup s)", box=box.SIMPLE_HEAD)
    cells.add_column("machines", justify="right")
    cells.add_column("seed", justify="right")
    for name in STRATEGIES:
        cells.add_column(name, justify="right")
    cells.add_column("oracle served", justify="right")
    for c in result["cells"]:
        row = [str(c["machines"]), str(c["seed"])]
        for name in STRATEGIES:
            v = c["strategies"][name]
            row.append(
                f"{v['served_fraction']:.1%} / {v['score']:.1f} / {v['churn']}"
                f" / {v['startup_s']:.0f}"
            )
        oracle = c.get("oracle")
        row.append(f"{oracle['served_fraction']:.1%}" if oracle else "")
        cells.add_row(*row)
    console.print(cells)
    gates = Table(title="Gates", box=box.SIMPLE_HEAD)
    for col in ("gate", "", "value", "threshold", "missed by"):
        gates.add_column(col, justify="left" if col in ("gate", "") else "right")
    for g in result["gates"]:
        gates.add_row(
            g["name"],
            "[green]pass[/]" if g["passed"] else "[red]FAIL[/]",
            str(g["value"]),
            f"{g['comparison']} {g['threshold']}",
            "" if g["passed"] else str(g["miss"]),
        )
    console.print(gates)
    failed = [g["name"] for g in result["gates"] if not g["passed"]]
    verdict = "graduated" if not failed else f"not graduated: {', '.join(failed)} failed"
    console.print(f"{verdict} (wall {result['wall_s']:.1f} s)")


def register(app: typer.Typer) -> None:
    app.command("scenario")(scenario_cmd)
    app.command("graduate")(graduate_cmd)


__all__ = ["graduate_cmd", "oracle_document", "parse_duration", "register", "scenario_cmd"]
