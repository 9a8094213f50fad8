"""Request classifier cost per request, against the JSON parse the proxy already pays.

    .venv/bin/python bench/bench_classify.py [--repeat 2000] [--json]

Figures, all measured in this run (median microseconds per request):
    parse      json.loads of the request body (the proxy's existing cost: the baseline)
    classify   classify_request on the parsed body (the added cost)
    observe    classify_request + observation_from (the whole boundary step)
for a short chat prompt, a 2 KB coding prompt, a 60-message conversation and a 4 MB body (the
bounded prefix keeps the classifier's cost flat while the parse grows with the body).
Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout

from grid.demand import EndpointFamily  # noqa: E402
from grid.demand.classify import RequestOutcome, classify_request, observation_from  # noqa: E402

CODE = (
    "Refactor this function and add unit tests:\n```python\n"
    + ("def total(items):\n    return sum(i.price for i in items)\n" * 25)
    + "```"
)


def bodies() -> dict[str, bytes]:
    def chat(messages: list[dict[str, str]]) -> bytes:
        return json.dumps({"model": "auto", "messages": messages}).encode()

    long_turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "word " * 80}
        for i in range(60)
    ]
    return {
        "short chat": chat([{"role": "user", "content": "Tell me a joke about penguins."}]),
        "2 KB coding": chat([{"role": "user", "content": CODE}]),
        "60 messages": chat(long_turns),
        "4 MB body": chat([{"role": "user", "content": "lorem ipsum " * 350_000}]),
    }


def median_us(call: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000, help="timed calls per figure")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    rows = []
    for name, body in bodies().items():
        repeat = max(5, args.repeat // 100) if len(body) > 1_000_000 else args.repeat
        document = json.loads(body)
        done = RequestOutcome(requested_model="auto", service_time_s=1.0, body_bytes=len(body))

        def observe(doc: object = document, outcome: RequestOutcome = done) -> object:
            shape = classify_request(doc, EndpointFamily.CHAT)
            return observation_from(shape, EndpointFamily.CHAT, outcome)

        rows.append(
            {
                "body": name,
                "bytes": len(body),
                "word": classify_request(document).workload,
                "parse_us": round(median_us(lambda b=body: json.loads(b), repeat), 1),
                "classify_us": round(median_us(lambda d=document: classify_request(d), repeat), 1),
                "observe_us": round(median_us(observe, repeat), 1),
            }
        )
    if args.json:
        print(json.dumps({"rows": rows}, indent=2))
        return
    header = ("body", "bytes", "word", "parse µs", "classify µs", "observe µs")
    print("{:12} {:>9} {:8} {:>10} {:>12} {:>11}".format(*header))
    for r in rows:
        print(
            f"{r['body']:12} {r['bytes']:>9} {r['word']:8} {r['parse_us']:>10} "
            f"{r['classify_us']:>12} {r['observe_us']:>11}"
        )


if __name__ == "__main__":
    main()
