"""The budget owner: one wall-clock Deadline per planning command and every calibrated figure.

`grid plan --time-limit S` promises the whole process (docs/plan-time-limit.md): the CLI starts
its `Deadline` at the process start and the planner's phases (pipeline.py, in the order of
its PHASES list) spend from it. A phase's cost estimate comes from the one calibration table
below (`CALIBRATION`); a flexible phase (host types, vacate, solve) gets what the limit leaves
after the estimates of the phases after it (`Deadline.remaining` less `later_s`), so no phase
holds or releases a share of another's. Pure: the clock is passed in; the default is the
monotonic `time.perf_counter`, never the calendar.

Where each figure was measured: two shared cores, the fleets of docs/planner-scale.md
(generated mixed and production fleets of 64-10,000 hosts; office and fleet-64 examples).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]
SHORTENED_NOTE = "explanation shortened: the time limit was reached"
SUMMARISED_NOTE = "explanation summarised from a sample of hosts: the time limit was reached"


@dataclass(frozen=True)
class Calibration:
    """Every calibrated figure of the planner's budget, in seconds (or shares of a budget)."""

    # -- the phases before the solve (estimates only: both always run) -----------------------
    # Problem build per (model, host) pair: 0.9 s for 4,278 x 300, 1.9 s for 10,000 x 500.
    build_s_per_pair: float = 5e-7
    # Greedy placement per candidate: 1.6 s at 1.0 M (trace 4,278), 2.1 s at 3.65 M.
    heuristic_s_per_candidate: float = 1.5e-6
    # -- staging and shortened explanations after the solve (`stage_s`) ----------------------
    # 0.14-0.18 s on mixed 1,000 x 200 (79,000-80,000 distinct candidates, staged twice),
    # 0.2 s on production 1,000 x 200 (853 distinct, 151,620 candidates), 0.61 s on production
    # 10,000 x 500 (2,107 distinct, 1.9 s build); office and 64-host fleets 10-30 ms. Distinct
    # candidates (one host's per build shape) up to reserve_candidates_max, plus 60 us per
    # host up to reserve_hosts_max, or 0.45x the build just measured (a loaded machine slows
    # both alike: load 7 on two cores doubles them).
    reserve_base_s: float = 0.12
    reserve_per_candidate_s: float = 5e-7
    reserve_candidates_max: int = 300_000
    reserve_per_host_s: float = 6e-5
    reserve_hosts_max: int = 20_000
    reserve_build_share: float = 0.45
    # -- full explanations (`explain_s`, `explanation_margin_s`) -----------------------------
    # Their CP-SAT cores: 0.02 s + 0.1 ms per candidate, at most 0.3 s and 5 % of the limit
    # (full explanations on mixed 1,000: 0.5-0.6 s, 0.02 s shortened). A full explanation needs
    # 0.1 s + 4 us per candidate left (refusal scans, then validation and output).
    explanation_cores_s: float = 0.3
    explanation_cores_base_s: float = 0.02
    explanation_cores_per_candidate_s: float = 1e-4
    explanation_cores_limit_share: float = 0.05
    full_explanation_s: float = 0.1
    after_explain_per_candidate_s: float = 4e-6
    # -- bounded staging and summarised explanations (`after_stage_s`) -----------------------
    # Staging stops once the deadline leaves only the later phases' floor: summarised
    # explanations (0.02 s + 0.2 ms per model, stretched by the pace: trace 4,278 x 300
    # shortened 0.12-0.26 s at load 6-17), the portfolio's share and the output. Explanations
    # are summarised (the first explain_summary_hosts open hosts of the model, in candidate
    # order, and the ledger) once that floor is reached, or once shortened entries have
    # scanned explain_scan_max candidates (each scan asks the ledger about every open host).
    explain_summary_base_s: float = 0.02
    explain_summary_per_model_s: float = 2e-4
    explain_summary_hosts: int = 16
    explain_scan_max: int = 200_000
    # The wall cap of an explanation's core solve, which its deterministic budget ends first
    # (explain.py keeps its figure of wall seconds per unit of deterministic work).
    core_wall_safety_s: float = 2.0
    # The cores' deterministic work (explain.py): per model at most 0.1 (roughly a third of a
    # second), 0.3 for the whole plan so explanations never dominate planning, 7 wall s per
    # unit of work (0.1: ~0.33 s idle, x2 busy); below 0.005 the ledger explains instead.
    core_work_per_model: float = 0.1
    core_work_total: float = 0.3
    core_wall_per_work_s: float = 7.0
    core_work_min: float = 0.005
    # -- validation, the JSON document and the exit (`output_s`) ------------------------------
    # 10,000 production hosts: validation 0.09 s, JSON 0.1 s, exit 0.06 s; office ~20 ms. The
    # CLI's Rich view adds 0.1 ms per host (0.85 s at 10,000), 0.4 ms with --all-hosts.
    output_base_s: float = 0.05
    output_per_host_s: float = 3e-5
    # Freeing the problem after the output (the process then exits normally): 0.11 s CPU for
    # the 1.0 M candidates of trace 4,278 x 300.
    exit_per_candidate_s: float = 1.2e-7
    # -- the machine's pace (`Deadline.pace`) -------------------------------------------------
    # Wall over CPU seconds of this process so far: a shared machine stretches every fixed
    # estimate alike (load 7 on two cores: 2-3x). Read once elapsed passes pace_min_s, capped.
    pace_min_s: float = 0.2
    pace_max: float = 4.0
    rich_per_host_s: float = 1e-4
    rich_all_hosts_per_host_s: float = 4e-4
    # -- the workload portfolio (`portfolio_s`) ---------------------------------------------
    # Setup (its context, coordinate search, staging, rows): 0.115 s at 12,223 keys, 1.2 s at
    # 151,620 (10 us per key leaves margin); its CP-SAT: the host-type model proves 256 x 60
    # in 0.25 s and 1,000 x 200 in 2-4 s; finish 0.02 s at 1,000 hosts.
    portfolio_finish_s: float = 0.1
    portfolio_setup_base_s: float = 0.05
    portfolio_setup_per_key_s: float = 1e-5
    portfolio_solve_per_key_s: float = 3e-5
    portfolio_solve_limit_share: float = 0.25
    portfolio_limit_share: float = 0.5
    # Below this the portfolio's coordinate search decides alone (portfolio/attach.py).
    portfolio_min_cpsat_s: float = 0.05
    # The per-host portfolio model after an unpacked typed solution costs ~18 us per variable
    # key to build (12.4 us at 256 production hosts, 12,000 keys; 17.8 us at 1,000, 152,000
    # keys, 2.7 s) and runs only while this many builds' time is left (portfolio/solve.py).
    portfolio_build_s_per_key: float = 18e-6
    portfolio_fallback_builds: int = 2
    # -- the solve and the phases that share its budget --------------------------------------
    min_solve_s: float = 0.05  # below this a solve cannot improve on the heuristic's hint
    # Setups that do not shrink with their budget, as shares of the problem build just
    # measured: the solver's (scorer, static bounds, hints, final check; 0.5-0.6 s after a 2 s
    # build at 10,000 production hosts, 0.07 s after 0.07 s at 1,000) and the host-type
    # model's build and bounds (0.6 s after 2 s, 0.05 s after 0.07 s).
    solve_setup_share: float = 0.3
    aggregate_setup_share: float = 0.35
    aggregate_share: float = 0.6  # of the solve budget, for the host-type model
    aggregate_wide_share: float = 0.9  # ... when the per-host model could not be built after it
    early_types_max_hosts: int = 2000  # up to this many hosts the host-type model runs first
    vacate_share: float = 0.5  # of the solve budget, at most, for vacate moves
    vacate_min_s: float = 0.5  # ... but never less than this (1,000 mixed: 0.15 s)
    vacate_trial_s: float = 0.1  # one trial may overrun (10,000 hosts: <= 0.09 s)
    # A CP-SAT model costs ~4x the problem build per candidate (25-40 us against ~10 us idle);
    # at least 40 us per candidate; a model may take half of what is left to build.
    model_to_problem_build: float = 4.0
    model_build_s_per_key: float = 40e-6
    model_build_share: float = 0.5
    min_stage_s: float = 0.05
    # Without a caller's reserve, a solve keeps min(0.75 s, 20 %) for staging and explanations.
    assembly_reserve_s: float = 0.75
    assembly_reserve_share: float = 0.2
    # The exclusive-host bound (cpsat/exclusive.py): ~12 ms per stage on mixed 1,000.
    exclusive_min_s: float = 0.02
    exclusive_max_s: float = 0.2
    # Neighbourhood solves (cpsat/neighbourhood.py): one at most 0.5 s, so several get a turn;
    # one neighbourhood's build at most half of its stage's time left.
    neighbourhood_max_s: float = 0.5
    neighbourhood_min_s: float = 0.02
    neighbourhood_build_share: float = 0.5
    # -- the host-type model (cpsat/aggregate.py) --------------------------------------------
    # Its three disaggregations per open replica: 142 us at 1,000 production hosts, 173 us at
    # 10,000 (a stage solved late then overran by ~1.2 s at 60 us).
    disaggregate_s_per_replica: float = 180e-6
    first_stage_s: float = 1.0  # the first stage pays the LP's warm-up
    window_share: float = 0.5  # of what is left, at most, for one window of stages
    fallback_builds: int = 3  # the stage-by-stage pass runs while this many builds' time is left


CALIBRATION = Calibration()
# Read by grid/planner/portfolio/attach.py (the portfolio keeps it from its CP-SAT budget).
PORTFOLIO_FINISH_S = CALIBRATION.portfolio_finish_s


@dataclass
class Deadline:
    limit_s: float
    clock: Clock = time.perf_counter
    started: float | None = None
    # The process's CPU clock and its reading at `started` (`pace`); the CLI passes 0.0 when
    # the deadline counts from the process start.
    cpu_clock: Clock = time.process_time
    cpu_started: float | None = None
    spent: dict[str, float] = field(default_factory=dict)  # seconds per finished phase
    # What the caller frees after its output: make_plan leaves its problems here, so
    # freeing a large problem comes after the plan is printed, not before.
    keep: list[object] = field(default_factory=list)
    # The caller's work after make_plan when it knows it better than `output_reserve_s` (the
    # JSON document's): the CLI's Rich view costs more (plan_cmd.py).
    output_s: float | None = None
    # Kept from `remaining` until `release` (a caller's own hold; the pipeline holds nothing:
    # its phases subtract the later phases' estimates instead).
    held_s: float = 0.0
    calibration: Calibration = CALIBRATION

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()
        if self.cpu_started is None:
            self.cpu_started = self.cpu_clock()

    @property
    def start(self) -> float:
        assert self.started is not None
        return self.started

    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return self.limit_s - self.held_s - self.elapsed()

    def hold(self, seconds: float) -> None:
        self.held_s = max(0.0, seconds)

    def release(self) -> None:
        self.held_s = 0.0

    def expired(self, margin_s: float = 0.0) -> bool:
        return self.remaining() <= margin_s

    def pace(self) -> float:
        """Wall seconds per CPU second of this process since the start, in [1, pace_max]
        (1 before pace_min_s): how much a fixed estimate stretches on this machine now. Read
        before the solve, whose worker threads add CPU faster than the wall clock."""
        c = self.calibration
        wall = self.elapsed()
        assert self.cpu_started is not None
        cpu = self.cpu_clock() - self.cpu_started
        if wall < c.pace_min_s or cpu <= 0:
            return 1.0
        return min(c.pace_max, max(1.0, wall / cpu))

    def mark(self, phase: str, since: float) -> float:
        """Record a finished phase that began at clock time `since`; return the clock now."""
        now = self.clock()
        self.spent[phase] = self.spent.get(phase, 0.0) + (now - since)
        return now


# -- estimates of the phases after the solve (pipeline.py sums them) ------------------------


def stage_s(candidates: int, build_s: float = 0.0, hosts: int = 0, pace: float = 1.0) -> float:
    """Preemption staging and shortened explanations, for a problem of this size: the fixed
    figures stretched by the machine's `pace`, or a share of the build just measured."""
    c = CALIBRATION
    fixed = (
        c.reserve_base_s
        + c.reserve_per_candidate_s * min(candidates, c.reserve_candidates_max)
        + c.reserve_per_host_s * min(hosts, c.reserve_hosts_max)
    )
    return max(pace * fixed, c.reserve_build_share * build_s)


def explain_s(candidates: int, limit_s: float | None = None) -> float:
    """The explanations' CP-SAT cores (at most their share of the limit, where given)."""
    cores = explanation_cores_s(candidates)
    if limit_s is not None:
        cores = min(cores, CALIBRATION.explanation_cores_limit_share * limit_s)
    return cores


def summary_s(models: int, pace: float = 1.0) -> float:
    """Summarised explanations for this many models, at this pace (`after_stage_s`)."""
    c = CALIBRATION
    return pace * (c.explain_summary_base_s + c.explain_summary_per_model_s * models)


def post_solve_reserve_s(
    candidates: int,
    build_s: float = 0.0,
    hosts: int = 0,
    output_s: float | None = None,
    limit_s: float | None = None,
) -> float:
    """What the phases after the solve need: staging and shortened explanations (`stage_s`),
    the explanations' cores (`explain_s`) and the caller's validation and output (`output_s`,
    else `output_reserve_s`)."""
    after = output_s if output_s is not None else output_reserve_s(hosts)
    return stage_s(candidates, build_s, hosts) + explain_s(candidates, limit_s) + after


def portfolio_share_s(limit_s: float, keys: int, solve_cap_s: float) -> float:
    """The workload portfolio's estimate: its setup for `keys` candidate keys and its finish,
    plus its CP-SAT (at most `solve_cap_s`, the policy's budget, and a quarter of the limit),
    the whole at most half of `limit_s`."""
    c = CALIBRATION
    setup = c.portfolio_finish_s + c.portfolio_setup_base_s + c.portfolio_setup_per_key_s * keys
    solve = min(
        solve_cap_s, c.portfolio_solve_per_key_s * keys, c.portfolio_solve_limit_share * limit_s
    )
    return min(c.portfolio_limit_share * limit_s, setup + solve)


def explanation_cores_s(candidates: int) -> float:
    """The reserve's share for the explanations' CP-SAT cores, for this many candidates."""
    c = CALIBRATION
    return min(
        c.explanation_cores_s,
        c.explanation_cores_base_s + c.explanation_cores_per_candidate_s * candidates,
    )


def output_reserve_s(hosts: int) -> float:
    """The CLI's validation, JSON output and exit after the plan, for `hosts` hosts."""
    return CALIBRATION.output_base_s + CALIBRATION.output_per_host_s * hosts


def rich_output_s(hosts: int, all_hosts: bool) -> float:
    """The Rich view's layout on top of `output_reserve_s` (plan_cmd.py)."""
    c = CALIBRATION
    return (c.rich_all_hosts_per_host_s if all_hosts else c.rich_per_host_s) * hosts


def model_build_s_per_key(candidates: int, build_s: float) -> float:
    """The expected CP-SAT model-build cost per candidate on this machine, right now."""
    return CALIBRATION.model_to_problem_build * build_s / max(1, candidates)


def explanation_margin_s(candidates: int) -> float:
    """Explanations are full only while more than this is left of the deadline."""
    c = CALIBRATION
    counted = min(candidates, c.reserve_candidates_max)
    return c.full_explanation_s + c.after_explain_per_candidate_s * counted
