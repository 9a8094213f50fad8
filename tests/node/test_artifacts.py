"""Artifact store against a local mirror serving a generated GGUF-shaped file.

The store moves and hashes bytes without reading them, so a small generated file (a few MiB of
seeded random bytes, not a multiple of any block size) exercises it as well as the 98 MB
weights would, and needs no installed weight package. Every expected digest is computed here with
hashlib from the source bytes, independently of the store's own hashing; cut points and
ceilings are derived from the file's size.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.node.artifacts import ArtifactSpec, ArtifactStore
from tests.node.artifact_server import FakeMirror, MirrorServer

pytestmark = pytest.mark.service

HF_SOURCE = "hf://HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct.Q4_1.gguf"
URL_PATH = "/HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "smollm2-135m"


GENERATED_BYTES = 6 * 1024 * 1024 + 123  # spans several transfer blocks, ends mid-block
OTHER_REVISION_SHA256 = hashlib.sha256(b"another revision of the weights").hexdigest()


@pytest.fixture(scope="module")
def real_gguf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """A generated file standing in for a GGUF: (path, SHA-256, size)."""
    path = tmp_path_factory.mktemp("weights") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    data = b"GGUF" + random.Random(20261201).randbytes(GENERATED_BYTES - 4)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest(), len(data)


@pytest.fixture
def mirror(real_gguf: tuple[Path, str, int]) -> Iterator[tuple[FakeMirror, str]]:
    fake = FakeMirror(files={URL_PATH: real_gguf[0]})
    with MirrorServer(fake) as server:
        yield fake, server.base_url


def _spec(sha: str, ceiling: int, source: str = HF_SOURCE) -> ArtifactSpec:
    return ArtifactSpec(model_id=MODEL_ID, source=source, sha256=sha, max_size_bytes=ceiling)


def _store(tmp_path: Path, base_url: str, max_attempts: int = 3) -> ArtifactStore:
    return ArtifactStore(tmp_path / "cache", hf_base_url=base_url, max_attempts=max_attempts)


def test_fetch_publishes_verified_file_and_second_call_transfers_nothing(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    fake, base_url = mirror
    _, sha, size = real_gguf
    store = _store(tmp_path, base_url)
    first = store.ensure(_spec(sha, size))  # a ceiling equal to the size is allowed
    assert first.artifact_fetched is True
    assert first.size_bytes == size
    assert hashlib.sha256(first.path.read_bytes()).hexdigest() == sha
    assert [r.path for r in fake.requests] == [URL_PATH]
    assert not store.staging_path(sha).exists()

    second = store.ensure(_spec(sha, size))
    assert second.artifact_fetched is False
    assert second.path == first.path
    assert len(fake.requests) == 1  # verified from the cache, no transfer


def test_cut_connection_resumes_with_range_within_one_call(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    fake, base_url = mirror
    _, sha, size = real_gguf
    cut = 2 * 1024 * 1024 + 17
    fake.knobs.cut_after_bytes, fake.knobs.cuts_remaining = cut, 1
    result = _store(tmp_path, base_url, max_attempts=3).ensure(_spec(sha, size))
    assert result.artifact_fetched is True
    assert result.attempts == 2
    assert [r.range_header for r in fake.requests] == [None, f"bytes={cut}-"]
    assert [r.status for r in fake.requests] == [200, 206]
    assert fake.body_bytes_sent == size  # nothing was downloaded twice
    assert hashlib.sha256(result.path.read_bytes()).hexdigest() == sha


def test_partial_survives_a_failed_call_and_the_next_call_resumes_it(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    fake, base_url = mirror
    _, sha, size = real_gguf
    cut = size // 3
    fake.knobs.cut_after_bytes, fake.knobs.cuts_remaining = cut, 1
    store = _store(tmp_path, base_url, max_attempts=1)
    with pytest.raises(GridError) as failure:
        store.ensure(_spec(sha, size))
    assert failure.value.code == "artifact_transfer_interrupted"
    assert failure.value.details["partial_bytes"] == cut
    assert store.staging_path(sha).stat().st_size == cut
    assert not store.published_path(_spec(sha, size)).exists()

    result = store.ensure(_spec(sha, size))
    assert result.artifact_fetched is True
    assert result.resumed_from_bytes == cut
    assert fake.requests[-1].range_header == f"bytes={cut}-"
    assert hashlib.sha256(result.path.read_bytes()).hexdigest() == sha


def test_declared_length_above_ceiling_is_refused(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    _, base_url = mirror
    _, sha, size = real_gguf
    store = _store(tmp_path, base_url)
    with pytest.raises(GridError) as failure:
        store.ensure(_spec(sha, size - 1))
    assert failure.value.code == "artifact_too_large"
    assert not store.staging_path(sha).exists()
    assert not store.published_path(_spec(sha, size - 1)).exists()


def test_stream_without_length_is_cut_at_the_ceiling(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    fake, base_url = mirror
    _, sha, _ = real_gguf
    fake.knobs.omit_length = True
    ceiling = 2 * 1024 * 1024
    store = _store(tmp_path, base_url)
    with pytest.raises(GridError) as failure:
        store.ensure(_spec(sha, ceiling))
    assert failure.value.code == "artifact_too_large"
    assert not store.staging_path(sha).exists()  # oversized bytes are never kept


def test_wrong_digest_is_rejected_and_the_prior_cache_is_untouched(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    _, base_url = mirror
    _, real_sha, size = real_gguf
    store = _store(tmp_path, base_url)
    # The profile declares another digest for this source: the served bytes can't match.
    spec = _spec(OTHER_REVISION_SHA256, size)
    published = store.published_path(spec)
    published.parent.mkdir(parents=True)
    published.write_bytes(b"prior cached version")
    before = (published.stat().st_ino, published.read_bytes())

    with pytest.raises(GridError) as failure:
        store.ensure(spec)
    assert failure.value.code == "artifact_digest_mismatch"
    assert failure.value.details["observed_sha256"] == real_sha
    assert (published.stat().st_ino, published.read_bytes()) == before
    assert not store.staging_path(OTHER_REVISION_SHA256).exists()


def test_file_source_copies_verifies_and_reports_fetched_once(
    tmp_path: Path, real_gguf: tuple[Path, str, int]
) -> None:
    path, sha, size = real_gguf
    local = tmp_path / "share" / path.name
    local.parent.mkdir()
    shutil.copyfile(path, local)
    store = ArtifactStore(tmp_path / "cache")  # no hf base URL needed for file://
    spec = _spec(sha, size, source=local.as_uri())
    first = store.ensure(spec)
    assert first.artifact_fetched is True
    assert os.path.samefile(first.path, store.published_path(spec))
    assert hashlib.sha256(first.path.read_bytes()).hexdigest() == sha
    assert store.ensure(spec).artifact_fetched is False

    with pytest.raises(GridError) as failure:
        ArtifactStore(tmp_path / "other").ensure(_spec(sha, size - 1, source=local.as_uri()))
    assert failure.value.code == "artifact_too_large"


def test_corrupted_cache_is_refetched(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    fake, base_url = mirror
    _, sha, size = real_gguf
    store = _store(tmp_path, base_url)
    published = store.ensure(_spec(sha, size)).path
    with published.open("r+b") as handle:  # flip one byte of the cached file
        handle.seek(size // 2)
        byte = handle.read(1)
        handle.seek(size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert store.verified_cached(_spec(sha, size)) is None
    again = store.ensure(_spec(sha, size))
    assert again.artifact_fetched is True
    assert len(fake.requests) == 2
    assert hashlib.sha256(again.path.read_bytes()).hexdigest() == sha


def test_http_error_status_is_a_grid_error(
    tmp_path: Path, mirror: tuple[FakeMirror, str], real_gguf: tuple[Path, str, int]
) -> None:
    fake, base_url = mirror
    _, sha, size = real_gguf
    fake.knobs.force_status = 404
    with pytest.raises(GridError) as failure:
        _store(tmp_path, base_url).ensure(_spec(sha, size))
    assert failure.value.code == "artifact_http_error"
