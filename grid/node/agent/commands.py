"""The side effects of the four commands, through the engine supervisor and the artifact store.

- LOAD verifies the exact GGUF: a catalog file (pre-pulled or shipped) is hashed completely and
  checked against its declared digest and the profile's; a model this host has no matching file
  for is fetched through the artifact store, but only from the three autonomous-transfer fields
  of its profile (exact source, SHA-256, size ceiling), which the command carries from the
  controller; nothing is inferred from a name. `artifact_fetched` is true only when bytes were
  transferred.
- WARM hashes the exact file again (against the same digests) before launch, records the
  residency WARMING durably, starts (or joins) the llama-server child and waits for its
  authenticated readiness probe.
- DRAIN marks a ready residency draining: it stops taking new work; the child keeps running.
- UNLOAD refuses a residency that was not drained, asks the supervisor for a non-forced stop
  (busy or unknown slot activity refuses), and leaves the weights cached.
- A `predictive` LOAD is cache-only: it shows no LOADING row (no memory, no slot) and, when it
  actually downloads, records the artifact's provenance; a WARM marks that record used for good.
- EVICT deletes exactly one unused predictive download, fenced by its SHA-256 (the command's
  `artifact_sha256`): the node refuses with a code and deletes nothing for a SHA it holds no
  predictive record of, a used or live artifact, or an operator's catalog file
  (grid/node/artifacts/provenance.py).

Each method returns an `Outcome`; the caller turns it into a receipt with a monotonic duration.
Residency changes go through `StateKeeper.update`, which persists them before returning.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from grid.fleet import GridError, ReceiptStatus, ResidencyState, WireCommand, WireLaunch
from grid.node.agent.config import NodeConfig
from grid.node.agent.engine_launch import node_launch
from grid.node.agent.state import AgentState, ResidencyRecord, VerifiedArtifact
from grid.node.artifacts import (
    EVICT_TEXT,
    ArtifactSpec,
    ArtifactStore,
    PredictiveRecord,
    evict_refusal,
    sha256_file,
)
from grid.node.engines import EngineState, EngineSupervisor


class StateKeeper(Protocol):
    def update(self, change: Callable[[AgentState], None]) -> None: ...

    def read(self) -> AgentState: ...


@dataclass(frozen=True)
class Outcome:
    status: ReceiptStatus
    message: str
    code: str = ""
    artifact_fetched: bool = False


def _ok(message: str, *, fetched: bool = False) -> Outcome:
    return Outcome(ReceiptStatus.SUCCEEDED, message, artifact_fetched=fetched)


def _failed(code: str, message: str) -> Outcome:
    return Outcome(ReceiptStatus.FAILED, message, code=code)


@dataclass(frozen=True)
class DeclaredArtifact:
    """The model's artifact facts as its profile declares them; every command carries them
    (`artifact_source`, `artifact_sha256`, `artifact_size_mb`, each optional on the wire)."""

    model_id: str
    sha256: str | None = None
    source: str | None = None
    size_mb: int = 0
    chat_template: str | None = None  # the profile's llama.cpp template name, for WARM
    launch: WireLaunch | None = None  # the profile's engine facts, for WARM

    @classmethod
    def from_command(cls, command: WireCommand) -> DeclaredArtifact:
        sha256 = command.artifact_sha256
        return cls(
            command.model_id,
            sha256.lower() if sha256 else None,
            command.artifact_source or None,
            command.artifact_size_mb or 0,
            command.chat_template or None,
            command.launch,
        )

    def transfer(self) -> ArtifactSpec | None:
        """The transfer this declaration authorizes; None when it names no source."""
        if self.source is None:
            return None
        return ArtifactSpec.declared(
            self.model_id, source=self.source, sha256=self.sha256, size_mb=self.size_mb
        )


class CommandExecutor:
    def __init__(
        self,
        config: NodeConfig,
        keeper: StateKeeper,
        supervisor: EngineSupervisor,
        artifacts: ArtifactStore,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.keeper = keeper
        self.supervisor = supervisor
        self.artifacts = artifacts
        self.clock = clock

    def run(self, command: WireCommand) -> Outcome:
        kind, model_id = command.kind, command.model_id
        try:
            if kind == "load":
                declared = DeclaredArtifact.from_command(command)
                return self.load(declared, predictive=command.predictive)
            if kind == "warm":
                return self.warm(DeclaredArtifact.from_command(command), command.memory_mb)
            if kind == "drain":
                return self.drain(model_id)
            if kind == "evict":
                return self.evict(model_id, command.artifact_sha256)
            return self.unload(model_id)
        except GridError as err:
            return _failed(err.code, err.message)
        except OSError as exc:
            return _failed("node_io_error", f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ artifacts

    def _verified(self, declared: DeclaredArtifact) -> tuple[VerifiedArtifact | None, bool]:
        """The exact artifact, hashed now; (None, False) when this host has no file for it.

        Returns (artifact, fetched). Tries, in order: an artifact verified earlier (a fetched
        one), the catalog, then a transfer the declaration authorizes. A file whose digest
        differs from the profile's is never used (a new revision is fetched when authorized).
        """
        model_id, wanted = declared.model_id, declared.sha256
        known = self.keeper.read().artifacts.get(model_id)
        if (
            known is not None
            and wanted in (None, known.sha256)
            and _hash_matches(Path(known.path), known.sha256)
        ):
            return known, False
        entry = self.config.catalog_entry(model_id)
        if entry is not None:
            path = Path(entry.path)
            if not path.is_file():
                raise GridError(
                    "artifact_missing",
                    f"the catalog file {path} for {model_id} does not exist",
                    fix="restore the file, or correct the node's catalog",
                    next_command=f"ls -l {path}",
                )
            digest = sha256_file(path)
            if entry.sha256 is not None and digest != entry.sha256:
                raise GridError(
                    "artifact_digest_mismatch",
                    f"{path} has SHA-256 {digest}, not the declared {entry.sha256}",
                    fix="replace the file with the exact artifact",
                    next_command=f"sha256sum {path}",
                )
            if wanted in (None, digest):
                return _artifact(model_id, path, digest), False
            if declared.source is None:
                raise GridError(
                    "artifact_digest_mismatch",
                    f"{path} has SHA-256 {digest}, but the profile of {model_id} declares {wanted}",
                    fix="replace the catalog file with that revision, or declare its source",
                    next_command=f"sha256sum {path}",
                )
        spec = declared.transfer()
        if spec is None:
            return None, False
        result = self.artifacts.ensure(spec)
        return _artifact(model_id, result.path, result.sha256), result.artifact_fetched

    def load(self, declared: DeclaredArtifact, *, predictive: bool = False) -> Outcome:
        model_id = declared.model_id
        before = self.keeper.read().residencies.get(model_id)
        if not predictive and (before is None or before.state is ResidencyState.CACHED):
            self._set(model_id, ResidencyState.LOADING, keep_from=before)
        try:
            artifact, fetched = self._verified(declared)
        except GridError:
            self._restore(model_id, before)
            raise
        if artifact is None:
            self._restore(model_id, before)
            return _failed(
                "artifact_unknown",
                f"this host has no file for {model_id} and its profile authorizes no transfer",
            )

        now = self.clock()

        def publish(state: AgentState) -> None:
            state.artifacts[model_id] = artifact
            if fetched and predictive:
                state.predictive[model_id] = PredictiveRecord(
                    model_id=model_id,
                    sha256=artifact.sha256,
                    path=artifact.path,
                    size_bytes=artifact.size_bytes,
                    fetched_at=now,
                )
            elif fetched:  # a demanded download replaces whatever a prediction fetched before
                state.predictive.pop(model_id, None)
            current = state.residencies.get(model_id)
            if current is None or current.state in (ResidencyState.LOADING, ResidencyState.CACHED):
                state.residencies[model_id] = _cached(model_id, artifact)

        self.keeper.update(publish)
        verb = "fetched and verified" if fetched else "verified"
        name = Path(artifact.path).name
        return _ok(f"{verb} {name} (sha256 {artifact.sha256[:12]})", fetched=fetched)

    # ------------------------------------------------------------------ engines

    def warm(self, declared: DeclaredArtifact, memory_mb: int) -> Outcome:
        model_id = declared.model_id
        before = self.keeper.read().residencies.get(model_id)
        if before is not None and before.state in (ResidencyState.READY, ResidencyState.WARMING):
            status = self.supervisor.status(model_id)
            if status is not None and status.proven and status.state is EngineState.READY:
                return _ok(f"{model_id} is already ready on port {status.port}")
        if before is not None and before.state in (ResidencyState.DRAINING, ResidencyState.FAILED):
            return _failed(
                "residency_not_reusable",
                f"{model_id} is {before.state.value} here; it must be unloaded before a new warm",
            )
        artifact, _fetched = self._verified(declared)
        if artifact is None:
            return _failed(
                "artifact_not_cached",
                f"{model_id} is not cached on this host; a load must come first",
            )

        def warming(state: AgentState) -> None:
            state.artifacts[model_id] = artifact
            record = state.predictive.get(model_id)
            if record is not None and record.sha256 == artifact.sha256:
                state.predictive[model_id] = record.model_copy(update={"warmed": True})
            state.residencies[model_id] = ResidencyRecord(
                model_id=model_id,
                state=ResidencyState.WARMING,
                memory_mb=memory_mb,
                model_path=artifact.path,
                artifact_sha256=artifact.sha256,
            )

        self.keeper.update(warming)
        spec = node_launch(self.config, model_id, declared.launch, declared.chat_template)
        try:
            status = self.supervisor.warm(
                model_id, Path(artifact.path), chat_template=declared.chat_template, spec=spec
            )
        except GridError as err:
            self._after_engine_failure(model_id, artifact, err.message)
            raise
        now = self.clock()

        def ready(state: AgentState) -> None:
            record = state.residencies[model_id]
            state.residencies[model_id] = record.model_copy(
                update={"state": ResidencyState.READY, "loaded_at": now, "reason": ""}
            )

        self.keeper.update(ready)
        return _ok(f"{model_id} answers readiness on port {status.port} (pid {status.pid})")

    def restart_for_settings(self, model_id: str, launch: WireLaunch) -> Outcome:
        """A READY child whose command line the current settings change is restarted: it leaves
        the routes (WARMING), drains (busy slots refuse: it stays READY and the next reply
        tries again), stops and starts with the new command line (docs/engines.md)."""
        record = self.keeper.read().residencies.get(model_id)
        if record is None or record.state is not ResidencyState.READY or not record.model_path:
            return _ok(f"{model_id} is not ready here: nothing to restart")
        spec = node_launch(self.config, model_id, launch, launch.chat_template, record.model_path)
        if not self.supervisor.settings_changed(model_id, spec):
            return _ok(f"{model_id} already runs with these settings")
        self._set(model_id, ResidencyState.WARMING, keep_from=record, reason="settings changed")
        try:
            status = self.supervisor.warm(
                model_id, Path(record.model_path), chat_template=spec.chat_template, spec=spec
            )
        except GridError as err:
            if err.code in ("engine_busy", "engine_activity_unknown"):
                self._set(model_id, ResidencyState.READY, keep_from=record)
                return _failed(err.code, err.message)
            artifact = self.keeper.read().artifacts.get(model_id)
            if artifact is not None:
                self._after_engine_failure(model_id, artifact, err.message)
            return _failed(err.code, err.message)
        self._set(model_id, ResidencyState.READY, keep_from=record)
        return _ok(f"{model_id} restarted with its new settings on port {status.port}")

    def drain(self, model_id: str) -> Outcome:
        record = self.keeper.read().residencies.get(model_id)
        if record is None or record.state is not ResidencyState.READY:
            shown = "absent" if record is None else record.state.value
            return _ok(f"{model_id} is {shown} here: nothing to drain")

        def draining(state: AgentState) -> None:
            current = state.residencies[model_id]
            state.residencies[model_id] = current.model_copy(
                update={"state": ResidencyState.DRAINING, "reason": "drained by the controller"}
            )

        self.keeper.update(draining)
        return _ok(f"{model_id} takes no new requests")

    def unload(self, model_id: str, *, force: bool = False) -> Outcome:
        record = self.keeper.read().residencies.get(model_id)
        if record is None or record.state is ResidencyState.CACHED:
            return _ok(f"{model_id} holds no memory here")
        if record.state is ResidencyState.READY and not force:
            return _failed(
                "not_drained", f"{model_id} is still ready; it must be drained before an unload"
            )
        try:
            result = self.supervisor.stop(
                model_id, force=force, drain_timeout_s=self.config.drain_timeout_s
            )
        except GridError as err:
            if err.code == "engine_unproven_process":
                self._set(model_id, ResidencyState.FAILED, keep_from=record, reason=err.message)
            raise
        artifact = self.keeper.read().artifacts.get(model_id)
        self._release(model_id, artifact)
        if result.stopped:
            how = " (SIGKILL after the grace period)" if result.killed else ""
            return _ok(f"stopped {model_id} (pid {result.pid}){how}; its weights stay cached")
        return _ok(f"{model_id} had no running engine; its weights stay cached")

    def evict(self, model_id: str, sha256: str | None) -> Outcome:
        """Delete exactly the unused predictive download of `sha256` (nothing else, ever)."""
        state = self.keeper.read()
        record = state.predictive.get(model_id)
        residency = state.residencies.get(model_id)
        catalog = [e.path for e in self.config.catalog]
        code = evict_refusal(
            record, sha256, residency.state if residency is not None else None, catalog
        )
        if code is not None:
            return _failed(code, f"{model_id}: {EVICT_TEXT[code]}; nothing was deleted")
        assert record is not None and sha256 is not None
        try:
            reclaimed = self.artifacts.evict(Path(record.path), sha256)
        except GridError as err:
            if err.code == "evict_not_held":

                def forget(draft: AgentState) -> None:  # the file is gone: so is its record
                    draft.predictive.pop(model_id, None)

                self.keeper.update(forget)
            raise

        def evicted(draft: AgentState) -> None:
            draft.predictive.pop(model_id, None)
            known = draft.artifacts.get(model_id)
            if known is not None and known.path == record.path:
                draft.artifacts.pop(model_id)
            current = draft.residencies.get(model_id)
            if current is not None and current.state is ResidencyState.CACHED:
                draft.residencies.pop(model_id)

        self.keeper.update(evicted)
        return _ok(
            f"evicted {Path(record.path).name} (sha256 {sha256[:12]}): {reclaimed} bytes reclaimed"
        )

    # ------------------------------------------------------------------ residency helpers

    def _set(
        self,
        model_id: str,
        state_value: ResidencyState,
        *,
        keep_from: ResidencyRecord | None,
        reason: str = "",
    ) -> None:
        def change(state: AgentState) -> None:
            base = keep_from or ResidencyRecord(model_id=model_id, state=state_value)
            state.residencies[model_id] = base.model_copy(
                update={"state": state_value, "reason": reason}
            )

        self.keeper.update(change)

    def _restore(self, model_id: str, before: ResidencyRecord | None) -> None:
        def change(state: AgentState) -> None:
            if before is None:
                state.residencies.pop(model_id, None)
            else:
                state.residencies[model_id] = before

        self.keeper.update(change)

    def _release(self, model_id: str, artifact: VerifiedArtifact | None) -> None:
        """No process remains: the residency becomes cached (or disappears without weights)."""

        def change(state: AgentState) -> None:
            if artifact is None:
                state.residencies.pop(model_id, None)
                return
            state.residencies[model_id] = _cached(model_id, artifact)

        self.keeper.update(change)

    def _after_engine_failure(self, model_id: str, artifact: VerifiedArtifact, why: str) -> None:
        """A failed warm: a process the supervisor still holds keeps the residency FAILED
        (its memory stays claimed); otherwise nothing runs and the weights stay cached."""
        status = self.supervisor.status(model_id)
        if status is not None and status.pid is not None:

            def failed(state: AgentState) -> None:
                current = state.residencies.get(model_id)
                if current is not None:
                    state.residencies[model_id] = current.model_copy(
                        update={"state": ResidencyState.FAILED, "reason": why[:300]}
                    )

            self.keeper.update(failed)
            return
        self._release(model_id, artifact)


def _cached(model_id: str, artifact: VerifiedArtifact) -> ResidencyRecord:
    """The residency of weights on disk with no engine: CACHED at the artifact's path."""
    return ResidencyRecord(
        model_id=model_id,
        state=ResidencyState.CACHED,
        model_path=artifact.path,
        artifact_sha256=artifact.sha256,
    )


def _artifact(model_id: str, path: Path, sha256: str) -> VerifiedArtifact:
    stat = path.stat()
    return VerifiedArtifact(
        model_id=model_id,
        path=str(path.absolute()),
        sha256=sha256,
        size_bytes=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
    )


def _hash_matches(path: Path, sha256: str) -> bool:
    try:
        return path.is_file() and sha256_file(path) == sha256
    except OSError:
        return False
