"""The controller's predictive cache end to end (fake nodes on a fake clock): a learned
image -> video workflow whose video model cannot get a serving slot becomes one cache-only
advisory in the plan, a disk-only predictive load on the wire, the node's provenance in the next
heartbeat, and a status whose advisory names its workflow edge and confidence; an expired
unused entry becomes an exact-SHA evict; queued evicts are revalidated against the latest
heartbeat before delivery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from grid.cli.allocator_cmd import render_status
from grid.demand import Observation
from grid.fleet.actions import Action, ActionKind, Urgency
from grid.fleet.models import Host, Plan, SolverReport
from grid.fleet.operator import StatusDocument
from grid.fleet.prefetch import PredictiveEntry
from grid.router.affinity import hash_affinity_key
from grid.runtime.controller.delivery import RouteLease, revalidate_evictions
from grid.runtime.controller.state import Command
from tests.runtime.controller.harness import T0, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

SHA = "c" * 64
KINDS = ["load", "warm", "drain", "unload", "evict"]


def video_profile() -> dict[str, Any]:
    return profile(
        memory_mb=12000,
        workload_scores={"video": 1.0},
        artifact_sha256=SHA,
        artifact_size_mb=5000,
        artifact_source="hf://o/r/video.gguf",
    )


def learn_image_to_video(fleet: Fleet) -> float:
    """Five sessions of image then video, then image traffic now: the edge predicts video."""
    ctl, t = fleet.ctl, fleet.now
    for n in range(5):
        key = hash_affinity_key(f"campaign-{n}")
        assert key is not None
        for word in ("image", "video"):
            obs = Observation(model_id="auto", workload=word, service_time_s=5.0, timestamp=t + 5)
            ctl.observe_request(obs, t + 5, affinity_digest=key.digest)
            t += 6
    for i in range(8):  # the image stage is busy now
        obs = Observation(model_id="auto", workload="image", service_time_s=30.0, timestamp=t)
        ctl.observe_request(obs, t)
        t += 1 + i % 2
    return t


def test_a_workflow_prediction_becomes_a_disk_only_prefetch_shown_in_status(
    tmp_path: Path,
) -> None:
    node = FakeNode("h1", capacity_mb=16384, disk_free_mb=50_000, evict_actuator=True)
    fleet = Fleet(tmp_path, [node])
    ctl = fleet.ctl
    # The image model is pinned to the only host: the video model cannot get a slot beside it.
    imager = profile(memory_mb=8192, workload_scores={"image": 1.0}, pinned_hosts=["h1"])
    ctl.put_profile("imager", imager, T0)
    ctl.put_profile("video", video_profile(), T0)
    ctl.set_mode("automatic", T0)
    fleet.register_all()
    fleet.now = learn_image_to_video(fleet)
    staged: dict[str, Any] | None = None  # the first status that shows the advisory
    for _ in range(3):  # the pinned image model's load and warm go first
        fleet.step(1.0)
        doc = ctl.status(fleet.now).model_dump(mode="json")  # as the CLI receives it
        if staged is None and doc["prefetch"]["advisories"]:
            staged = doc
    loads = [c for c in fleet.delivered if c["kind"] == "load" and c["model_id"] == "video"]
    assert len(loads) == 1
    (load,) = loads
    assert load["predictive"] is True and load["memory_mb"] == 0
    assert load["artifact_sha256"] == SHA and load["artifact_size_mb"] == 5000
    assert not any(c["kind"] == "warm" and c["model_id"] == "video" for c in fleet.delivered)
    assert not any(c["kind"] in ("drain", "unload", "evict") for c in fleet.delivered)
    assert all(a.model_id != "video" for a in ctl.last_plan.assignments)  # type: ignore[union-attr]
    # The status that staged it names the advisory's workflow edge and confidence.
    assert staged is not None
    (adv,) = staged["prefetch"]["advisories"]
    assert (adv["model_id"], adv["host_id"], adv["edge"], adv["confidence"]) == (
        "video",
        "h1",
        "image->video",
        1.0,
    )
    console = Console(width=240, record=True)
    console.print(render_status(StatusDocument.model_validate(staged)))
    text = console.export_text()
    row = next(line for line in text.splitlines() if "image->video" in line and "h1" in line)
    assert "video" in row and "1.00" in row
    # The node downloaded it; its next heartbeat carries the provenance; no second advisory.
    fleet.step(1.0)
    assert node.predictive["video"]["warmed"] is False
    doc = ctl.status(fleet.now).model_dump(mode="json")
    section = doc["prefetch"]
    assert [(c["host_id"], c["model_id"], c["sha256"], c["warmed"]) for c in section["cache"]] == [
        ("h1", "video", SHA, False)
    ]
    assert section["reserve_mb"] == 10240 and section["advisories"] == []
    assert [s["code"] for s in section["skipped"]] == ["already_cached"]
    (pred,) = [p for p in section["predictions"] if p["model_id"] == "video"]
    assert pred["edge"] == "image->video" and pred["confidence"] == 1.0
    console = Console(width=240, record=True)
    console.print(render_status(StatusDocument.model_validate(doc)))
    assert "Predictive downloads on hosts" in console.export_text()
    assert not any(c["kind"] == "warm" and c["model_id"] == "video" for c in fleet.delivered)


def test_an_expired_unused_entry_is_evicted_by_its_exact_sha(tmp_path: Path) -> None:
    node = FakeNode(
        "h1",
        disk_free_mb=50_000,
        evict_actuator=True,
        cached={"video"},
        predictive={
            "video": {"sha256": SHA, "size_mb": 5000, "fetched_at": T0 - 7 * 3600, "warmed": False}
        },
        clock=T0,
    )
    fleet = Fleet(tmp_path, [node])
    ctl = fleet.ctl
    ctl.put_profile("video", video_profile(), T0)
    ctl.set_mode("automatic", T0)
    fleet.register_all()
    fleet.now += 30.0  # past the membership grace: destructive work may go
    for _ in range(3):
        fleet.step(5.0)
    evicts = [c for c in fleet.delivered if c["kind"] == "evict"]
    assert [(c["model_id"], c["artifact_sha256"]) for c in evicts] == [("video", SHA)]
    assert node.predictive == {} and "video" not in node.cached
    assert node.disk_free_mb == 55_000


def evict_command(sha: str = SHA) -> Command:
    action = Action(
        action_id="evict-1",
        kind=ActionKind.EVICT,
        host_id="h1",
        model_id="video",
        not_before=T0,
        executable=True,
        urgency=Urgency.CLEANUP,
        predictive=True,
        artifact_sha256=sha,
    )
    return Command(action=action, plan_generation="e:1:x", issued_seq=1)


def fresh_host(**fields: Any) -> Host:
    values: dict[str, Any] = {
        "host_id": "h1",
        "capacity_mb": 16384,
        "actuator_capabilities": KINDS,
        "predictive_cache": [
            PredictiveEntry(model_id="video", sha256=SHA, size_mb=5000, cached_at=T0 - 8 * 3600)
        ],
    }
    values.update(fields)
    return Host(**values)


@pytest.mark.parametrize(
    ("host", "received_at", "code"),
    [
        (fresh_host(), T0 - 5, None),
        (fresh_host(), T0 - 500, "host_unreachable"),
        (fresh_host(predictive_cache=[]), T0 - 5, "not_predictive"),
        (
            fresh_host(
                predictive_cache=[
                    PredictiveEntry(
                        model_id="video", sha256=SHA, size_mb=5000, cached_at=T0, warmed=True
                    )
                ]
            ),
            T0 - 5,
            "artifact_used",
        ),
        (
            fresh_host(residencies=[{"model_id": "video", "state": "loading", "memory_mb": 100}]),
            T0 - 5,
            "artifact_active",
        ),
        (fresh_host(ownership="manual"), T0 - 5, "host_manual"),
        (
            fresh_host(actuator_capabilities=["load", "warm", "drain", "unload"]),
            T0 - 5,
            "evict_unsupported",
        ),
    ],
)
def test_a_queued_evict_is_revalidated_against_the_latest_heartbeat(
    host: Host, received_at: float, code: str | None
) -> None:
    plan = Plan(solver=SolverReport(engine="hand", status="HAND", wall_ms=0.0))
    holds = revalidate_evictions(
        [evict_command()],
        plan=plan,
        hosts={"h1": host},
        leases={"h1": RouteLease(received_at, 60.0)},
        profiles={},
        now=T0,
        stale_s=90.0,
    )
    assert [h.code for h in holds] == ([] if code is None else [code])
    if code is not None:
        assert holds[0].action_ids == ("evict-1",) and holds[0].reason


def test_an_evict_of_a_model_the_plan_places_there_is_held() -> None:
    plan = Plan(
        assignments=[
            {"model_id": "video", "host_id": "h1", "memory_mb": 12000, "runtime": "llama.cpp"}
        ],
        solver=SolverReport(engine="hand", status="HAND", wall_ms=0.0),
    )
    holds = revalidate_evictions(
        [evict_command()],
        plan=plan,
        hosts={"h1": fresh_host()},
        leases={"h1": RouteLease(T0, 60.0)},
        profiles={},
        now=T0,
        stale_s=90.0,
    )
    assert [h.code for h in holds] == ["planned_here"]
    other_sha = revalidate_evictions(
        [evict_command("d" * 64)],
        plan=None,
        hosts={"h1": fresh_host()},
        leases={"h1": RouteLease(T0, 60.0)},
        profiles={},
        now=T0,
        stale_s=90.0,
    )
    assert [h.code for h in other_sha] == ["no_plan"]
