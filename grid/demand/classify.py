"""The request classifier: one request at the Grid boundary -> one bounded `Observation`. Pure.

It reads the parsed request body in memory only, and only a bounded part of it: at most
`max_messages` of the newest chat messages, `max_parts` content parts each, and `prefix_chars`
characters of text in all (the system prompt first, then the newest user turns). From that text
deterministic, table-driven keyword and structure rules (grid/demand/classify_rules.py: code
fences, programming keywords, "write a function", marketing and sales vocabulary, image and
video generation phrases, ...) choose ONE word of the configured workload vocabulary, in time
linear in the bounded prefix; the embeddings, images and video
endpoints decide their word by themselves. What comes out is an `Observation`: model names, the
endpoint family, the modality, approximate units, the workload word, timings, queue pressure and
the outcome. No prompt, response, key or identity is kept anywhere.

Nothing here raises on request input: anything odd (a body that is not an object, a content part
of an unknown shape, a non-finite number) gives the fallback word (`general`) and clamped
numbers, so classification can never delay or fail inference. Only a bad `ClassifierConfig`
(an operator's mistake, checked once at start-up) raises a GridError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .classify_rules import DEFAULT_RULES, CompiledRules, RuleSpec, compile_rules, config_error
from .config import DEFAULT_WORKLOADS
from .observation import MAX_SECONDS, MAX_UNITS, EndpointFamily, Modality, Observation, Outcome

BYTES_PER_UNIT = 4.0  # approximate text units (tokens) of a body when the engine reports none
MAX_MODEL_CHARS = 256
MAX_TIMESTAMP = 1e11
UNKNOWN_MODEL = "unknown"
WORD = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # the observation's workload field pattern

# The endpoint family decides these words (when they are in the vocabulary).
FAMILY_WORKLOADS: Mapping[EndpointFamily, str] = {
    EndpointFamily.EMBEDDINGS: "embedding",
    EndpointFamily.IMAGES: "image",
    EndpointFamily.VIDEO: "video",
}
FAMILY_MODALITIES: Mapping[EndpointFamily, Modality] = {
    EndpointFamily.EMBEDDINGS: Modality.EMBEDDING,
    EndpointFamily.IMAGES: Modality.IMAGE,
    EndpointFamily.VIDEO: Modality.VIDEO,
}
IMAGE_PARTS = frozenset({"image_url", "input_image", "image"})
VIDEO_PARTS = frozenset({"video_url", "input_video", "video"})
TEXT_PARTS = frozenset({"text", "input_text"})


@dataclass(frozen=True)
class ClassifierConfig:
    """The vocabulary, the rule table and the bounds of one classifier (checked on creation)."""

    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    fallback: str = "general"
    rule_specs: tuple[RuleSpec, ...] = DEFAULT_RULES
    prefix_chars: int = 4096
    max_messages: int = 16
    max_parts: int = 16
    min_score: float = 2.0  # one weak keyword is not a workload
    per_rule_cap: int = 3
    rules: CompiledRules = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.fallback not in self.workloads:
            raise config_error(
                f"the fallback workload {self.fallback!r} is not in the vocabulary",
                f"add {self.fallback!r} to the workloads or choose a fallback among them",
            )
        bad = [w for w in self.workloads if not WORD.fullmatch(w)]
        if bad or not self.workloads or len(set(self.workloads)) != len(self.workloads):
            raise config_error(
                f"the workload vocabulary {list(self.workloads)} is not a list of distinct words",
                "use distinct lowercase words (letters, digits, - and _; at most 32 characters)",
            )
        for name in ("prefix_chars", "max_messages", "max_parts", "per_rule_cap"):
            if not 1 <= getattr(self, name) <= 1_000_000:
                raise config_error(f"{name} must be between 1 and 1000000", f"correct {name}")
        if not (math.isfinite(self.min_score) and self.min_score > 0):
            raise config_error("min_score must be a positive number", "correct min_score")
        object.__setattr__(self, "rules", compile_rules(self.rule_specs, self.workloads))


DEFAULT_CONFIG = ClassifierConfig()


@dataclass(frozen=True)
class RequestShape:
    """What the classifier keeps of a request body: two words."""

    workload: str
    modality: Modality


# ----------------------------------------------------------------------------- text extraction


class _Budget:
    """Collects at most `limit` characters of text, in the order pieces are offered."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pieces: list[str] = []
        self.used = 0
        self.modality = Modality.TEXT

    @property
    def full(self) -> bool:
        return self.used >= self.limit

    def add(self, text: object, cap: int | None = None) -> None:
        if isinstance(text, str) and text and not self.full:
            room = self.limit - self.used
            piece = text[: room if cap is None else min(room, cap)]
            self.pieces.append(piece)
            self.used += len(piece)

    def see_part_kind(self, kind: object) -> None:
        if not isinstance(kind, str):
            return
        if kind in VIDEO_PARTS:
            self.modality = Modality.VIDEO
        elif kind in IMAGE_PARTS and self.modality is Modality.TEXT:
            self.modality = Modality.IMAGE

    def text(self) -> str:
        return "\n".join(self.pieces)


def _add_content(content: object, budget: _Budget, max_parts: int, cap: int | None = None) -> None:
    """A message's content: a string, or a list of typed parts (OpenAI's multimodal shape)."""
    if isinstance(content, str):
        budget.add(content, cap)
        return
    if not isinstance(content, list):
        return
    for part in content[:max_parts]:
        if isinstance(part, str):
            budget.add(part, cap)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            budget.see_part_kind(kind)
            if kind is None or (isinstance(kind, str) and kind in TEXT_PARTS):
                budget.add(part.get("text"), cap)


def _add_messages(messages: object, budget: _Budget, config: ClassifierConfig) -> None:
    """System/developer instructions first (a quarter of the prefix at most, so a long system
    prompt cannot hide the request), then user turns newest first."""
    if not isinstance(messages, list):
        return
    newest = [m for m in messages[-config.max_messages :] if isinstance(m, Mapping)]
    instructions = [m for m in newest if m.get("role") in ("system", "developer")]
    users = [m for m in reversed(newest) if m.get("role") == "user"]
    cap = max(1, config.prefix_chars // 4)
    for message in instructions:
        _add_content(message.get("content"), budget, config.max_parts, cap)
    for message in users:
        _add_content(message.get("content"), budget, config.max_parts)


def _add_prompt(prompt: object, budget: _Budget, config: ClassifierConfig) -> None:
    """A completions prompt or an embeddings/responses input: a string or a list of them."""
    if isinstance(prompt, str):
        budget.add(prompt)
    elif isinstance(prompt, list):
        head = prompt[: config.max_messages]
        if any(isinstance(item, Mapping) and "role" in item for item in head):
            _add_messages(prompt, budget, config)  # the responses API's message list
        else:
            for item in head:
                if isinstance(item, str):
                    budget.add(item)  # token-id lists carry no text and are skipped


def prompt_prefix(document: Mapping[str, Any], config: ClassifierConfig) -> tuple[str, Modality]:
    """The bounded text the rules read, and the modality seen in the content parts."""
    budget = _Budget(config.prefix_chars)
    budget.add(document.get("instructions"), max(1, config.prefix_chars // 4))  # responses API
    _add_messages(document.get("messages"), budget, config)
    if not budget.full:
        _add_prompt(document.get("prompt"), budget, config)
    if not budget.full:
        _add_prompt(document.get("input"), budget, config)
    return budget.text(), budget.modality


# ----------------------------------------------------------------------------- classification


def score_text(text: str, config: ClassifierConfig) -> dict[str, float]:
    """Rule weight x (matches, capped) summed per workload; only workloads with a match."""
    scores: dict[str, float] = {}
    hits = config.rules.hits(text.lower(), config.per_rule_cap)
    for rule, count in zip(config.rules.rules, hits, strict=True):
        if count:
            scores[rule.workload] = scores.get(rule.workload, 0.0) + rule.weight * count
    return scores


def _choose(scores: Mapping[str, float], config: ClassifierConfig) -> str:
    order: dict[str, int] = {}
    for index, rule in enumerate(config.rules.rules):
        order.setdefault(rule.workload, -index)  # the earlier a workload's first rule, the better
    best = max(scores, key=lambda w: (scores[w], order[w]), default=None)
    if best is None or scores[best] < config.min_score:
        return config.fallback
    return best


def classify_request(
    document: object,
    family: EndpointFamily = EndpointFamily.CHAT,
    config: ClassifierConfig = DEFAULT_CONFIG,
) -> RequestShape:
    """The workload word and modality of a parsed request body. Never raises."""
    try:
        modality = FAMILY_MODALITIES.get(family, Modality.TEXT)
        by_family = FAMILY_WORKLOADS.get(family)
        if by_family is not None:
            word = by_family if by_family in config.workloads else config.fallback
            return RequestShape(word, modality)
        if not isinstance(document, Mapping):
            return RequestShape(config.fallback, modality)
        text, seen = prompt_prefix(document, config)
        return RequestShape(_choose(score_text(text, config), config), seen)
    except Exception:  # by contract: odd input is general work, never a failed request
        return RequestShape(config.fallback, Modality.TEXT)


def _clamp(value: object, upper: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        return 0.0
    return min(number, upper)


def _model_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        return UNKNOWN_MODEL
    return name[:MAX_MODEL_CHARS]


@dataclass(frozen=True)
class RequestOutcome:
    """What the boundary measured about one finished request (no content)."""

    requested_model: object
    served_model: object = None
    outcome: Outcome = Outcome.OK
    service_time_s: float = 0.0
    queue_wait_s: float = 0.0
    queue_depth: int = 0
    input_units: float | None = None  # the engine's usage report, when it gave one
    output_units: float | None = None
    body_bytes: int = 0
    timestamp: float = 0.0


def observation_from(
    shape: RequestShape, family: EndpointFamily, done: RequestOutcome
) -> Observation:
    """The bounded observation of one finished request. Never raises."""
    try:
        served = None if done.served_model is None else _model_name(done.served_model)
        units_in = done.input_units
        if units_in is None:
            units_in = _clamp(done.body_bytes, MAX_UNITS * BYTES_PER_UNIT) / BYTES_PER_UNIT
        return Observation(
            model_id=_model_name(done.requested_model),
            served_model_id=served,
            endpoint_family=family,
            modality=shape.modality,
            input_units=_clamp(units_in, MAX_UNITS),
            output_units=_clamp(done.output_units, MAX_UNITS),
            workload=shape.workload,
            service_time_s=_clamp(done.service_time_s, MAX_SECONDS),
            queue_wait_s=_clamp(done.queue_wait_s, MAX_SECONDS),
            queue_depth=int(_clamp(done.queue_depth, 1_000_000)),
            outcome=done.outcome if isinstance(done.outcome, Outcome) else Outcome.ERROR,
            timestamp=_clamp(done.timestamp, MAX_TIMESTAMP),
        )
    except Exception:  # a workload word outside the observation's pattern, or anything odd
        return Observation(model_id=UNKNOWN_MODEL, timestamp=_clamp(done.timestamp, MAX_TIMESTAMP))


def classify(
    document: object,
    family: EndpointFamily,
    done: RequestOutcome,
    config: ClassifierConfig = DEFAULT_CONFIG,
) -> Observation:
    """Both steps at once: body + boundary measurements -> one bounded observation."""
    return observation_from(classify_request(document, family, config), family, done)
