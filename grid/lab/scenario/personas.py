"""User personas, bounded synthetic projects and their prompts (pure, seeded).

A persona has a workload mix and a request rate; every user belongs to one bounded project
(at most `PROJECT_SIZE` users). A project walks through stable work stages (its persona's
stage list, each stage `STAGE_MINUTES` long, in a fixed order): during a stage a user's
requests are mostly of the stage's workload, so within a session workload A is followed by
workload B the same way every time, which the production workflow learner can discover.
Request counts stay independently sampled (Poisson per user and minute).

Prompts are realistic text; the lab never labels them: `grid/demand/classify.py` (the real
classifier) turns each body into its workload word. Embedding, image and video requests use
their own endpoint families, as real clients do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PROJECT_SIZE = 6
STAGE_MINUTES = 12


@dataclass(frozen=True)
class Persona:
    name: str
    rate_per_min: float
    mix: tuple[tuple[str, float], ...]  # intended workload -> weight (outside stages)
    stages: tuple[str, ...]  # the project's stable stage order
    weight: float  # share of the population


PERSONAS: tuple[Persona, ...] = (
    Persona(
        "developer",
        0.8,
        (("coding", 0.7), ("general", 0.1), ("research", 0.1), ("embedding", 0.1)),
        ("design", "coding", "coding", "embedding"),
        0.34,
    ),
    Persona(
        "researcher",
        0.6,
        (("research", 0.7), ("general", 0.2), ("embedding", 0.1)),
        ("research", "embedding", "research", "general"),
        0.14,
    ),
    Persona(
        "marketer",
        0.5,
        (("marketing", 0.6), ("image", 0.2), ("design", 0.1), ("video", 0.1)),
        ("research", "marketing", "image", "marketing"),
        0.16,
    ),
    Persona(
        "seller",
        0.5,
        (("sales", 0.7), ("general", 0.2), ("research", 0.1)),
        ("research", "sales", "sales"),
        0.14,
    ),
    Persona(
        "designer",
        0.4,
        (("design", 0.5), ("image", 0.4), ("video", 0.1)),
        ("design", "image", "design", "image"),
        0.12,
    ),
    # Campaign sessions: image then video, again and again (the spec's image -> video workflow,
    # one affinity key per user), so the workflow learner's pre-warm has a sequence to learn.
    Persona("producer", 0.4, (("image", 0.6), ("video", 0.4)), ("image", "video"), 0.08),
    Persona(
        "generalist", 0.4, (("general", 0.8), ("research", 0.2)), ("general", "research"), 0.10
    ),
)

TOPICS = (
    "billing service",
    "onboarding flow",
    "search page",
    "mobile app",
    "data pipeline",
    "pricing page",
    "partner portal",
    "analytics dashboard",
    "support inbox",
    "checkout",
)
LANGS = ("Python", "TypeScript", "Go", "Rust", "Java")

PROMPTS: dict[str, tuple[str, ...]] = {
    "coding": (
        "Write a {lang} function that validates the {topic} input and add unit tests for it.",
        "Fix the bug in this code:\n```\ndef total(items):\n"
        "    return sum(i.price for i in items\n```",
        "Refactor the {topic} module in {lang}; the class has too many methods. Add type hints.",
        "Debug this stack trace from the {topic}: Traceback (most recent call last): KeyError 'id'",
        "Implement a REST API endpoint for the {topic} in {lang} and write the SQL query: SELECT",
    ),
    "research": (
        "Summarize the latest research on {topic} adoption and cite the key studies and sources.",
        "Compare three academic papers about {topic} reliability; what does the literature say?",
        "Do a literature review of market research on the {topic}: methodology, findings, sources.",
    ),
    "marketing": (
        "Write a marketing campaign for the {topic} launch: tagline, audience, social media posts.",
        "Draft a newsletter and ad copy for our {topic} campaign, with a call to action and SEO.",
        "Create a brand messaging guide for the {topic}: tone of voice, slogan, target audience.",
    ),
    "sales": (
        "Write a sales email to a prospect about the {topic}; handle the pricing objection.",
        "Draft a cold outreach sequence for leads interested in the {topic}, with a discount.",
        "Prepare a sales pitch and negotiation notes for the {topic} deal with the customer.",
    ),
    "design": (
        "Suggest a UI layout and color palette for the {topic} wireframe; keep the UX accessible.",
        "Review the typography and visual hierarchy of the {topic} mockup in Figma.",
        "Propose a design system for the {topic}: spacing, icons, components, color palette.",
    ),
    "general": (
        "What are good ways to plan a team offsite next month?",
        "Help me write a polite reply to a colleague about the {topic} meeting schedule.",
        "Explain in simple words how the {topic} works for a new hire.",
    ),
    "image": (
        "A product photo of the {topic} hero banner, soft light, 4k",
        "An illustration for the {topic} landing page in flat vector style",
    ),
    "video": (
        "A 10 second product video of the {topic}, smooth camera pan",
        "An animated explainer clip for the {topic} campaign",
    ),
    "embedding": ("{topic} knowledge base article chunk about setup and troubleshooting",),
}
FAMILY = {"embedding": "embeddings", "image": "images", "video": "video"}


@dataclass(frozen=True)
class User:
    user_id: str
    persona: Persona
    project: int
    phase_offset: int  # minutes into the project's stage cycle at minute 0


def build_users(count: int, seed: int) -> list[User]:
    rng = random.Random(f"users:{seed}:{count}")
    weights = [p.weight for p in PERSONAS]
    out: list[User] = []
    projects: dict[int, Persona] = {}
    offsets: dict[int, int] = {}
    for i in range(count):
        project = i // PROJECT_SIZE
        if project not in projects:
            projects[project] = rng.choices(PERSONAS, weights)[0]
            offsets[project] = rng.randrange(STAGE_MINUTES * 4)
        out.append(User(f"u{i:04d}", projects[project], project, offsets[project]))
    return out


def stage_of(user: User, minute: int) -> str:
    stages = user.persona.stages
    return stages[((minute + user.phase_offset) // STAGE_MINUTES) % len(stages)]


def intended(user: User, minute: int, rng: random.Random) -> str:
    """The workload the user means (the lab never tells the allocator)."""
    if rng.random() < 0.75:
        return stage_of(user, minute)
    words = [w for w, _ in user.persona.mix]
    weights = [x for _, x in user.persona.mix]
    return str(rng.choices(words, weights)[0])


def body(word: str, rng: random.Random) -> tuple[str, dict[str, object]]:
    """(endpoint family, request body) for one request of the intended workload."""
    text = rng.choice(PROMPTS[word]).format(topic=rng.choice(TOPICS), lang=rng.choice(LANGS))
    family = FAMILY.get(word, "chat")
    if family == "embeddings":
        return family, {"model": "auto", "input": text}
    if family != "chat":
        return family, {"model": "auto", "prompt": text}
    return family, {"model": "auto", "messages": [{"role": "user", "content": text}]}
