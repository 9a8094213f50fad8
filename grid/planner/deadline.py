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

# Measured on a generated 1,000-host x 200-model fleet (166,000 candidates) on two shared
# cores: preemption staging 0.15-0.75 s (twice when the solver's placement differs from the
# heuristic's), shortened explanations 0.1-0.25 s, the CLI's validation 0.05-0.2 s, JSON
# output 0.05 s. The reserve covers them with margin. The constant part is small: the office
# and 64-host fleets stage, explain and print in 10-30 ms (issue 12; it was 0.3 s, which alone
# sent the office fleet at --time-limit 1 to the fallback once the limit counted the imports).
RESERVE_BASE_S = 0.1
RESERVE_PER_CANDIDATE_S = 6e-6
# A loaded machine slows those phases as much as the problem build (load average 7 on two
# cores doubles both): the reserve grows with the build just measured. 10,000 production
# hosts: staging twice, explanations and freeing the problem 1.0 s after a 1.95 s build
# (issue 12); the per-candidate term covers the 1,000-host fleet above.
RESERVE_BUILD_SHARE = 0.6
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
# The per-candidate figures above were measured where every host is distinct. On fleets of
# host shapes (problem.py builds per shape) staging and explanations grow with hosts and
# unmet models, not candidates: 10,000 production hosts (3.65 M candidates) stage and explain
# in ~1-1.5 s (twice staged when the solver's placement differs from the heuristic's: 0.9 s
# at 5,000 hosts). The per-candidate terms stop growing here (the build share still scales).
RESERVE_CANDIDATES_MAX = 300_000
# Staging builds a view per host and explanations scan hosts: 5,000 production hosts staged
# twice in 0.9 s and the rest after the solve took 0.7 s more, 1,000 in 0.1-0.2 s in all.
# `plan.py` passes the distinct candidates (one host's per build shape) and adds this much per
# host, up to RESERVE_HOSTS_MAX hosts. 10,000 hosts: ~1.5 s after the solve before the final
# scoring stopped scanning every candidate for incumbents (three times); 1.0 s since.
RESERVE_PER_HOST_S = 2e-4
RESERVE_HOSTS_MAX = 5_000
# The CLI's work after `make_plan` returns: its independent validation (violations), the JSON
# document (model_dump, json.dumps, the write) and the process exit. 10,000 production hosts:
# validation 0.09 s, JSON 0.1 s, exit 0.06 s on two shared cores; an office fleet ~20 ms.
OUTPUT_BASE_S = 0.05
OUTPUT_PER_HOST_S = 3e-5
SHORTENED_NOTE = "explanation shortened: the time limit was reached"


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
        return self.limit_s - self.elapsed()

    def expired(self, margin_s: float = 0.0) -> bool:
        return self.remaining() <= margin_s

    def mark(self, phase: str, since: float) -> float:
        """Record a finished phase that began at clock time `since`; return the clock now."""
        now = self.clock()
        self.spent[phase] = self.spent.get(phase, 0.0) + (now - since)
        return now


def post_solve_reserve_s(
    candidates: int, build_s: float = 0.0, hosts: int = 0, output_s: float | None = None
) -> float:
    """What the phases after the solve need, for a problem of this size (`hosts` hosts) that
    took `build_s` to build, plus the CP-SAT cores of full explanations and the caller's
    validation and output (`output_s`, else `output_reserve_s`)."""
    counted = min(candidates, RESERVE_CANDIDATES_MAX)
    phases = max(
        RESERVE_BASE_S
        + RESERVE_PER_CANDIDATE_S * counted
        + RESERVE_PER_HOST_S * min(hosts, RESERVE_HOSTS_MAX),
        RESERVE_BUILD_SHARE * build_s,
    )
    after = output_s if output_s is not None else output_reserve_s(hosts)
    return phases + explanation_cores_s(candidates) + after


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
