"""The client side of `grid test demo`: genuine chat requests through the Grid boundary.

`chat` sends one OpenAI chat completion (optionally with a stable `X-Grid-Affinity-Key`);
`persona_round` has several client personas send concurrent requests to the given models with
bounded production-style retries (a 503 such as an engine at capacity, a 502, 504 or a
transport failure is retried at most `retries` times with capped linear backoff) and reports,
per request, the status, attempts, client-visible latency including retries, response ID,
usage and the answering host.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

RETRYABLE = frozenset({502, 503, 504})
PERSONA_PROMPTS = (
    "Write a Python function that checks whether a string is a palindrome.",
    "Summarize in one sentence why unit tests are useful.",
    "Write a shell command that counts the lines of every .py file in a folder.",
    "Give three short names for a coffee shop.",
)


@dataclass(frozen=True)
class PersonaRound:
    users: int = 3
    requests: int = 6
    max_tokens: int = 24
    retries: int = 6
    backoff_s: float = 0.5
    max_backoff_s: float = 2.0


def chat(
    url: str, model: str, prompt: str, user: str | None = None, max_tokens: int = 24
) -> httpx.Response:
    headers = {"X-Grid-Affinity-Key": user} if user else {}
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    return httpx.post(
        f"{url}/v1/chat/completions", json=body, headers=headers, timeout=120, trust_env=False
    )


def text_of(reply: httpx.Response) -> str:
    try:
        return str(reply.json()["choices"][0]["message"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def _one(url: str, user: str, model: str, prompt: str, plan: PersonaRound) -> dict[str, Any]:
    started = time.monotonic()
    attempts = 0
    reply: httpx.Response | None = None
    while True:
        attempts += 1
        try:
            reply = chat(url, model, prompt, user, plan.max_tokens)
        except httpx.HTTPError:
            reply = None
        status = reply.status_code if reply is not None else None
        if (status is not None and status not in RETRYABLE) or attempts > plan.retries:
            break
        time.sleep(min(plan.max_backoff_s, plan.backoff_s * attempts))
    body: dict[str, Any] = {}
    if reply is not None and reply.status_code == 200:
        try:
            body = reply.json()
        except ValueError:
            body = {}
    return {
        "user": user,
        "model_id": model,
        "status": reply.status_code if reply is not None else None,
        "attempts": attempts,
        "latency_s": round(time.monotonic() - started, 3),
        "response_id": body.get("id"),
        "usage": body.get("usage"),
        "served_by": reply.headers.get("X-Grid-Served-By") if reply is not None else None,
        "text": text_of(reply) if reply is not None else "",
    }


def persona_round(url: str, models: list[str], plan: PersonaRound) -> list[dict[str, Any]]:
    """`plan.requests` requests from `plan.users` personas, spread over `models`."""
    jobs = [
        (
            f"persona-{i % plan.users + 1}",
            models[i % len(models)],
            PERSONA_PROMPTS[i % len(PERSONA_PROMPTS)],
        )
        for i in range(plan.requests)
    ]
    with ThreadPoolExecutor(max_workers=max(1, plan.users)) as pool:
        return list(pool.map(lambda job: _one(url, job[0], job[1], job[2], plan), jobs))


# Chat-template tokens in an answer mean the engine formatted the chat with the wrong template
# (gemma's GGUF carries none: without `--chat-template gemma` it answers ChatML garbage).
CHAT_MARKUP = ("<|im_end|>", "<|im_start|>", "<start_of_turn>", "<end_of_turn>", "<eos>", "<|")


def answer_problem(text: str) -> str:
    """Why `text` is not a real answer ("" when it is): empty, or chat-template markup (the
    engine formatted the chat with a wrong or missing template). What a 270M model says is not
    judged beyond that: its quality is the evaluations' business, not the demo's."""
    if not text.strip():
        return "the answer is empty"
    marks = [m for m in CHAT_MARKUP if m in text]
    if marks:
        return f"the answer carries chat-template markup {marks[0]!r}: wrong or missing template"
    return ""


def genuine(row: dict[str, Any]) -> bool:
    """A genuine answer: 200, real assistant text (answer_problem), a response ID and a usage
    report."""
    usage = row.get("usage") or {}
    return (
        row["status"] == 200
        and not answer_problem(str(row["text"]))
        and bool(row["response_id"])
        and int(usage.get("completion_tokens") or 0) > 0
    )
