"""GPUs as the spec counts them: devices per host, tensor-parallel replicas that consume them.

A profile's replica needs k = `min_gpu_count` devices, each with at least g = `min_gpu_memory_mb`
(`ModelProfile.gpu_demand`), and holds them exclusively; a host has devices d_1..d_n with their
memory (`Host.devices_mb`). A set of demands (k_i, g_i) fits a host exactly when, for every
threshold t among the g_i,

    Σ_{i: g_i ≥ t} k_i  ≤  |{j : d_j ≥ t}|                                    (GPU rows)

(the devices a demand may use form nested up-sets, so Hall's condition reduces to these rows;
tests/planner/test_gpus.py checks it against a brute-force assignment). Two ledgers, as for
memory: the desired placement plus the fixed (unmanaged) replicas, and the new placements plus
every live process (make-before-break: a new replica needs devices that are free now).

One rule for every engine: `pair_refusal` is the static filter (eligibility.py), `rows` gives
the right-hand sides the CP-SAT family (cpsat/gpus.py) and the heuristic (gpu_ledger.py) bound,
`violations_on` is the validator's check and `shortfall_text` the explanation's sentence.
"""

from __future__ import annotations

from collections.abc import Iterable

from grid.fleet import LIVE_STATES, Host, ModelProfile, ResidencyState

Demand = tuple[int, int]  # (devices, MB per device)
FAMILY = "gpu"


def devices_at_least(host: Host, threshold_mb: int) -> int:
    return sum(1 for d in host.devices_mb if d >= threshold_mb)


def pair_refusal(model: ModelProfile, host: Host) -> bool:
    """True when the host can never hold one replica: too few devices with enough memory."""
    count, per_device = model.gpu_demand
    return count > 0 and devices_at_least(host, per_device) < count


def fits(devices_mb: list[int], demands: Iterable[Demand]) -> bool:
    """Do these demands fit these devices (the GPU rows)?"""
    wanted = [(k, g) for k, g in demands if k > 0]
    for threshold in {g for _k, g in wanted}:
        need = sum(k for k, g in wanted if g >= threshold)
        if need > sum(1 for d in devices_mb if d >= threshold):
            return False
    return True


def rows(
    devices_mb: list[int], held: Iterable[Demand], thresholds: Iterable[int]
) -> dict[int, int]:
    """threshold -> devices of at least that memory still free after `held`."""
    held = [(k, g) for k, g in held if k > 0]
    return {
        t: sum(1 for d in devices_mb if d >= t) - sum(k for k, g in held if g >= t)
        for t in set(thresholds)
    }


def fmt_gb(mb: int) -> str:
    gb = mb / 1024
    return f"{gb:.0f} GB" if gb >= 10 or gb == int(gb) else f"{gb:.1f} GB"


def shortfall_text(model: ModelProfile, host: Host) -> str:
    """ "needs 2 GPUs of ≥ 40 GB; gpu-02 has 1 of 48 GB" (what the explanation prints)."""
    count, per_device = model.gpu_demand
    need = f"needs {count} GPU{'s' if count != 1 else ''}"
    if per_device:
        need += f" of ≥ {fmt_gb(per_device)}"
    devices = host.devices_mb
    if not devices:
        return f"{need}; {host.host_id} has none"
    sizes = sorted(set(devices), reverse=True)
    have = ", ".join(
        f"{devices.count(s)} of {fmt_gb(s)}" if s else f"{devices.count(s)} of unreported memory"
        for s in sizes
    )
    return f"{need}; {host.host_id} has {have}"


def refusal_text(model: ModelProfile, hosts: list[Host | None], shown: int = 3) -> str:
    """The shortfall sentence for the first hosts of `hosts` (one need, each host's devices)."""
    texts = [shortfall_text(model, h) for h in hosts[:shown] if h is not None]
    if not texts:
        return "too few GPUs"
    more = f" and {len(hosts) - shown} more hosts" if len(hosts) > shown else ""
    return "; ".join(texts[:1] + [t.split("; ", 1)[-1] for t in texts[1:]]) + more


def gpus_wanted(model: ModelProfile) -> str:
    count, per_device = model.gpu_demand
    memory = f" of at least {per_device} MB each" if per_device else ""
    return f"{count} GPU{'s' if count != 1 else ''}{memory}"


def held_by(host: Host, profiles: dict[str, ModelProfile], *, live: bool) -> list[Demand]:
    """Demands of the host's residencies that hold devices whatever the plan does: unmanaged
    READY replicas (live=False: the desired ledger) or every live process (live=True)."""
    out: list[Demand] = []
    for res in host.residencies:
        prof = profiles.get(res.model_id)
        if prof is None or res.state not in LIVE_STATES:
            continue
        if live or (not res.is_managed and res.state is ResidencyState.READY):
            out.append(prof.gpu_demand)
    return out


def violations_on(
    host: Host, profiles: dict[str, ModelProfile], assigned: list[tuple[str, bool]]
) -> list[str]:
    """The validator's GPU check of one host's variable assignments ((model, existing) pairs;
    the fixed unmanaged replicas are counted from the host itself)."""
    desired = [profiles[m].gpu_demand for m, _e in assigned if m in profiles]
    if not fits(host.devices_mb, desired + held_by(host, profiles, live=False)):
        return [f"{host.host_id}: the planned replicas need more GPUs than it has"]
    fresh = [profiles[m].gpu_demand for m, existing in assigned if m in profiles and not existing]
    if fresh and not fits(host.devices_mb, fresh + held_by(host, profiles, live=True)):
        return [f"{host.host_id}: new replicas need GPUs that live processes still hold"]
    return []
