"""The CP-SAT placement engine: variables, one module per constraint family, levels, solve.

Sets       M models, H hosts, C ⊆ M×H candidate pairs (problem.py: static refusals removed);
           incumbent candidates (managed live residencies kept at zero new memory) and new ones;
           F fixed (unmanaged) replicas, never variables.
Variables  x[m,h] ∈ {0,1} for (m,h) ∈ C (variables.py), plus exact auxiliaries: unary replica
           steps r[m,k] = [count_m ≥ k], host counts, failure-domain indicators, host-used flags.
Hard       memory.py       Σ mem·x ≤ allocatable − fixed_mb
                           Σ_new mem·x ≤ allocatable − live_mb − headroom
           slots.py        Σ x ≤ desired_cap;  Σ_new x ≤ new_cap
           colocation.py   x[m,h] ⇒ count(h) + fixed ≤ c_m (both ledgers);  x[a,h] + x[b,h] ≤ 1
           disk.py         Σ_uncached new artifact·x ≤ disk_free (known only)
           replicas.py     Σ_h x[m,h] ≤ open(m)
                           Σ_{h ∉ pins} x[m,h] ≤ desired − |pins| − fixed replicas off the pins
Levels     objective.py    one linear expression per level of levels.py (equal to score_placement);
           domains.py      the domain_shortfall term
Solve      solve.py        lexicographic stages (stages.py), hinted, within a time budget
Explain    assumptions.py  a feasibility model with one assumption literal per (family, host) and
                           per protected model; its infeasibility core names the binding constraints
ledger.py mirrors the hard constraints in plain Python (hint repair, explanation amounts).
"""
