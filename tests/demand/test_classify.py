"""The request classifier: real-looking prompts per workload word, bounds, and never raising."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.demand import EndpointFamily, Modality, Outcome
from grid.demand.classify import (
    ClassifierConfig,
    RequestOutcome,
    RequestShape,
    classify,
    classify_request,
    observation_from,
)
from grid.demand.classify_rules import RuleSpec
from grid.fleet.errors import GridError

pytestmark = pytest.mark.unit


def chat(text: str, system: str | None = None) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}] if system else []
    return {"model": "auto", "messages": [*messages, {"role": "user", "content": text}]}


PROMPTS: list[tuple[str, str]] = [
    ("coding", "Write a Python function that parses an ISO 8601 date and returns a datetime."),
    ("coding", "Why does this crash?\n```js\nconst x = items.map(i => i.id)\nconsole.log(x)\n```"),
    (
        "coding",
        "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'user'\nfix?",
    ),
    (
        "coding",
        "Refactor this class to use dependency injection:\n"
        "class Repo:\n    def __init__(self):\n        self.db = connect()",
    ),
    ("coding", "SELECT name, count(*) FROM orders GROUP BY name is slow, which index helps?"),
    ("coding", "Implement a binary search in Rust and add unit tests."),
    (
        "research",
        "Summarize the findings of recent peer-reviewed studies on intermittent fasting "
        "and cite sources.",
    ),
    ("research", "Do a literature review of transformer efficiency papers from arXiv since 2022."),
    ("research", "What does the research say about remote work? Compare the main studies."),
    ("marketing", "Write a tagline and three social media posts for our oat milk brand launch."),
    ("marketing", "Draft a press release announcing our Series B and a LinkedIn post for the CEO."),
    ("marketing", "Plan a content calendar for our SEO newsletter for a developer audience."),
    ("sales", "Write a cold email to a VP of Engineering prospect about our observability tool."),
    ("sales", "How should I handle the objection 'your pricing is too high' on a discovery call?"),
    ("sales", "Draft a follow-up email after the demo asking the buyer about procurement."),
    ("design", "Design a landing page layout for a fintech app: typography and color palette."),
    ("design", "Give feedback on this mockup's visual hierarchy and whitespace; the UI is busy."),
    ("design", "Suggest a font pairing and a style guide for our design system."),
    ("image", "Generate an image of a red fox in a snowy forest, photorealistic, 8k."),
    ("image", "Draw a watercolor illustration of a lighthouse at dusk --ar 16:9"),
    ("image", "Create a picture of a cozy reading nook, digital art"),
    ("video", "Generate a 10 second video of waves crashing on a beach at sunset, slow motion."),
    ("video", "Animate a short clip of a paper plane flying through a city, camera pan, 24 fps."),
    ("video", "Make a product teaser video with b-roll footage of the factory"),
    ("general", "What's a good name for a golden retriever puppy?"),
    ("general", "Tell me a joke about penguins."),
    ("general", "How long should I boil an egg?"),
    ("general", "Translate 'good morning' into French and Spanish."),
]


# Everyday prompts that share a word with a rule but are not that work.
LOOKALIKES = [
    "We import coffee from Brazil and sell it in Oslo.",
    "Select the best option from the list below.",
    "Error: the printer jammed again, what do I do?",
    "Can you review the code of conduct for our club?",
    "Make me a sandwich recipe with avocado.",
    "Design a weekly meal plan for a marathon runner.",
    "Summarize this email thread for me.",
]


@pytest.mark.parametrize("prompt", LOOKALIKES)
def test_lookalike_prompts_stay_general(prompt: str) -> None:
    assert classify_request(chat(prompt)).workload == "general"


@pytest.mark.parametrize(("word", "prompt"), PROMPTS)
def test_chat_prompts_get_their_workload_word(word: str, prompt: str) -> None:
    assert classify_request(chat(prompt)).workload == word


@pytest.mark.parametrize(("word", "prompt"), PROMPTS)
def test_completions_prompts_get_the_same_word(word: str, prompt: str) -> None:
    body = {"model": "auto", "prompt": prompt}
    assert classify_request(body, EndpointFamily.COMPLETIONS).workload == word
    listed = {"model": "auto", "prompt": [prompt]}
    assert classify_request(listed, EndpointFamily.COMPLETIONS).workload == word


def test_the_system_prompt_counts() -> None:
    body = chat("Now do the next one.", system="You are a senior Python developer. Write code.")
    assert classify_request(body).workload == "coding"


def test_one_weak_keyword_is_general_work() -> None:
    # "history of" alone scores 1 point for research: below the 2-point gate.
    assert classify_request(chat("What is the history of the bicycle?")).workload == "general"


@pytest.mark.parametrize(
    ("family", "word", "modality"),
    [
        (EndpointFamily.EMBEDDINGS, "embedding", Modality.EMBEDDING),
        (EndpointFamily.IMAGES, "image", Modality.IMAGE),
        (EndpointFamily.VIDEO, "video", Modality.VIDEO),
    ],
)
def test_the_endpoint_family_decides_media_and_embeddings(
    family: EndpointFamily, word: str, modality: Modality
) -> None:
    body = {"model": "auto", "input": "def f(x): return x  # code-looking text"}
    assert classify_request(body, family) == RequestShape(word, modality)


def test_image_parts_set_the_modality_and_text_parts_are_read() -> None:
    content = [
        {"type": "text", "text": "Fix the bug in this function, see the screenshot"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    body = {"model": "auto", "messages": [{"role": "user", "content": content}]}
    assert classify_request(body) == RequestShape("coding", Modality.IMAGE)


def test_only_a_bounded_prefix_is_read() -> None:
    filler = "lorem ipsum " * 1000  # 12,000 characters of nothing
    late = chat(filler + " ```python\ndef f(): pass\n```")
    assert classify_request(late).workload == "general"
    early = chat("```python\ndef f(): pass\n```" + filler)
    assert classify_request(early).workload == "coding"


def test_only_the_newest_messages_are_read() -> None:
    old = [{"role": "user", "content": "Write a Python function to sort a list."}]
    chatter = [{"role": "assistant", "content": "ok"}] * 20_000
    body = {"model": "auto", "messages": old + chatter}
    assert classify_request(body).workload == "general"  # the coding turn is 20,000 back


def test_a_custom_vocabulary_is_respected() -> None:
    config = ClassifierConfig(workloads=("general", "research", "legal"), fallback="general")
    prompt = "Write a Python function that reverses a string."
    assert classify_request(chat(prompt), config=config).workload == "general"
    custom = ClassifierConfig(
        workloads=("general", "legal"),
        rule_specs=(
            RuleSpec("legal", 1.0, phrases=("contract", "clause", "liability", "indemnification")),
        ),
    )
    legal = chat("Review this contract clause on liability and indemnification.")
    assert classify_request(legal, config=custom).workload == "legal"
    assert classify_request(chat("hello"), config=custom).workload == "general"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fallback": "other"},
        {"workloads": ("general", "Not A Word")},
        {"workloads": ("general", "general")},
        {"rule_specs": (RuleSpec("coding", 1.0, pattern="(unclosed"),)},
        {"rule_specs": (RuleSpec("coding", float("nan"), phrases=("x",)),)},
        {"rule_specs": (RuleSpec("coding", 1.0),)},  # neither phrases nor a pattern
        {"prefix_chars": 0},
    ],
)
def test_a_bad_configuration_is_a_clear_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(GridError) as caught:
        ClassifierConfig(**kwargs)
    assert caught.value.code == "invalid_classifier_config"
    assert caught.value.fix


@pytest.mark.parametrize(
    "body",
    [
        None,
        42,
        "a string",
        [1, 2, 3],
        {"messages": "not a list"},
        {"messages": [None, 7, {"role": "user", "content": {"weird": True}}]},
        {"messages": [{"role": "user", "content": [None, 3, {"type": "text", "text": 5}]}]},
        {"prompt": [[1, 2, 3], [4]]},
        {"input": {"nested": ["x"]}},
    ],
)
def test_odd_bodies_are_general(body: object) -> None:
    assert classify_request(body) == RequestShape("general", Modality.TEXT)


JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(["model", "messages", "role", "content", "type", "text", "prompt"])
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(body=JSON, family=st.sampled_from(list(EndpointFamily)))
def test_any_body_gives_a_vocabulary_word_and_never_raises(
    body: object, family: EndpointFamily
) -> None:
    shape = classify_request(body, family)
    assert shape.workload in ClassifierConfig().workloads
    done = RequestOutcome(requested_model=body, served_model=body, timestamp=float("nan"))
    obs = observation_from(shape, family, done)
    assert obs.workload == shape.workload


def test_the_observation_keeps_no_content() -> None:
    secret = "sk-live-TOPSECRET-1234 customer Jane Doe jane@example.com"
    body = chat(f"Write a Python function that emails {secret}")
    done = RequestOutcome(
        requested_model="auto",
        served_model="coder",
        outcome=Outcome.OK,
        service_time_s=2.5,
        queue_wait_s=0.5,
        queue_depth=3,
        input_units=None,
        output_units=120,
        body_bytes=len(json.dumps(body)),
        timestamp=1000.0,
    )
    obs = classify(body, EndpointFamily.CHAT, done)
    dumped = obs.model_dump_json()
    for fragment in ("TOPSECRET", "Jane", "example.com", "emails", "Python"):
        assert fragment not in dumped
    assert obs.workload == "coding"
    assert obs.model_id == "auto" and obs.served_model_id == "coder"
    assert obs.input_units == len(json.dumps(body)) / 4.0  # 4 bytes a unit without usage
    assert (obs.output_units, obs.service_time_s, obs.queue_wait_s) == (120.0, 2.5, 0.5)
    assert obs.queue_depth == 3 and obs.timestamp == 1000.0


def test_boundary_numbers_are_clamped_not_refused() -> None:
    done = RequestOutcome(
        requested_model="m" * 1000,
        served_model="",
        service_time_s=float("inf"),
        queue_wait_s=-4.0,
        queue_depth=10**12,
        input_units=float("nan"),
        output_units=1e30,
        timestamp=-1.0,
    )
    obs = observation_from(RequestShape("general", Modality.TEXT), EndpointFamily.CHAT, done)
    assert obs.model_id == "m" * 256 and obs.served_model_id == "unknown"
    assert obs.service_time_s == 0.0 and obs.queue_wait_s == 0.0
    assert obs.queue_depth == 1_000_000 and obs.input_units == 0.0
    assert obs.output_units == 1e12 and obs.timestamp == 0.0
    assert not math.isnan(obs.latency_s)


def test_a_long_system_prompt_cannot_hide_the_request() -> None:
    system = "You are a friendly assistant for our company. Be polite and concise. " * 100
    body = chat("Write a Python function that validates an IBAN.", system=system)
    assert classify_request(body).workload == "coding"


def test_the_responses_api_shapes_are_read() -> None:
    parts = [{"type": "input_text", "text": "Draft a cold email to a prospect at Acme."}]
    body = {"model": "auto", "input": [{"role": "user", "content": parts}]}
    assert classify_request(body, EndpointFamily.RESPONSES).workload == "sales"
    plain = {"model": "auto", "instructions": "You write marketing copy.", "input": "A tagline?"}
    assert classify_request(plain, EndpointFamily.RESPONSES).workload == "marketing"


def test_a_multi_turn_conversation_reads_the_newest_user_turn_first() -> None:
    body = {
        "model": "auto",
        "messages": [
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "def f(): ```code``` in my answer"},  # not read
            {"role": "user", "content": "Now write a LinkedIn post and a tagline for it."},
        ],
    }
    assert classify_request(body).workload == "marketing"


@settings(max_examples=60, deadline=None)
@given(
    head=st.lists(st.sampled_from([w for _word, p in PROMPTS for w in p.split()]), min_size=1),
    tail=st.text(max_size=300),
)
def test_nothing_past_the_prefix_changes_the_word(head: list[str], tail: str) -> None:
    prefix = (" ".join(head) + " ") * (4096 // (len(" ".join(head)) + 1) + 1)
    assert len(prefix) >= 4096
    assert classify_request(chat(prefix + tail)) == classify_request(chat(prefix))
