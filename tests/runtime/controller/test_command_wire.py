"""What a node receives: every command carries the model's artifact facts from its profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.runtime.controller.status import status_document
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

SHA = "cd" * 32


def test_commands_carry_the_profiles_artifact_source_digest_and_size(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [FakeNode("h1", capacity_mb=16384, cached={"local"})])
    fleet.register_all()
    fleet.ctl.put_profile(
        "fetched",
        profile(
            min_replicas=1,
            artifact_source="hf://org/repo/fetched.Q4.gguf",
            artifact_sha256=SHA.upper(),  # the profile canonicalises it
            artifact_size_mb=300,
        ),
        fleet.now,
    )
    fleet.ctl.put_profile("local", profile(min_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)

    pending = status_document(fleet.ctl, fleet.now).model_dump(mode="json")["pending_commands"]
    got = fleet.ctl.poll_commands("h1", fleet.ctl.success_revision, fleet.now).commands

    for rows in (got, pending):
        by_model: dict[str, list[tuple[str | None, str | None, int | None]]] = {}
        for c in rows:
            facts = (c["artifact_source"], c["artifact_sha256"], c["artifact_size_mb"])
            by_model.setdefault(c["model_id"], []).append(facts)
        assert sorted(by_model) == ["fetched", "local"]
        assert set(by_model["fetched"]) == {("hf://org/repo/fetched.Q4.gguf", SHA, 300)}
        assert set(by_model["local"]) == {(None, None, 0)}  # nothing declared, nothing to fetch
    assert {c["kind"] for c in got} >= {"load", "warm"}
