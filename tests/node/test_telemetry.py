"""Real readings on this machine, and the Linux file parsers against fake kernel trees."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from grid.node.protection import LocalOverride, OverrideKind, Telemetry, ThermalState, telemetry
from grid.node.protection.telemetry import HostPaths, TelemetryReader

pytestmark = pytest.mark.unit


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def empty_host(tmp_path: Path) -> HostPaths:
    """A kernel tree with nothing in it, and no nvidia-smi."""
    return HostPaths(
        proc=tmp_path / "proc", sys=tmp_path / "sys", dev=tmp_path / "dev", nvidia_smi=None
    )


def test_read_returns_plausible_values_on_this_machine() -> None:
    override = LocalOverride(kind=OverrideKind.DRAIN, reason="test")
    sample = telemetry.read(dedicated=True, override=override, cpu_sample_s=0.1)
    assert isinstance(sample, Telemetry)
    assert sample.dedicated and sample.override == override

    assert sample.cpu_percent is not None and 0.0 <= sample.cpu_percent <= 100.0
    system_memory = psutil.virtual_memory().percent
    assert sample.memory_percent is not None and 0.0 < sample.memory_percent <= 100.0
    assert sample.memory_percent >= system_memory - 10.0  # never looser than the system view
    cores = len(os.sched_getaffinity(0))
    assert sample.load_per_core is not None
    assert sample.load_per_core == pytest.approx(os.getloadavg()[0] / cores, rel=0.5, abs=0.5)

    # Sensors this machine may lack are unknown exactly when the OS has nothing to report.
    assert (sample.battery_percent is None) == (psutil.sensors_battery() is None)
    if not psutil.users():  # headless: user activity is unknown, never "idle for 0 s"
        assert sample.idle_seconds is None and sample.user_active is None
    non_loopback_up = any(
        s.isup and "loopback" not in s.flags for s in psutil.net_if_stats().values()
    )
    assert sample.network_up is non_loopback_up
    if sample.temperature_c is not None:
        assert -40.0 < sample.temperature_c < 150.0


def test_cpu_use_is_unknown_until_an_interval_has_been_measured() -> None:
    fake_clock = [100.0]
    reader = TelemetryReader(monotonic=lambda: fake_clock[0])
    assert reader.read().cpu_percent is None  # no interval yet: unknown, not 0 %
    time.sleep(0.1)  # psutil measures on its own clock; ours says when enough has passed
    fake_clock[0] += 0.1
    measured = reader.read().cpu_percent
    assert measured is not None and 0.0 <= measured <= 100.0


def test_a_bare_kernel_tree_gives_unknowns_not_zeros(tmp_path: Path) -> None:
    paths = empty_host(tmp_path)
    assert telemetry.read_load_per_core(paths) is None
    assert telemetry.read_gpu_memory_percent(paths) is None
    assert telemetry._mains_online(paths.sys / "class" / "power_supply") is None
    assert telemetry._cgroup_memory_percent(paths.sys / "fs" / "cgroup") is None


def test_load_is_divided_by_the_usable_cores(tmp_path: Path) -> None:
    paths = empty_host(tmp_path)
    _write(paths.proc / "loadavg", "3.00 2.00 1.00 2/300 4242\n")
    cores = len(os.sched_getaffinity(0))
    assert telemetry.read_load_per_core(paths) == pytest.approx(3.0 / cores)
    _write(paths.proc / "loadavg", "garbage\n")
    assert telemetry.read_load_per_core(paths) is None


def test_mains_power_is_read_from_sysfs_when_there_is_no_battery(tmp_path: Path) -> None:
    supplies = tmp_path / "power_supply"
    _write(supplies / "usb" / "type", "USB\n")
    _write(supplies / "usb" / "online", "1\n")
    assert telemetry._mains_online(supplies) is None  # only a USB port: says nothing
    _write(supplies / "AC" / "type", "Mains\n")
    _write(supplies / "AC" / "online", "0\n")
    assert telemetry._mains_online(supplies) is False
    _write(supplies / "AC" / "online", "1\n")
    assert telemetry._mains_online(supplies) is True


def test_the_container_memory_limit_counts_without_reclaimable_cache(tmp_path: Path) -> None:
    cgroup = tmp_path / "cgroup"
    _write(cgroup / "memory.max", "1000\n")
    _write(cgroup / "memory.current", "900\n")
    _write(cgroup / "memory.stat", "anon 500\ninactive_file 300\nactive_file 100\n")
    # (900 - 300 reclaimable) / 1000
    assert telemetry._cgroup_memory_percent(cgroup) == pytest.approx(60.0)
    _write(cgroup / "memory.max", "max\n")
    assert telemetry._cgroup_memory_percent(cgroup) is None  # no limit: the system view rules


def test_amd_gpu_memory_reports_the_fullest_card(tmp_path: Path) -> None:
    paths = empty_host(tmp_path)
    drm = paths.sys / "class" / "drm"
    _write(drm / "card0" / "device" / "mem_info_vram_used", "256\n")
    _write(drm / "card0" / "device" / "mem_info_vram_total", "1024\n")
    _write(drm / "card1" / "device" / "mem_info_vram_used", "768\n")
    _write(drm / "card1" / "device" / "mem_info_vram_total", "1024\n")
    assert telemetry.read_gpu_memory_percent(paths) == pytest.approx(75.0)


def test_nvidia_gpu_memory_is_parsed_from_nvidia_smi(tmp_path: Path) -> None:
    fake_nvidia_smi = tmp_path / "fake-nvidia-smi"
    _write(fake_nvidia_smi, "#!/bin/sh\nprintf '1000, 8000\\n6000, 8000\\n'\n")
    fake_nvidia_smi.chmod(0o755)
    paths = HostPaths(sys=tmp_path / "sys", nvidia_smi=str(fake_nvidia_smi))
    assert telemetry.read_gpu_memory_percent(paths) == pytest.approx(75.0)

    failing = tmp_path / "fake-nvidia-smi-failing"
    _write(failing, "#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    failing.chmod(0o755)
    assert (
        telemetry.read_gpu_memory_percent(HostPaths(sys=tmp_path, nvidia_smi=str(failing))) is None
    )


def test_idle_time_comes_from_the_login_terminals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = empty_host(tmp_path)
    now = time.time()
    for name, idle_s in (("pts/7", 120.0), ("pts/8", 900.0)):
        _write(paths.dev / name, "")
        os.utime(paths.dev / name, (now - idle_s, now - idle_s))
    fake_sessions = [
        SimpleNamespace(terminal="pts/8"),
        SimpleNamespace(terminal="pts/7"),
        SimpleNamespace(terminal=":0"),  # graphical: no device to read
        SimpleNamespace(terminal="../etc/passwd"),  # never read outside /dev
    ]
    monkeypatch.setattr(psutil, "users", lambda: fake_sessions)
    assert telemetry.read_idle_seconds(paths) == pytest.approx(
        120.0, abs=5.0
    )  # the most recent keystroke wins

    monkeypatch.setattr(psutil, "users", lambda: [SimpleNamespace(terminal=":0")])
    assert telemetry.read_idle_seconds(paths) is None


def test_thresholds_reported_by_a_sensor_judge_its_temperature() -> None:
    judge = telemetry._judge_temperature
    assert judge(70.0, high=80.0, critical=100.0) is ThermalState.NOMINAL
    assert judge(85.0, high=80.0, critical=100.0) is ThermalState.SERIOUS
    assert judge(101.0, high=80.0, critical=100.0) is ThermalState.CRITICAL
    assert judge(101.0, high=None, critical=None) is None  # no thresholds: unknown state
