"""What `grid test start|status|watch` read from the logical fleet's status document.

Pure readings of `LogicalFleet.status()` (the controller's status plus each node's report):
each node's state line, the model's READY hosts, and failed starts with their stable code and
the engine's reason. `start` fails fast on those: when the model is READY nowhere, a LOAD or
WARM of it failed, and none is in flight, waiting longer only waits for the retry backoff.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from grid.fleet import CONSTRUCTIVE_KINDS

OPEN = ("pending", "delivered", "running")
_CODE = re.compile(r"^([a-z][a-z0-9_]+): (.*)$", re.S)


@dataclass(frozen=True)
class Failure:
    host_id: str
    kind: str
    model_id: str
    code: str
    reason: str
    attempt: int
    finished_at: float | None

    def line(self) -> str:
        return f"{self.kind} {self.model_id}@{self.host_id}: {self.code}: {self.reason}"


def split_outcome(outcome: str) -> tuple[str, str]:
    """(code, reason) of a receipt message such as `engine_exited: The engine ... Log tail: ...`;
    the reason keeps the sentence and the last error line of the log tail."""
    match = _CODE.match(outcome.strip())
    code, rest = (match.group(1), match.group(2)) if match else ("failed", outcome.strip())
    sentence, _sep, tail = rest.partition("Log tail:")
    reason = " ".join(sentence.split())
    errors = [ln.strip() for ln in tail.splitlines() if " E " in f" {ln.strip()} "]
    if errors:
        last = errors[-1].split(" E ", 1)[-1].strip()
        reason = f"{reason} ({last})" if reason else last
    return code, reason or "no reason was reported"


def failures(doc: dict[str, Any], model_id: str | None = None) -> list[Failure]:
    """The latest failed LOAD/WARM per (host, model) in the history, oldest first."""
    latest: dict[tuple[str, str], Failure] = {}
    for record in doc.get("history", []):
        if record.get("kind") not in CONSTRUCTIVE_KINDS:
            continue
        if model_id is not None and record.get("model_id") != model_id:
            continue
        key = (record["host_id"], record["model_id"])
        if record.get("status") != "failed":
            if record.get("status") in ("succeeded", *OPEN):
                latest.pop(key, None)  # a later attempt supersedes the failure
            continue
        code, reason = split_outcome(record.get("outcome") or "")
        latest[key] = Failure(
            host_id=record["host_id"],
            kind=record["kind"],
            model_id=record["model_id"],
            code=code,
            reason=reason,
            attempt=int(record.get("attempt", 1)),
            finished_at=record.get("finished_at"),
        )
    return list(latest.values())


def ready_hosts(doc: dict[str, Any], model_id: str) -> list[str]:
    return sorted(
        h["host_id"]
        for h in doc.get("hosts", [])
        for r in h.get("residencies", [])
        if r.get("model_id") == model_id and r.get("state") == "ready"
    )


def in_flight(doc: dict[str, Any], model_id: str) -> bool:
    return any(
        r.get("model_id") == model_id
        and r.get("kind") in CONSTRUCTIVE_KINDS
        and r.get("status") in OPEN
        for r in doc.get("history", [])
    )


def start_failed(doc: dict[str, Any], model_id: str) -> list[Failure]:
    """Failures that end the wait: READY nowhere, nothing in flight, a failed start."""
    if ready_hosts(doc, model_id) or in_flight(doc, model_id):
        return []
    return failures(doc, model_id)


def node_lines(doc: dict[str, Any]) -> dict[str, str]:
    """host -> `accepting; smollm2-135m warming` (what `grid test start` prints on change)."""
    lines: dict[str, str] = {}
    for node in doc.get("nodes", []):
        state = (node.get("lifecycle") or "starting") if node.get("running") else "stopped"
        if node.get("running") and not node.get("registered"):
            state = "registering"
        rows = ", ".join(
            f"{r['model_id']} {r['state']}"
            + (" (engine failed)" if r.get("engine") == "failed" else "")
            for r in node.get("residencies", [])
        )
        lines[node["host_id"]] = f"{state}; {rows}" if rows else state
    return lines
