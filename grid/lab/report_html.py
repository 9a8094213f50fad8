"""Scenario reports as pictures: one self-contained HTML file (inline SVG and CSS, no script,
nothing fetched), for `grid test scenario --html OUT.html` and `grid test graduate --html`.

- served and demand per workload over the day (offered units per minute, one small chart each);
- residencies per machine as a timeline (a row per machine, a bar per READY model);
- the strategy comparison: the same seed and trace under every strategy, summary figures and
  the fraction of demand served per minute;
- the graduate matrix as a table, every failed gate marked.
Presentation only: it reads what the runs recorded and decides nothing.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grid.api.ui import scenario_report_path
from grid.fleet import atomic_write_text
from grid.lab.scenario import RunResult

WIDTH, HEIGHT, PAD = 640, 150, 44
STRATEGY_COLORS = {
    "smart": "#2563eb",
    "reactive": "#f59e0b",
    "greedy": "#16a34a",
    "static": "#9ca3af",
}
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; color: #1d2430; margin: 24px; max-width: 1100px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border-bottom: 1px solid #d9dee7; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.fail { background: #fee2e2; color: #991b1b; font-weight: 600; }
.pass { color: #065f46; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; } figcaption { font-size: 12px; color: #6b7280; }
svg text { font: 10px system-ui, sans-serif; fill: #6b7280; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
"""


def _color(name: str) -> str:
    """A stable colour per model name."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"hsl({digest[0] * 360 // 256}, 60%, {40 + digest[1] % 20}%)"


def _esc(value: object) -> str:
    return html.escape(str(value))


def _axes(minutes: int, top: float, width: int = WIDTH, height: int = HEIGHT) -> str:
    x0, y0, x1 = PAD, height - 18, width - 6
    ticks = []
    step = max(1, round(minutes / 6 / 10) * 10) if minutes > 12 else max(1, minutes // 4)
    for m in range(0, minutes + 1, step):
        x = x0 + (x1 - x0) * m / max(1, minutes)
        ticks.append(f'<text x="{x:.1f}" y="{height - 4}" text-anchor="middle">{m}</text>')
    return (
        f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#9ca3af"/>'
        f'<line x1="{x0}" y1="8" x2="{x0}" y2="{y0}" stroke="#9ca3af"/>'
        f'<text x="{x0 - 4}" y="14" text-anchor="end">{top:.3g}</text>'
        f'<text x="{x0 - 4}" y="{y0}" text-anchor="end">0</text>' + "".join(ticks)
    )


def _points(series: Sequence[float], top: float, width: int = WIDTH, height: int = HEIGHT) -> str:
    x0, y0, x1, y1 = PAD, height - 18, width - 6, 8
    n = max(1, len(series) - 1)
    return " ".join(
        f"{x0 + (x1 - x0) * i / n:.1f},{y0 - (y0 - y1) * (v / top if top else 0):.1f}"
        for i, v in enumerate(series)
    )


def line_chart(series: dict[str, tuple[Sequence[float], str]], *, fill: str = "") -> str:
    """An SVG line chart: name -> (values per minute, colour); `fill` names a series drawn as an
    area under its line (the demand)."""
    minutes = max((len(v) for v, _c in series.values()), default=1)
    top = max((max(v, default=0.0) for v, _c in series.values()), default=0.0) or 1.0
    parts = [_axes(minutes, top)]
    for name, (values, color) in series.items():
        pts = _points(values, top)
        if name == fill and values:
            base = f"{PAD},{HEIGHT - 18}"
            end = f"{WIDTH - 6},{HEIGHT - 18}"
            parts.append(f'<polygon points="{base} {pts} {end}" fill="{color}" opacity="0.25"/>')
        parts.append(
            f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5">'
            f"<title>{_esc(name)}</title></polyline>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img">{"".join(parts)}</svg>'
    )


def _legend(items: dict[str, str]) -> str:
    spans = "".join(
        f'<span><i style="background:{c}"></i>{_esc(n)}</span>' for n, c in items.items()
    )
    return f'<p class="legend">{spans}</p>'


def workload_charts(run: RunResult) -> str:
    m = run.metrics
    figures = []
    for word in sorted(m.word_demand):
        demand = m.word_demand[word]
        served = m.word_served.get(word, [0.0] * len(demand))
        chart = line_chart(
            {"demand": (demand, "#9ca3af"), "served": (served, "#2563eb")}, fill="demand"
        )
        total_d, total_s = sum(demand), sum(served)
        share = total_s / total_d if total_d else 1.0
        figures.append(
            f'<figure data-workload="{_esc(word)}">{chart}<figcaption>{_esc(word)}: '
            f"served {share:.1%} of {total_d:.1f} units</figcaption></figure>"
        )
    legend = _legend({"demand (offered units per minute)": "#9ca3af", "served": "#2563eb"})
    return legend + f'<div class="charts">{"".join(figures)}</div>'


def residency_timeline(run: RunResult) -> str:
    """One row per machine and model that was READY there; a bar per stretch of minutes."""
    serving = run.metrics.serving
    minutes = max(1, len(serving))
    order = {mach.host_id: i for i, mach in enumerate(run.world.machines)}
    pairs = sorted({p for minute in serving for p in minute}, key=lambda p: (order.get(p[0], 0), p))
    row_h, label_w = 16, 170
    width = WIDTH + label_w
    height = row_h * len(pairs) + 24
    scale = (width - label_w - 6) / minutes
    bars: list[str] = []
    models: dict[str, str] = {}
    for row, (host, mdl) in enumerate(pairs):
        y = 4 + row * row_h
        color = models.setdefault(mdl, _color(mdl))
        bars.append(
            f'<text x="{label_w - 6}" y="{y + 11}" text-anchor="end">'
            f"{_esc(host)} · {_esc(mdl)}</text>"
        )
        begin: int | None = None
        for t in range(minutes + 1):
            live = t < minutes and (host, mdl) in serving[t]
            if live and begin is None:
                begin = t
            elif not live and begin is not None:
                bars.append(
                    f'<rect x="{label_w + begin * scale:.1f}" y="{y + 1}" '
                    f'width="{(t - begin) * scale:.1f}" height="{row_h - 3}" fill="{color}" '
                    f'data-host="{_esc(host)}" data-model="{_esc(mdl)}" data-from="{begin}" '
                    f'data-to="{t}"><title>{_esc(mdl)} on {_esc(host)}, minutes {begin}–{t}'
                    "</title></rect>"
                )
                begin = None
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">'
        f"{''.join(bars)}</svg>"
    )
    return _legend(dict(sorted(models.items()))) + svg


def strategy_table(docs: dict[str, dict[str, Any]], runs: dict[str, RunResult]) -> str:
    keys = ("served_fraction", "least_workload_service", "slo_attainment", "score", "loads",
            "unloads", "cold_starts", "churn", "safety_violations")  # fmt: skip
    head = "".join(f"<th>{_esc(k)}</th>" for k in keys)
    rows = []
    for name, doc in docs.items():
        s = doc["summary"]
        cells = "".join(
            f"<td>{s[k]:.1%}</td>"
            if isinstance(s[k], float) and k != "score"
            else f"<td>{s[k]}</td>"
            for k in keys
        )
        rows.append(f'<tr data-strategy="{_esc(name)}"><td>{_esc(name)}</td>{cells}</tr>')
    series = {}
    for name, run in runs.items():
        demand = [
            sum(v[t] for v in run.metrics.word_demand.values()) for t in range(run.metrics.minutes)
        ]
        served = run.metrics.served_by_minute
        frac = [served[t] / demand[t] if demand[t] else 1.0 for t in range(len(served))]
        series[name] = (frac, STRATEGY_COLORS.get(name, _color(name)))
    chart = line_chart(series)
    legend = _legend({n: c for n, (_v, c) in series.items()})
    return (
        f"<table><thead><tr><th>strategy</th>{head}</tr></thead><tbody>{''.join(rows)}"
        f"</tbody></table><p>Fraction of demand served per minute:</p>{legend}{chart}"
    )


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{_esc(title)}</h1>{body}</body></html>\n"
    )


def scenario_html(primary: str, docs: dict[str, dict[str, Any]], runs: dict[str, RunResult]) -> str:
    """The report of one scenario: `primary` is the strategy asked for, `docs` and `runs` hold
    every strategy of the comparison (the primary among them)."""
    doc, run = docs[primary], runs[primary]
    s = doc["summary"]
    title = (
        f"Scenario {primary}: {doc['machines']} machines, {doc['models']} models, "
        f"{doc['users']} users, {doc['duration_s'] // 60} min, seed {doc['seed']}"
    )
    recs = "".join(
        f"<li><b>{_esc(r['code'])}</b>: {_esc(r['message'])}</li>"
        for r in doc.get("capacity_recommendations", [])
    )
    body = (
        f"<p>Served {s['served_fraction']:.1%}, least workload {s['least_workload_service']:.1%}, "
        f"SLO {s['slo_attainment']:.1%}, score {s['score']:.1f}, safety violations "
        f"{s['safety_violations']}.</p>"
        f"<h2>Served and demand per workload</h2>{workload_charts(run)}"
        f"<h2>Residencies per machine (READY)</h2>{residency_timeline(run)}"
        f"<h2>Strategy comparison (same seed and trace)</h2>{strategy_table(docs, runs)}"
        + (f"<h2>Capacity recommendations</h2><ul>{recs}</ul>" if recs else "")
    )
    return _page(title, body)


def graduate_html(result: dict[str, Any]) -> str:
    """The graduate matrix (served / score / churn per strategy and cell) and its gates, every
    failed gate marked."""
    strategies = list(result["cells"][0]["strategies"]) if result["cells"] else []
    head = "".join(f"<th>{_esc(n)}</th>" for n in strategies)
    rows = []
    for c in result["cells"]:
        cells = "".join(
            f"<td>{v['served_fraction']:.1%} / {v['score']:.1f} / {v['churn']}</td>"
            for v in (c["strategies"][n] for n in strategies)
        )
        rows.append(f"<tr><td>{c['machines']} machines, seed {c['seed']}</td>{cells}</tr>")
    gates = []
    for g in result["gates"]:
        mark = '<td class="pass">pass</td>' if g["passed"] else '<td class="fail">FAIL</td>'
        cls = "" if g["passed"] else ' class="fail"'
        gates.append(
            f'<tr{cls} data-gate="{_esc(g["name"])}"><td>{_esc(g["name"])}</td>{mark}'
            f"<td>{_esc(g['value'])}</td><td>{_esc(g.get('comparison', ''))} "
            f"{_esc(g['threshold'])}</td></tr>"
        )
    failed = [g["name"] for g in result["gates"] if not g["passed"]]
    verdict = "graduated" if not failed else f"not graduated: {', '.join(failed)} failed"
    body = (
        f"<p><b>{_esc(verdict)}</b></p>"
        f"<h2>Matrix (served / score / churn)</h2><table><thead><tr><th>cell</th>{head}</tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
        "<h2>Gates</h2><table><thead><tr><th>gate</th><th></th><th>value</th>"
        f"<th>threshold</th></tr></thead><tbody>{''.join(gates)}</tbody></table>"
    )
    return _page("Graduate matrix", body)


def save_report(text: str, out: Path) -> Path:
    """Write the report to `out` and as the newest one GET /ui/scenario serves; returns that
    second path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text, 0o644)
    last = scenario_report_path()
    if last.resolve() != out.resolve():
        last.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(last, text, 0o644)
    return last
