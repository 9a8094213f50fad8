"""`grid capacity` templates carry GPU devices (issue 21, part 6): the count model places
tensor-parallel replicas on the devices a template brings. Hand-worked fleets."""

from __future__ import annotations

import pytest

from grid.fleet.models import Host
from grid.lab.capacity import capacity
from grid.lab.capacity_templates import load_template
from tests.planner.fleets import host, model, snapshot, want

pytestmark = pytest.mark.unit
GB = 1024


def _template(host_id: str, devices: list[int]) -> Host:
    return Host.model_validate(
        {"host_id": host_id, "capacity_mb": 400 * GB, "gpu_memory_mb": devices,
         "runtimes": ["vllm"]}
    )  # fmt: skip


def _gpu_model(model_id: str, count: int, per_device_gb: int) -> dict[str, object]:
    return model(model_id, 8 * GB, runtimes=["vllm"], min_gpu_count=count,
                 min_gpu_memory_mb=per_device_gb * GB)  # fmt: skip


def test_one_four_gpu_host_beats_two_two_gpu_hosts() -> None:
    # a and b each take 2 devices of >= 40 GB: one 4 x 48 GB host holds both, a 2 x 80 GB
    # host holds one, so the fewest hosts is one quad
    snap = snapshot([host("cpu", 64 * GB)], [_gpu_model("a", 2, 40), _gpu_model("b", 2, 40)],
                    {"a": want(1), "b": want(1)})  # fmt: skip
    answer = capacity(snap, [_template("dual", [80 * GB] * 2), _template("quad", [48 * GB] * 4)])
    assert answer.added == {"dual": 0, "quad": 1}
    assert (answer.placed_before, answer.placed_after) == (0, 2)


def test_devices_are_consumed_so_small_hosts_add_up() -> None:
    # only 2 x 80 GB hosts: two of them for the two 2-GPU replicas
    snap = snapshot([], [_gpu_model("a", 2, 40), _gpu_model("b", 2, 40)],
                    {"a": want(1), "b": want(1)})  # fmt: skip
    assert capacity(snap, [_template("dual", [80 * GB] * 2)]).added == {"dual": 2}


def test_no_template_with_enough_devices_is_infeasible_and_named() -> None:
    snap = snapshot([], [_gpu_model("big", 2, 40)], {"big": want(1)})
    answer = capacity(snap, [_template("single", [48 * GB])])
    assert answer.status == "INFEASIBLE"
    assert "gpu_shortfall" in {b["constraint"] for b in answer.binding}


def test_the_shipped_templates_declare_their_devices() -> None:
    assert load_template("models/templates/gpu-server.json").devices_mb == [80 * GB]
    assert load_template("models/templates/gpu-workstation.json").devices_mb == [48 * GB]
