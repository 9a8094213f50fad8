"""Artifact store: verify cached GGUFs by SHA-256; fetch, resume, verify and publish new ones.

A transfer needs three operator-declared facts (spec, "Managed host actuator"): an exact source
(`hf://owner/repo/path.gguf`, mapped onto a configured base URL, or `file:///abs/path.gguf`), an
immutable SHA-256, and a size ceiling. Nothing is inferred from a display name.

Layout under `cache_dir`:
    models/<model_id>/<file name>   published, verified artifacts (what engines load)
    staging/<sha256>.partial        bytes received so far, named by the declared digest so a
                                    resumed transfer continues the same artifact
    staging/<sha256>.lock           serializes two fetches of the same artifact

A published file changes only by an atomic rename of a staging file whose complete SHA-256 was
checked; a wrong digest deletes the staging file and leaves the published cache as it was.
Errors are GridError with codes artifact_*:
    artifact_spec_invalid, artifact_source_not_authorized, artifact_source_not_configured,
    artifact_source_missing, artifact_too_large, artifact_disk_full, artifact_http_error,
    artifact_transfer_interrupted, artifact_digest_mismatch, artifact_io_error; `evict`
    adds artifact_not_in_cache and evict_not_held.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

from grid.fleet import GridError, ModelProfile, fsync_dir
from grid.node.artifacts.transfer import HttpTransfer, copy_file_resumable

MIB = 1024 * 1024
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_HF_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def sha256_file(path: Path, block_bytes: int = 4 * MIB) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(block_bytes):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class ArtifactSpec:
    model_id: str
    source: str  # hf://owner/repo/path.gguf or file:///absolute/path.gguf
    sha256: str
    max_size_bytes: int

    @classmethod
    def from_profile(cls, profile: ModelProfile) -> ArtifactSpec:
        """The transfer a profile authorizes; refused unless it declares all three fields."""
        return cls.declared(
            profile.model_id,
            source=profile.artifact_source,
            sha256=profile.artifact_sha256,
            size_mb=profile.artifact_size_mb,
        )

    @classmethod
    def declared(
        cls, model_id: str, *, source: str | None, sha256: str | None, size_mb: int
    ) -> ArtifactSpec:
        """The transfer three declared facts authorize (as a profile or a command carries them);
        refused unless all three are present."""
        if not (source and sha256 and size_mb > 0):
            raise GridError(
                code="artifact_source_not_authorized",
                message=(
                    f"Profile {model_id} does not authorize a transfer: it needs "
                    "artifact_source, artifact_sha256 and artifact_size_mb together."
                ),
                fix="Declare all three fields in the profile, or place the verified GGUF "
                "in the cache by hand.",
                next_command=(
                    f"grid allocator model set {model_id} --memory-mb MB --artifact-source SOURCE "
                    "--artifact-sha256 SHA256 --artifact-size-mb MB"
                ),
            )
        return cls(model_id=model_id, source=source, sha256=sha256, max_size_bytes=size_mb * MIB)


@dataclass(frozen=True)
class ArtifactResult:
    model_id: str
    path: Path
    sha256: str
    size_bytes: int
    artifact_fetched: bool  # True only when this call transferred bytes and published them
    resumed_from_bytes: int = 0  # bytes reused from an earlier partial transfer
    attempts: int = 0  # transfer attempts made by this call (0 when the cache was valid)


@dataclass(frozen=True)
class _Source:
    scheme: str  # "hf" or "file"
    file_name: str
    hf_path: str = ""  # owner/repo/path.gguf
    local_path: Path | None = None


def _invalid(message: str, code: str = "artifact_spec_invalid") -> GridError:
    return GridError(
        code=code,
        message=message,
        fix="Use an exact hf://owner/repo/path.gguf or file:///absolute/path.gguf source.",
    )


def parse_source(source: str) -> _Source:
    """Validate an exact artifact source; no query, fragment, wildcard or relative segment."""
    parts = urlsplit(source)
    if parts.query or parts.fragment or "%" in source or "\\" in source:
        raise _invalid(f"Artifact source {source!r} must be exact (no query or escapes).")
    if parts.scheme == "hf":
        segments = [parts.netloc, *parts.path.split("/")[1:]]
        if len(segments) < 3 or any(s in ("", ".", "..") for s in segments):
            raise _invalid(f"{source!r} is not hf://owner/repo/path.gguf.")
        if not (_HF_NAME_RE.match(segments[0]) and _HF_NAME_RE.match(segments[1])):
            raise _invalid(f"{source!r} has an invalid owner or repository name.")
        if not segments[-1].endswith(".gguf"):
            raise _invalid(f"{source!r} does not name a .gguf file.")
        return _Source("hf", segments[-1], hf_path="/".join(segments))
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise _invalid(f"{source!r} names a remote host; file:// must be local.")
        path = Path(unquote(parts.path))
        if not path.is_absolute() or ".." in path.parts or not path.name.endswith(".gguf"):
            raise _invalid(f"{source!r} is not an absolute path to a .gguf file.")
        return _Source("file", path.name, local_path=path)
    raise _invalid(
        f"Artifact source scheme {parts.scheme or '(none)'!r} is not authorized.",
        code="artifact_source_not_authorized",
    )


def _validate_spec(spec: ArtifactSpec) -> _Source:
    if not _SHA_RE.match(spec.sha256):
        raise _invalid(f"artifact_sha256 {spec.sha256!r} is not 64 lowercase hex digits.")
    if spec.max_size_bytes <= 0:
        raise _invalid("The artifact size ceiling must be positive.")
    if not spec.model_id or "/" in spec.model_id or spec.model_id in (".", ".."):
        raise _invalid(f"Model id {spec.model_id!r} cannot name a cache folder.")
    return parse_source(spec.source)


class ArtifactStore:
    """Side-effect wrapper for the node's GGUF cache."""

    def __init__(
        self,
        cache_dir: Path,
        *,
        hf_base_url: str | None = None,
        hf_revision: str = "main",
        http: httpx.Client | None = None,
        max_attempts: int = 3,
        timeout_s: float = 30.0,
    ) -> None:
        self.cache_dir = cache_dir
        self._hf_base_url = hf_base_url.rstrip("/") if hf_base_url else None
        self._hf_revision = hf_revision
        self._http = http or httpx.Client(trust_env=False, timeout=timeout_s)
        self._max_attempts = max(1, max_attempts)

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ paths

    def published_path(self, spec: ArtifactSpec) -> Path:
        source = _validate_spec(spec)
        return self.cache_dir / "models" / spec.model_id / source.file_name

    def staging_path(self, sha256: str) -> Path:
        return self.cache_dir / "staging" / f"{sha256}.partial"

    def source_url(self, spec: ArtifactSpec) -> str:
        source = _validate_spec(spec)
        if source.scheme != "hf":
            raise _invalid(f"{spec.source!r} is not an hf:// source.")
        if self._hf_base_url is None:
            raise GridError(
                code="artifact_source_not_configured",
                message="No base URL is configured for hf:// artifact sources.",
                fix="Configure the hf base URL of the node (an operator-approved mirror).",
            )
        owner, repo, path = source.hf_path.split("/", 2)
        return f"{self._hf_base_url}/{owner}/{repo}/resolve/{self._hf_revision}/{path}"

    # ------------------------------------------------------------------ verify

    @staticmethod
    def verify(path: Path, sha256: str) -> bool:
        """True when `path` is a regular file whose complete SHA-256 is `sha256`."""
        try:
            return path.is_file() and sha256_file(path) == sha256.lower()
        except OSError:
            return False

    def verified_cached(self, spec: ArtifactSpec) -> Path | None:
        path = self.published_path(spec)
        return path if self.verify(path, spec.sha256) else None

    # ------------------------------------------------------------------ ensure

    def ensure(self, spec: ArtifactSpec) -> ArtifactResult:
        """The verified cached artifact, fetching it first when the cache lacks or mismatches it."""
        source = _validate_spec(spec)
        published = self.published_path(spec)
        if self.verify(published, spec.sha256):
            return ArtifactResult(
                spec.model_id, published, spec.sha256, published.stat().st_size, False
            )
        staging = self.staging_path(spec.sha256)
        try:
            staging.parent.mkdir(parents=True, exist_ok=True)
            published.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _io_error(exc, self.cache_dir) from exc
        with _exclusive(staging.with_suffix(".lock")):
            # Another fetch of the same artifact may have published it while we waited.
            if self.verify(published, spec.sha256):
                return ArtifactResult(
                    spec.model_id, published, spec.sha256, published.stat().st_size, False
                )
            resumed_from = staging.stat().st_size if staging.exists() else 0
            attempts = self._transfer(spec, source, staging)
            self._verify_and_publish(spec, staging, published)
        return ArtifactResult(
            spec.model_id,
            published,
            spec.sha256,
            published.stat().st_size,
            True,
            resumed_from_bytes=resumed_from,
            attempts=attempts,
        )

    def _transfer(self, spec: ArtifactSpec, source: _Source, staging: Path) -> int:
        try:
            if source.scheme == "file":
                assert source.local_path is not None
                copy_file_resumable(source.local_path, staging, spec.max_size_bytes)
                return 1
            transfer = HttpTransfer(
                self._http,
                url=self.source_url(spec),
                staging=staging,
                max_size_bytes=spec.max_size_bytes,
                max_attempts=self._max_attempts,
            )
            return transfer.run()
        except OSError as exc:
            raise _io_error(exc, staging) from exc

    def _verify_and_publish(self, spec: ArtifactSpec, staging: Path, published: Path) -> None:
        try:
            digest = sha256_file(staging)
        except OSError as exc:
            raise _io_error(exc, staging) from exc
        if digest != spec.sha256:
            # These bytes can never become the declared artifact: resuming them is pointless.
            with contextlib.suppress(OSError):
                staging.unlink()
            raise GridError(
                code="artifact_digest_mismatch",
                message=(
                    f"The artifact fetched for {spec.model_id} from {spec.source} has SHA-256 "
                    f"{digest}, not the declared {spec.sha256}; the cache was left unchanged."
                ),
                fix="Check the source and the declared digest in the profile.",
                details={"observed_sha256": digest},
            )
        try:
            os.replace(staging, published)
            fsync_dir(published.parent)
        except OSError as exc:
            raise _io_error(exc, published) from exc

    # ------------------------------------------------------------------ evict

    def evict(self, path: Path, sha256: str) -> int:
        """Delete exactly the published file `path` if its complete SHA-256 is `sha256` (the
        exact-SHA fence); returns the bytes reclaimed. Refuses a file outside this cache's
        published folder (`artifact_not_in_cache`), a missing file (`evict_not_held`) and a
        digest mismatch (`artifact_digest_mismatch`); nothing is deleted then."""
        models = (self.cache_dir / "models").resolve()
        target = path.resolve()
        if models not in target.parents:
            raise GridError(
                code="artifact_not_in_cache",
                message=f"{path} is not a published artifact of the cache {self.cache_dir}.",
                fix="Only downloads of this cache can be evicted; remove other files by hand.",
                next_command=f"ls -l {path}",
            )
        if not target.is_file():
            raise GridError(
                code="evict_not_held",
                message=f"{path} is not on disk; nothing was deleted.",
                fix="Nothing to do: the controller sees the missing file at the next heartbeat.",
            )
        digest = sha256_file(target)
        if digest != sha256.lower():
            raise GridError(
                code="artifact_digest_mismatch",
                message=f"{path} has SHA-256 {digest}, not {sha256}; it was not deleted.",
                fix="Check the file; an evict deletes only the exact artifact it names.",
                next_command=f"sha256sum {path}",
            )
        size = target.stat().st_size
        try:
            target.unlink()
            fsync_dir(target.parent)
            with contextlib.suppress(OSError):
                target.parent.rmdir()  # the model's folder, when nothing else is left there
        except OSError as exc:
            raise _io_error(exc, target) from exc
        return size


def _io_error(exc: OSError, where: Path) -> GridError:
    return GridError(
        code="artifact_io_error",
        message=f"File-system error in the artifact cache at {where}: {exc}.",
        fix="Check free disk space and permissions of the cache folder.",
        next_command=f"df -h {where.parent}",
    )


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
