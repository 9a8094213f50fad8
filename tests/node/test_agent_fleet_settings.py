"""Logical fleet settings: capacity shares never exceed the machine, models resolve exactly."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.lab.logical_fleet_settings import (
    DEFAULT_SHARE_CAP_MB,
    USABLE_FRACTION,
    FleetModel,
    FleetSettings,
    capacity_shares,
    resolve_model,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("machines", [1, 2, 7, 32])
@pytest.mark.parametrize("free_mb", [3000, 24000, 500_000])
def test_default_shares_fit_in_the_machine(machines: int, free_mb: int) -> None:
    shares = capacity_shares(machines, None, 32, free_mb)
    assert len(shares) == machines and len(set(shares)) == 1
    assert sum(shares) <= free_mb * USABLE_FRACTION
    assert shares[0] <= DEFAULT_SHARE_CAP_MB


def test_explicit_capacities_are_checked_against_the_machine() -> None:
    assert capacity_shares(3, [1, 1.5, 2], 256, 24000) == [1024, 1536, 2048]
    with pytest.raises(GridError) as err:
        capacity_shares(2, [16, 16], 256, 24000)
    assert err.value.code == "capacity_exceeds_machine"
    with pytest.raises(GridError) as err:
        capacity_shares(3, [1, 1], 256, 24000)
    assert err.value.code == "invalid_capacities"
    with pytest.raises(GridError) as err:
        capacity_shares(2, [0.1, 0.1], 256, 24000)
    assert err.value.code == "capacity_too_small"


def test_a_gguf_path_resolves_to_its_exact_digest(tmp_path: Path) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"G" * 3 * 2**20)
    model = resolve_model(str(weights), tmp_path / "weights")
    assert model.model_id == "tiny.gguf"
    assert model.sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert model.memory_mb == 256  # small files get the floor
    assert resolve_model(str(weights), tmp_path, memory_mb=700).memory_mb == 700
    with pytest.raises(GridError) as err:
        resolve_model(str(tmp_path / "missing.gguf"), tmp_path)
    assert err.value.code == "unknown_model"


def test_each_logical_machine_gets_its_own_identity_and_ports() -> None:
    settings = FleetSettings(
        machines=3,
        model=FleetModel(model_id="m", path="/m.gguf", sha256="0" * 64, memory_mb=256),
        capacities_mb=[1024] * 3,
        engine_port_base=40000,
    )
    hosts = {settings.host_id(i) for i in range(3)}
    domains = {settings.failure_domain(i) for i in range(3)}
    ranges = [settings.engine_ports(i) for i in range(3)]
    assert len(hosts) == len(domains) == 3
    assert ranges == [(40000, 40009), (40010, 40019), (40020, 40029)]
