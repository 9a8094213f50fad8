"""The hindsight oracle: the most demand any placement schedule could serve over a known trace.

Contract: DESIGN.md "Oracle contract"; readings of its ambiguous points: docs/oracle.md.

Formulation (CP-SAT, time-expanded over (model, host, minute) residency; grid/lab/oracle/model.py)

Sets: minutes T = {0 … minutes−1}; eligible pairs P = {(m, h): runtimes intersect and
memory_mb(m) ≤ capacity_mb(h)}; U(h) ⊆ T the minutes host h is up; I ⊆ P the initial replicas;
K = load_minutes + hold_minutes.

Variables (only where they can be non-zero):
- x[p,t] ∈ {0,1} for t ∈ U(h): the replica is present (occupies memory and a slot) at minute t;
- load[p,t] ≥ x[p,t] − x[p,t−1], unload[p,t] ≥ x[p,t−1] − x[p,t], where x[p,t−1] is the
  constant 1 for t = 0 and p ∈ I, the constant 0 at t = 0 otherwise and after a down minute
  (then the literal is an alias of x or ¬x); no unload literal exists for the minute a host goes
  down (a loss is not a mutation);
- ready[p,t] ≤ x[p,t−j] for j = 0 … load_minutes (x before minute 0 is 1 for initial replicas,
  so they are ready at 0; a down minute in the window means not ready);
- served[m,t] ∈ [0, D[m,t]] (integers: demand scaled by 10**k, see trace.py).

Constraints:
- hold: Σ_{s ∈ (t−K, t], no down minute in [s, t]} load[p,s] ≤ x[p,t] (a replica loaded at s
  stays present through s + K − 1 unless its host goes down; the window form is the tight
  minimum-up-time formulation of unit commitment). Initial replicas have no load literal, so
  they may leave at any minute;
- memory: Σ_m memory_mb(m) · x[m,h,t] ≤ capacity_mb(h); slots: Σ_m x[m,h,t] ≤ max_models(h)
  (when max_models > 0); both per host and minute, emitted only where they can bind;
- served: with C = scaled concurrency, n = Σ_h ready[m,h,t], k = ⌈D/C⌉ and f = D − C(k−1):
  served ≤ C·n (when k ≥ 2) and served ≤ C(k−1) + f·(n − k + 1): the exact concave hull of
  min(D, C·n) over integer n, so the LP relaxation is as tight as this term allows.

Levels (lexicographic, two stages, solve.py): 1. maximise Σ served; 2. with Σ served ≥ the
stage-1 value, minimise Σ load + Σ unload. OPTIMAL only when both stages are proven.

Tractability techniques used:
- identical hosts (same capacity, slots, runtimes and down intervals, no initial replica) form a
  counted type. In the bounds (bound.py) the aggregation is exact: configuration LPs count
  hosts per type. In the residency model, hosts of a type are ordered by residency-minutes
  (symmetry breaking; the greedy hint is permuted to respect that order); its variables stay
  per host, because which models share one host is not linear in per-type counts;
- greedy schedules (greedy.py, several foresight lengths, the best kept) as a complete hint, as
  the fallback and as the baseline; stage 1's schedule hints stage 2;
- the LP bound: linearization level 2, the concave-hull served term, and per-minute
  configuration-LP cuts Σ_m served[m,t] ≤ B_t; the reported bound is the smallest of CP-SAT's
  best bound, Σ B_t, an LP coupled across minutes, and Σ min(D, C · hosts that could be ready);
- variables only where they can be non-zero, ledgers only where they can bind;
- beyond FULL_MODEL_CELLS replica variables (solve.py), a time-window large-neighbourhood
  search (search.py): the exact model re-solved on short windows of minutes with the
  incumbent's state at entry and its residency fixed just after the window;
- a tidy pass (tidy.py) on the hint and on the answer: bridge reload gaps, drop idle stays.
Not used: time compression of piecewise-constant demand. With load and hold timing, an optimal
schedule may change residency inside a constant block (to be ready at the next block's start),
so merging minutes is not exact in general; generated and real traces change every minute.
"""

from grid.lab.oracle.generate import generate_document, generate_trace
from grid.lab.oracle.greedy import greedy_schedule
from grid.lab.oracle.replay import Action, Replay, replay
from grid.lab.oracle.solve import OracleModelMismatch, OracleResult, solve_oracle, solve_problem
from grid.lab.oracle.trace import Problem, Trace, TraceError, compile_trace, load_trace, parse_trace

__all__ = [
    "Action",
    "OracleModelMismatch",
    "OracleResult",
    "Problem",
    "Replay",
    "Trace",
    "TraceError",
    "compile_trace",
    "generate_document",
    "generate_trace",
    "greedy_schedule",
    "load_trace",
    "parse_trace",
    "replay",
    "solve_oracle",
    "solve_problem",
]
