"""Tokens per second of the embedded model, one stream and with parallel llama.cpp slots.

python benchmarks/embedded_model.py [--requests 16] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import peak_rss_mib, save  # noqa: E402

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.backends.local import stop_local_servers  # noqa: E402

QUESTIONS = [
    "Explain photosynthesis to a child.",
    "Give three tips for learning to cook.",
    "Why is the sky blue?",
    "Describe a good morning routine.",
    "What makes a story memorable?",
    "How do vaccines work?",
    "Write a short poem about rivers.",
    "Summarise the water cycle.",
]


def measure(slots: int, concurrency: int, n: int, max_tokens: int) -> dict[str, float]:
    config = EndpointConfig.from_dict(
        {
            "backend": "local",
            "model": "smollm2",
            "parallel_slots": slots,
            "max_concurrent": concurrency,
            "cache": False,
        },
        name=f"slots{slots}",
    )
    # Forced length (ignore EOS is not exposed), so compare by generated tokens.
    requests = [
        ChatRequest.from_prompt(
            QUESTIONS[i % len(QUESTIONS)] + f" ({i})",
            temperature=0.7,
            max_tokens=max_tokens,
            seed=i,
        )
        for i in range(n)
    ]
    with LLMClient(config, None, progress=False) as client:
        client.complete(ChatRequest.from_prompt("warm up", max_tokens=4))
        started = time.perf_counter()
        results = client.complete_many(requests, desc=None)
        wall = time.perf_counter() - started
    stop_local_servers()
    tokens = sum(r.completion_tokens for r in results)
    return {
        "slots": slots,
        "concurrency": concurrency,
        "requests": n,
        "completion_tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall,
        "mean_latency_s": sum(r.latency_s for r in results) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    runs = [measure(1, 1, args.requests // 2, args.max_tokens)]
    for slots in (2, 4, 8):
        runs.append(measure(slots, slots, args.requests, args.max_tokens))
    single = runs[0]["tokens_per_s"]
    for run in runs:
        run["speedup_vs_single_stream"] = run["tokens_per_s"] / single
    save(
        "embedded_model",
        {"max_tokens": args.max_tokens, "runs": runs, "peak_rss_mib": peak_rss_mib()},
    )


if __name__ == "__main__":
    main()
