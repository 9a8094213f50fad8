"""The classifier's rule table and its compiled, linear-time form. Pure.

A rule gives `weight` points to one workload word per match (at most `per_rule_cap` matches
count). Two kinds:
- phrases: words or short phrases matched on whole tokens of the lower-cased prefix through one
  hash lookup per token (a phrase of several words costs extra lookups only at tokens that
  start one), so the vocabulary can grow without slowing the scan;
- pattern: a regular expression over the lower-cased prefix for structure (code fences,
  `def f(`, SQL, "write a ... function"); it runs only when one of its `triggers` (plain
  substrings, a C-speed test) occurs, so a prompt without code never pays for the code rules.
Earlier workloads win ties: the table lists coding, image, video, design, marketing, sales,
research in that order ("CSS" is design vocabulary, a code fence is coding).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from grid.fleet import GridError

TOKEN = re.compile(r"[a-z0-9_+#]+(?:[-.'/][a-z0-9_+#]+)*")


@dataclass(frozen=True)
class RuleSpec:
    """One row of the table: `phrases` or a `pattern` (with optional `triggers`)."""

    workload: str
    weight: float
    phrases: tuple[str, ...] = ()
    pattern: str | None = None
    triggers: tuple[str, ...] = ()


def words(workload: str, weight: float, text: str) -> RuleSpec:
    """A phrase rule from a `|`-separated list."""
    return RuleSpec(workload, weight, phrases=tuple(p.strip() for p in text.split("|")))


def regex(workload: str, weight: float, pattern: str, *triggers: str) -> RuleSpec:
    return RuleSpec(workload, weight, pattern=pattern, triggers=triggers)


VERBS_CODE = ("write", "implement", "fix", "debug", "refactor", "optimi", "review", "test", "add")
VERBS_IMAGE = ("generate", "create", "draw", "paint", "render", "make", "design")
VERBS_VIDEO = ("generate", "create", "make", "render", "produce", "animate")
FILLER = r"(?:me\s+)?(?:an?\s+|the\s+|this\s+|my\s+|some\s+)?(?:[\w-]+\s+){0,2}"

DEFAULT_RULES: tuple[RuleSpec, ...] = (
    # coding: structure, then vocabulary
    regex("coding", 3.0, r"```", "```"),
    regex("coding", 3.0, r"\bdef\s+\w+\s*\(", "def"),
    regex("coding", 3.0, r"\b(?:function|func|fn)\s+\w+\s*\(", "func", "fn"),
    regex(
        "coding",
        3.0,
        r"#include\s*<|\bpublic\s+static\s+void\b|\bconsole\.log\(|\bprintln!?\(",
        "#include",
        "public static",
        "console.log(",
        "println",
    ),
    regex(
        "coding",
        2.0,
        r"(?m)^\s*(?:import\s+[\w.]+(?:\s+as\s+\w+)?|from\s+[\w.]+\s+import\s+[\w.*, ]+"
        r"|import\s+[\w{}*, ]+\s+from\s+['\"][^'\"]+['\"])\s*;?\s*$|\brequire\(['\"]",
        "import",
        "require(",
    ),
    regex(
        "coding",
        3.0,
        r"\bselect\s+(?:\*|[\w.]+(?:\s*,\s*[\w.()*]+)*)\s+from\s+\w+|\bcreate\s+table\b"
        r"|\bjoin\s+\w+\s+on\b",
        "select",
        "create table",
        "join",
    ),
    regex(
        "coding",
        3.0,
        r"traceback \(most recent call last\)|\b\w+(?:error|exception):",
        "traceback",
        "error:",
        "exception:",
    ),
    regex(
        "coding",
        3.0,
        r"\b(?:write|implement|fix|debug|refactor|optimi[sz]e|review|test|add)\s+" + FILLER + r"(?:"
        r"function|method|class|script|program|query|unit tests?|bug|code(?!\s+of\b)|regex|"
        r"endpoint)s?\b",
        *VERBS_CODE,
    ),
    words(
        "coding",
        1.0,
        "python|javascript|typescript|java|rust|golang|kotlin|swift|c++|c#|sql|bash|regex|"
        "compiler|parser|segfault|postgres|postgresql|mysql|binary search|stack trace|null pointer|"
        "refactor|debug|debugging|unit test|unit tests|pull request|git|api|json|yaml|"
        "dockerfile|kubernetes|algorithm|recursion|linked list|variable|function|method|async|"
        "lambda",
    ),
    regex(
        "coding",
        1.0,
        r"==|!=|=>|->|&&|\|\||\+\+|\breturn\s+\w+\s*;",
        *("==", "!=", "=>", "->", "&&", "||", "++", "return"),
    ),
    # image and video generation
    regex(
        "image",
        4.0,
        r"\b(?:generate|create|draw|paint|render|make|design)\s+" + FILLER + r"(?:"
        r"image|picture|photo|illustration|drawing|painting|portrait|icon)s?\b",
        *VERBS_IMAGE,
    ),
    words(
        "image",
        2.0,
        "photorealistic|digital art|oil painting|watercolor|watercolour|stable diffusion|"
        "midjourney|dall-e|dalle|negative prompt|concept art|8k|4k|bokeh",
    ),
    regex("image", 2.0, r"--ar\s+\d+:\d+", "--ar"),
    regex(
        "video",
        4.0,
        r"\b(?:generate|create|make|render|produce|animate)\s+" + FILLER + r"(?:"
        r"video|clip|animation|footage|short film)s?\b",
        *VERBS_VIDEO,
    ),
    words(
        "video",
        1.0,
        "text-to-video|image-to-video|frames per second|fps|storyboard|b-roll|timelapse|"
        "camera pan|slow motion|video|videos|footage",
    ),
    # design
    regex(
        "design",
        3.0,
        r"\b(?:design|sketch)\s+" + FILLER + r"(?:"
        r"logo|layout|wireframe|mockup|landing page|interface|screen|poster|brand identity)s?\b",
        "design",
        "sketch",
    ),
    words(
        "design",
        1.0,
        "ui|ux|wireframe|wireframes|mockup|mockups|figma|sketch|typography|color palette|"
        "colour palette|font pairing|user interface|user experience|prototype|style guide|"
        "design system|visual hierarchy|whitespace|kerning|accessibility|logo",
    ),
    # marketing
    words(
        "marketing",
        3.0,
        "marketing copy|marketing plan|marketing campaign|marketing strategy|marketing email|"
        "ad copy|tagline|slogan|press release|social media post|social media posts|"
        "linkedin post|instagram caption|go-to-market",
    ),
    words(
        "marketing",
        1.0,
        "marketing|campaign|campaigns|brand|branding|audience|engagement|seo|newsletter|"
        "advert|adverts|advertisement|advertising|ads|influencer|content calendar|"
        "call to action|cta|conversion rate|persona|positioning|tweet|hashtag|hashtags|"
        "blog post|headline",
    ),
    # sales
    words(
        "sales",
        3.0,
        "cold email|cold call|cold outreach|sales pitch|sales email|sales call|sales script|"
        "sales deck|sales pipeline|follow-up email|follow up email|discovery call|"
        "handle the objection|handle this objection|handle objections|close the deal|"
        "close a deal",
    ),
    words(
        "sales",
        1.0,
        "sales|prospect|prospects|prospecting|lead|leads|outreach|pipeline|quota|deal|pricing|"
        "discount|quote|objection|objections|crm|salesforce|hubspot|upsell|cross-sell|renewal|"
        "account executive|sdr|buyer|procurement",
    ),
    # research
    words(
        "research",
        3.0,
        "literature review|systematic review|meta-analysis|peer-reviewed|peer reviewed|"
        "research question|research paper|research summary|find sources|find studies|"
        "find papers|what does the research say|what does the evidence say|"
        "what does the literature say|cite sources|cite your sources",
    ),
    words(
        "research",
        1.0,
        "research|study|studies|paper|papers|literature|citation|citations|cite|sources|"
        "evidence|hypothesis|hypotheses|analyze|analyse|analysis|summarize|summarise|findings|"
        "journal|arxiv|dataset|statistics|statistical|methodology|compare|tradeoffs|trade-offs|"
        "history of",
    ),
)


@dataclass(frozen=True)
class Rule:
    workload: str
    weight: float
    pattern: re.Pattern[str] | None
    triggers: tuple[str, ...]


@dataclass(frozen=True)
class CompiledRules:
    rules: tuple[Rule, ...]
    phrases: dict[tuple[str, ...], tuple[int, ...]]  # token tuple -> indexes of its rules
    starters: frozenset[str]  # first tokens of phrases of two or more tokens
    longest: int  # tokens in the longest phrase

    def hits(self, lowered: str, cap: int) -> list[int]:
        """Matches per rule (each at most `cap`) in an already lower-cased text."""
        counts = [0] * len(self.rules)
        tokens = TOKEN.findall(lowered)
        index = self.phrases
        for i, token in enumerate(tokens):
            for r in index.get((token,), ()):
                counts[r] += 1
            if token in self.starters:
                for n in range(2, self.longest + 1):
                    gram = tuple(tokens[i : i + n])
                    if len(gram) < n:
                        break
                    for r in index.get(gram, ()):
                        counts[r] += 1
        for r, rule in enumerate(self.rules):
            if rule.pattern is None:
                continue
            if rule.triggers and not any(t in lowered for t in rule.triggers):
                continue
            for _ in rule.pattern.finditer(lowered):
                counts[r] += 1
                if counts[r] >= cap:
                    break
        return [min(c, cap) for c in counts]


def config_error(message: str, fix: str) -> GridError:
    return GridError("invalid_classifier_config", message, fix=fix, path="classifier")


def compile_rules(specs: Iterable[RuleSpec], workloads: Sequence[str]) -> CompiledRules:
    """Rules whose workload is in the vocabulary; GridError for a bad row."""
    rules: list[Rule] = []
    phrases: dict[tuple[str, ...], list[int]] = {}
    for spec in specs:
        if not (math.isfinite(spec.weight) and spec.weight > 0):
            raise config_error(
                f"classifier rule for {spec.workload!r} has weight {spec.weight}",
                "give every rule a positive finite weight",
            )
        if bool(spec.phrases) == (spec.pattern is not None):
            raise config_error(
                f"classifier rule for {spec.workload!r} needs either phrases or a pattern",
                "give each rule a list of phrases, or one regular expression",
            )
        pattern = None
        if spec.pattern is not None:
            try:
                pattern = re.compile(spec.pattern)
            except re.error as exc:
                raise config_error(
                    f"classifier rule for {spec.workload!r} is not a valid regular "
                    f"expression: {exc}",
                    "correct the pattern (Python `re` syntax, lower-case text)",
                ) from None
        if spec.workload not in workloads:
            continue
        index = len(rules)
        rules.append(Rule(spec.workload, spec.weight, pattern, tuple(spec.triggers)))
        for phrase in spec.phrases:
            gram = tuple(TOKEN.findall(phrase.lower()))
            if gram:
                phrases.setdefault(gram, []).append(index)
    return CompiledRules(
        rules=tuple(rules),
        phrases={gram: tuple(found) for gram, found in phrases.items()},
        starters=frozenset(gram[0] for gram in phrases if len(gram) > 1),
        longest=max((len(gram) for gram in phrases), default=1),
    )
