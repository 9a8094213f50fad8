"""One wall-clock budget for a whole planning command, spent phase by phase (pure: the clock
is passed in; the default is the monotonic `time.perf_counter`, never the wall calendar).

`grid plan --time-limit S` promises the whole process: the CLI starts its `Deadline` at the
process start (the interpreter start and the imports count) and passes it through load →
problem build → heuristic → CP-SAT → preemption staging → explanations → the CLI's validation
and output. Each phase asks how much is left:

    solve         gets what remains after `post_solve_reserve_s` (staging, the cheap
                  explanations, freeing the problem, the CLI's validation and output, scaled
                  with the candidate and host counts)
    explanations  a full one (CP-SAT core, refusal scans) while more than
                  `explanation_margin_s` remains, each core capped by what is left;
                  afterwards the static ledger only, and the entry says it was shortened
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

Clock = Callable[[], float]

# Calibrated on the phases after the solve measured in-process (issue 12 part 2, two shared
# cores, load 1.2-1.5; docs/planner-scale.md, "The post-solve reserve from measured tails"):
# preemption staging plus shortened explanations took 0.14-0.18 s on the mixed 1,000 x 200
# fleets (79,000-80,000 distinct candidates, staged twice), 0.2 s on production 1,000 x 200
# (853 distinct, 151,620 candidates), 0.61 s on production 10,000 x 500 (2,107 distinct, 3.76 M
# candidates, 1.9 s build); the office and 64-host fleets 10-30 ms. The terms were 6 us per
# candidate and 0.2 ms per host (calibrated on a 166,000-candidate fleet): 1.35 s on the mixed
# 1,000 fleet, which alone sent `--time-limit 2` there to the fallback. A fit over hosts alone
# (~0.16 s + 45 us per host) covers all four; a small per-candidate term stays for fleets of
# distinct hosts with more candidates (staging twice took up to 0.75 s at 166,000).
RESERVE_BASE_S = 0.12
RESERVE_PER_CANDIDATE_S = 5e-7
# A loaded machine slows those phases as much as the problem build (load average 7 on two
# cores doubles both): the reserve grows with the build just measured. 10,000 production
# hosts: 0.61 s after a 1.9 s build (0.32x); mixed 1,000: 0.14-0.18 s after 0.36 s (0.5x, the
# per-candidate and per-host terms cover it there).
RESERVE_BUILD_SHARE = 0.45
# After the explanations the caller still validates and prints (~2 us per candidate) and the
# refusal scans of a full explanation take about as long; each CP-SAT core is capped by what
# is left beyond this margin (explain.py).
FULL_EXPLANATION_S = 0.1
AFTER_EXPLAIN_PER_CANDIDATE_S = 4e-6
# The explanations' CP-SAT cores (deterministic work 0.3 per plan, ~1 s of wall at most) get
# up to this much of the reserve, so a plan that fits its budget keeps full explanations. Their
# models grow with the candidates: the office and 64-host fleets explain fully in 10-30 ms
# (issue 12: 0.3 s for them alone sent the office fleet at --time-limit 1 to the fallback).
EXPLANATION_CORES_S = 0.3
EXPLANATION_CORES_BASE_S = 0.02
EXPLANATION_CORES_PER_CANDIDATE_S = 1e-4
# Building a CP-SAT model costs about 4x the problem build per candidate (25-40 us against
# ~10 us on an idle machine): a slow problem build predicts a slow model build.
MODEL_TO_PROBLEM_BUILD = 4.0
# On fleets of host shapes (problem.py builds per shape) staging and explanations grow with
# hosts and unmet models, not candidates: `plan.py` passes the distinct candidates (one host's
# per build shape), counted up to RESERVE_CANDIDATES_MAX, and adds RESERVE_PER_HOST_S per host
# (staging builds a view per host, explanations scan hosts): 0.2 s at 1,000 production hosts,
# 0.61 s at 10,000 (the term is 60 us, at most 20,000 hosts; it also sets the fallback's
# floor, which at 1,000 production hosts must cover 0.14 s of staging and explanations).
RESERVE_CANDIDATES_MAX = 300_000
RESERVE_PER_HOST_S = 6e-5
RESERVE_HOSTS_MAX = 20_000
# The explanations' CP-SAT cores get at most this share of the limit in the reserve: under a
# short limit the solve goes first and explanations shorten (they still run full while the
# deadline leaves time). Full explanations take 0.5-0.6 s on the mixed 1,000 fleet (0.02 s
# shortened), where the 0.3 s cap alone was a sixth of `--time-limit 2`.
EXPLANATION_CORES_LIMIT_SHARE = 0.05
# The CLI's work after `make_plan` returns: its independent validation (violations), the JSON
# document (model_dump, json.dumps, the write) and the process exit. 10,000 production hosts:
# validation 0.09 s, JSON 0.1 s, exit 0.06 s on two shared cores; an office fleet ~20 ms.
OUTPUT_BASE_S = 0.05
OUTPUT_PER_HOST_S = 3e-5
SHORTENED_NOTE = "explanation shortened: the time limit was reached"
# The workload portfolio (attach.py) runs after the whole base plan; with workloads the base
# plan's phases see the deadline less the portfolio's share (`Deadline.hold`), so the base
# solve, whose soft levels can spend any limit, ends early enough for it. The share: the
# portfolio's setup (its context rebuilds the problem, the coordinate search, staging and
# rows: 0.115 s on production 256 x 60 with 12,223 keys, 1.2 s on 1,000 x 200 with 151,620,
# in-process at load 0.7; 10 us per key leaves margin: with 8 us a 30 s plan there ended 60 ms
# under its limit) plus its CP-SAT (the host-type model proves 256 x 60 in 0.25 s and
# 1,000 x 200 in 2-4 s), that at most policy.portfolio.time_limit_s and a quarter of the limit;
# the whole share at most half the limit. `keys`: the candidates of every model with a score
# for an active workload (the per-host model's variable count, an upper bound of the typed one's).
# PORTFOLIO_FINISH_S: staging, rows and the plan's copy after the portfolio solve (0.02 s at
# 1,000 production hosts); attach.py keeps it and the caller's output from the solve.
PORTFOLIO_FINISH_S = 0.1
PORTFOLIO_SETUP_BASE_S = 0.05
PORTFOLIO_SETUP_PER_KEY_S = 1e-5
PORTFOLIO_SOLVE_PER_KEY_S = 3e-5
PORTFOLIO_SOLVE_LIMIT_SHARE = 0.25
PORTFOLIO_LIMIT_SHARE = 0.5


@dataclass
class Deadline:
    limit_s: float
    clock: Clock = time.perf_counter
    started: float | None = None
    spent: dict[str, float] = field(default_factory=dict)  # seconds per finished phase
    # What the caller frees after its output: make_plan leaves its problem here (freeing a
    # 10,000-host problem takes ~0.35 s, which a CLI process that exits skips).
    keep: list[object] = field(default_factory=list)
    # The caller's work after make_plan when it knows it better than `output_reserve_s` (the
    # JSON document's): the CLI's Rich view costs more (plan_cmd.py).
    output_s: float | None = None
    # Held back from every phase until the holder releases it (the portfolio's share, held
    # by plan.py for the base plan, released by attach.py): remaining() leaves it out.
    held_s: float = 0.0

    def __post_init__(self) -> None:
        if self.started is None:
            self.started = self.clock()

    @property
    def start(self) -> float:
        assert self.started is not None
        return self.started

    def elapsed(self) -> float:
        return self.clock() - self.start

    def remaining(self) -> float:
        return self.limit_s - self.held_s - self.elapsed()

    def hold(self, seconds: float) -> None:
        """Keep `seconds` of the limit from the phases until `release` (a later phase's)."""
        self.held_s = max(0.0, seconds)

    def release(self) -> None:
        self.held_s = 0.0

    def expired(self, margin_s: float = 0.0) -> bool:
        return self.remaining() <= margin_s

    def mark(self, phase: str, since: float) -> float:
        """Record a finished phase that began at clock time `since`; return the clock now."""
        now = self.clock()
        self.spent[phase] = self.spent.get(phase, 0.0) + (now - since)
        return now


def post_solve_reserve_s(
    candidates: int,
    build_s: float = 0.0,
    hosts: int = 0,
    output_s: float | None = None,
    limit_s: float | None = None,
) -> float:
    """What the phases after the solve need, for a problem of this size (`hosts` hosts) that
    took `build_s` to build, plus the CP-SAT cores of full explanations (at most
    EXPLANATION_CORES_LIMIT_SHARE of `limit_s`, the command's limit, where given) and the
    caller's validation and output (`output_s`, else `output_reserve_s`)."""
    counted = min(candidates, RESERVE_CANDIDATES_MAX)
    phases = max(
        RESERVE_BASE_S
        + RESERVE_PER_CANDIDATE_S * counted
        + RESERVE_PER_HOST_S * min(hosts, RESERVE_HOSTS_MAX),
        RESERVE_BUILD_SHARE * build_s,
    )
    after = output_s if output_s is not None else output_reserve_s(hosts)
    cores = explanation_cores_s(candidates)
    if limit_s is not None:
        cores = min(cores, EXPLANATION_CORES_LIMIT_SHARE * limit_s)
    return phases + cores + after


def portfolio_share_s(limit_s: float, keys: int, solve_cap_s: float) -> float:
    """The deadline's share for the workload portfolio after the base plan: its setup for
    `keys` candidate keys and its finish, plus its CP-SAT (at most `solve_cap_s`, the policy's
    budget, and a quarter of the limit), the whole at most half of `limit_s`."""
    setup = PORTFOLIO_FINISH_S + PORTFOLIO_SETUP_BASE_S + PORTFOLIO_SETUP_PER_KEY_S * keys
    solve = min(
        solve_cap_s, PORTFOLIO_SOLVE_PER_KEY_S * keys, PORTFOLIO_SOLVE_LIMIT_SHARE * limit_s
    )
    return min(PORTFOLIO_LIMIT_SHARE * limit_s, setup + solve)


def explanation_cores_s(candidates: int) -> float:
    """The reserve's share for the explanations' CP-SAT cores, for this many candidates."""
    return min(
        EXPLANATION_CORES_S,
        EXPLANATION_CORES_BASE_S + EXPLANATION_CORES_PER_CANDIDATE_S * candidates,
    )


def output_reserve_s(hosts: int) -> float:
    """The CLI's validation, JSON output and exit after the plan, for `hosts` hosts."""
    return OUTPUT_BASE_S + OUTPUT_PER_HOST_S * hosts


def model_build_s_per_key(candidates: int, build_s: float) -> float:
    """The expected CP-SAT model-build cost per candidate on this machine, right now."""
    return MODEL_TO_PROBLEM_BUILD * build_s / max(1, candidates)


def explanation_margin_s(candidates: int) -> float:
    """Explanations are full only while more than this is left of the deadline."""
    counted = min(candidates, RESERVE_CANDIDATES_MAX)
    return FULL_EXPLANATION_S + AFTER_EXPLAIN_PER_CANDIDATE_S * counted
