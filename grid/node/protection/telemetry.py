"""Real host readings on Linux → `Telemetry` (the protection loop's only side-effect part).

Each reading is taken independently; a sensor the machine lacks, or one whose read fails, is
reported as None (unknown) and never as zero, so the pure `protection.evaluate` can tell "no
battery here" from "battery empty". Sources: psutil for CPU, memory, battery and temperatures;
`/proc/loadavg` for load; the cgroup v2 memory limit where the host runs in a container;
`/sys/class/power_supply` for mains power on machines without a battery; `/sys/class/drm` (AMD)
or `nvidia-smi` for GPU memory; terminal access times for user idle time (a headless server
with no login session has unknown user activity).

`network_up` says only whether a non-loopback interface is up; whether the controller answers
is the agent's own knowledge and it may replace the field (`telemetry.model_copy(update=...)`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from grid.node.protection.model import LocalOverride, Telemetry, ThermalState

# Below this interval a non-blocking CPU sample says nothing; the previous value is kept.
_MIN_CPU_INTERVAL_S = 0.05
_NVIDIA_SMI_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class HostPaths:
    """Where the kernel's files live; tests point these at a fake tree."""

    proc: Path = Path("/proc")
    sys: Path = Path("/sys")
    dev: Path = Path("/dev")
    nvidia_smi: str | None = field(default_factory=lambda: shutil.which("nvidia-smi"))


class TelemetryReader:
    """Samples this machine; keep one per agent so CPU use is measured between samples."""

    def __init__(
        self,
        *,
        dedicated: bool = False,
        paths: HostPaths | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dedicated = dedicated
        self.paths = paths or HostPaths()
        self._monotonic = monotonic
        self._last_cpu_at: float | None = None
        self._last_cpu: float | None = None
        self._prime_cpu()

    def read(self, override: LocalOverride | None = None) -> Telemetry:
        battery_percent, on_ac_power = read_power(self.paths)
        thermal_state, temperature_c = read_thermal()
        idle_seconds = read_idle_seconds(self.paths)
        return Telemetry(
            user_active=None,  # the policy derives activity from idle time
            idle_seconds=idle_seconds,
            battery_percent=battery_percent,
            on_ac_power=on_ac_power,
            thermal_state=thermal_state,
            temperature_c=temperature_c,
            cpu_percent=self._cpu_percent(),
            memory_percent=read_memory_percent(self.paths),
            gpu_memory_percent=read_gpu_memory_percent(self.paths),
            load_per_core=read_load_per_core(self.paths),
            network_up=read_network_up(),
            override=override,
            dedicated=self.dedicated,
        )

    def _prime_cpu(self) -> None:
        with contextlib.suppress(Exception):
            psutil.cpu_percent(interval=None)
            self._last_cpu_at = self._monotonic()

    def _cpu_percent(self) -> float | None:
        now = self._monotonic()
        if self._last_cpu_at is None:
            self._prime_cpu()
            return None  # nothing measured yet: unknown, not idle
        if now - self._last_cpu_at < _MIN_CPU_INTERVAL_S:
            return self._last_cpu
        try:
            self._last_cpu = _percent(psutil.cpu_percent(interval=None))
        except Exception:
            self._last_cpu = None
        self._last_cpu_at = now
        return self._last_cpu


def read(
    *,
    dedicated: bool = False,
    override: LocalOverride | None = None,
    cpu_sample_s: float = 0.1,
) -> Telemetry:
    """One self-contained sample; blocks `cpu_sample_s` to measure CPU use."""
    reader = TelemetryReader(dedicated=dedicated)
    time.sleep(max(cpu_sample_s, _MIN_CPU_INTERVAL_S))
    return reader.read(override)


def read_memory_percent(paths: HostPaths) -> float | None:
    """The tighter of system memory and the container's cgroup limit, in percent."""
    candidates: list[float] = []
    with contextlib.suppress(Exception):
        candidates.append(float(psutil.virtual_memory().percent))
    cgroup = _cgroup_memory_percent(paths.sys / "fs" / "cgroup")
    if cgroup is not None:
        candidates.append(cgroup)
    return _percent(max(candidates)) if candidates else None


def _cgroup_memory_percent(cgroup: Path) -> float | None:
    limit_text = _read_text(cgroup / "memory.max")
    current_text = _read_text(cgroup / "memory.current")
    if limit_text is None or current_text is None or limit_text == "max":
        return None
    try:
        limit, current = int(limit_text), int(current_text)
    except ValueError:
        return None
    if limit <= 0:
        return None
    # Reclaimable page cache is not pressure (as `docker stats` counts it).
    inactive_file = _stat_field(cgroup / "memory.stat", "inactive_file") or 0
    used = max(0, current - inactive_file)
    return 100.0 * used / limit


def read_load_per_core(paths: HostPaths) -> float | None:
    text = _read_text(paths.proc / "loadavg")
    if text is None:
        return None
    try:
        one_minute = float(text.split()[0])
    except (IndexError, ValueError):
        return None
    cores = _usable_cores()
    if cores is None or one_minute < 0:
        return None
    return one_minute / cores


def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0)) or None
    except (AttributeError, OSError):
        return os.cpu_count()


def read_power(paths: HostPaths) -> tuple[float | None, bool | None]:
    """(battery percent, on AC power); a machine with no battery is on mains if sysfs says so."""
    battery = None
    with contextlib.suppress(Exception):
        battery = psutil.sensors_battery()
    if battery is not None:
        plugged = battery.power_plugged
        return _percent(float(battery.percent)), plugged if isinstance(plugged, bool) else None
    return None, _mains_online(paths.sys / "class" / "power_supply")


def _mains_online(supplies: Path) -> bool | None:
    try:
        entries = sorted(supplies.iterdir())
    except OSError:
        return None
    seen = False
    for supply in entries:
        if _read_text(supply / "type") != "Mains":
            continue
        online = _read_text(supply / "online")
        if online == "1":
            return True
        if online == "0":
            seen = True
    return False if seen else None


def read_thermal() -> tuple[ThermalState | None, float | None]:
    """Hottest sensor, and a state from the thresholds the sensors themselves report."""
    try:
        groups = psutil.sensors_temperatures()
    except Exception:
        return None, None
    hottest: float | None = None
    state: ThermalState | None = None
    rank = {None: -1, ThermalState.NOMINAL: 0, ThermalState.SERIOUS: 1, ThermalState.CRITICAL: 2}
    for entries in groups.values():
        for entry in entries:
            current = entry.current
            if current is None or not -100 <= current <= 250:
                continue  # absent or implausible: not a reading
            hottest = current if hottest is None else max(hottest, current)
            judged = _judge_temperature(current, entry.high, entry.critical)
            if rank[judged] > rank[state]:
                state = judged
    return state, hottest


def _judge_temperature(
    current: float, high: float | None, critical: float | None
) -> ThermalState | None:
    if critical is not None and critical > 0 and current >= critical:
        return ThermalState.CRITICAL
    if high is not None and high > 0 and current >= high:
        return ThermalState.SERIOUS
    if (high is not None and high > 0) or (critical is not None and critical > 0):
        return ThermalState.NOMINAL
    return None  # no threshold to judge against: the temperature alone is reported


def read_gpu_memory_percent(paths: HostPaths) -> float | None:
    """The fullest GPU's memory use: AMD sysfs first, then nvidia-smi when installed."""
    fractions = _amd_vram_fractions(paths.sys / "class" / "drm")
    if not fractions and paths.nvidia_smi:
        fractions = _nvidia_fractions(paths.nvidia_smi)
    return _percent(100.0 * max(fractions)) if fractions else None


def _amd_vram_fractions(drm: Path) -> list[float]:
    fractions: list[float] = []
    try:
        cards = sorted(drm.glob("card*/device"))
    except OSError:
        return fractions
    for device in cards:
        used = _read_int(device / "mem_info_vram_used")
        total = _read_int(device / "mem_info_vram_total")
        if used is not None and total:
            fractions.append(used / total)
    return fractions


def _nvidia_fractions(executable: str) -> list[float]:
    try:
        result = subprocess.run(
            [
                executable,
                "--query-gpu=memory.used,memory.total",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=_NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if result.returncode != 0:
        return []
    fractions: list[float] = []
    for line in result.stdout.splitlines():
        try:
            used_text, total_text = line.split(",")
            used, total = float(used_text), float(total_text)
        except ValueError:
            continue
        if total > 0 and used >= 0:
            fractions.append(used / total)
    return fractions


def read_network_up() -> bool | None:
    try:
        stats = psutil.net_if_stats()
    except Exception:
        return None
    if not stats:
        return None
    return any(s.isup and "loopback" not in s.flags.split(",") for s in stats.values())


def read_idle_seconds(paths: HostPaths) -> float | None:
    """Seconds since the most recent keystroke on any login terminal (as `w` computes it).

    No login session (a headless server) means unknown. Graphical sessions without a terminal
    device are not measured here, so they leave the value unknown as well.
    """
    try:
        sessions = psutil.users()
    except Exception:
        return None
    now = time.time()
    idle: float | None = None
    for session in sessions:
        terminal = session.terminal
        if not terminal or "/" in terminal.replace("pts/", "", 1):
            continue  # ":0" and other non-device names, or anything that escapes /dev
        try:
            touched = (paths.dev / terminal).stat().st_atime
        except OSError:
            continue
        seconds = max(0.0, now - touched)
        idle = seconds if idle is None else min(idle, seconds)
    return idle


def _percent(value: float) -> float | None:
    if value != value or value < 0:  # NaN or negative: not a reading
        return None
    return min(100.0, value)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _stat_field(path: Path, name: str) -> int | None:
    text = _read_text(path)
    if text is None:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            try:
                return int(value)
            except ValueError:
                return None
    return None
