"""Which artifact sources and specs the store accepts, without any transfer."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.fleet.models import ModelProfile
from grid.node.artifacts import MIB, ArtifactSpec, ArtifactStore, parse_source

pytestmark = pytest.mark.unit

SHA = "ab" * 32


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("https://example.invalid/x.gguf", "artifact_source_not_authorized"),
        ("s3://bucket/x.gguf", "artifact_source_not_authorized"),
        ("owner/repo/x.gguf", "artifact_source_not_authorized"),
        ("hf://owner/repo", "artifact_spec_invalid"),
        ("hf://owner/repo/../x.gguf", "artifact_spec_invalid"),
        ("hf://owner/repo/x.bin", "artifact_spec_invalid"),
        ("hf://owner/repo/x.gguf?download=1", "artifact_spec_invalid"),
        ("hf://owner/repo/x%2F.gguf", "artifact_spec_invalid"),
        ("hf://-owner/repo/x.gguf", "artifact_spec_invalid"),
        ("file://remote-host/srv/x.gguf", "artifact_spec_invalid"),
        ("file:///srv/../etc/x.gguf", "artifact_spec_invalid"),
    ],
)
def test_inexact_or_unauthorized_sources_are_refused(source: str, code: str) -> None:
    with pytest.raises(GridError) as failure:
        parse_source(source)
    assert failure.value.code == code


def test_hf_source_maps_onto_the_configured_base_url() -> None:
    store = ArtifactStore(Path("/nonexistent"), hf_base_url="http://127.0.0.1:9/mirror/")
    spec = ArtifactSpec("m", "hf://org/repo/sub/dir/m.Q4.gguf", SHA, MIB)
    assert (
        store.source_url(spec)
        == "http://127.0.0.1:9/mirror/org/repo/resolve/main/sub/dir/m.Q4.gguf"
    )
    assert store.published_path(spec) == Path("/nonexistent/models/m/m.Q4.gguf")


def test_hf_source_without_a_base_url_is_not_configured() -> None:
    store = ArtifactStore(Path("/nonexistent"))
    with pytest.raises(GridError) as failure:
        store.source_url(ArtifactSpec("m", "hf://org/repo/m.gguf", SHA, MIB))
    assert failure.value.code == "artifact_source_not_configured"


@pytest.mark.parametrize(
    ("sha", "ceiling", "model_id"),
    [("AB" * 32, MIB, "m"), ("ab" * 31, MIB, "m"), (SHA, 0, "m"), (SHA, MIB, "../m")],
)
def test_malformed_specs_are_refused(sha: str, ceiling: int, model_id: str) -> None:
    store = ArtifactStore(Path("/nonexistent"), hf_base_url="http://127.0.0.1:9")
    with pytest.raises(GridError) as failure:
        store.ensure(ArtifactSpec(model_id, "hf://org/repo/m.gguf", sha, ceiling))
    assert failure.value.code == "artifact_spec_invalid"


def test_profile_authorizes_a_transfer_only_with_all_three_fields() -> None:
    complete = ModelProfile(
        model_id="m",
        memory_mb=100,
        artifact_source="hf://org/repo/m.gguf",
        artifact_sha256=SHA,
        artifact_size_mb=250,
    )
    spec = ArtifactSpec.from_profile(complete)
    assert spec.source == complete.artifact_source
    assert (spec.sha256, spec.max_size_bytes) == (SHA, 250 * MIB)
    for missing, empty in (
        ("artifact_source", None),
        ("artifact_sha256", None),
        ("artifact_size_mb", 0),
    ):
        partial = complete.model_copy(update={missing: empty})
        with pytest.raises(GridError) as failure:
            ArtifactSpec.from_profile(partial)
        assert failure.value.code == "artifact_source_not_authorized"
