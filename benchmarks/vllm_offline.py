"""A short real check of the in-process vLLM backend, for a GPU machine.

Generates, judges with structured output, and reruns from the cache, reporting tokens/s.
The machine needs the gpu extra and a model it can load (a hub name, or a local path when
it has no internet):

    pip install -e ".[gpu]"
    python benchmarks/vllm_offline.py --model Qwen/Qwen2.5-0.5B-Instruct [--prompts 256]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import save  # noqa: E402

from llm_feedback.annotation import build_aspect_request, parse_aspect_reply  # noqa: E402
from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=4096)
    args = parser.parse_args()
    config = EndpointConfig.from_dict(
        {
            "backend": "vllm",
            "model": args.model,
            "engine_kwargs": {"max_model_len": args.max_model_len},
        },
        name="gpu",
    )
    questions = [
        f"In two sentences, explain idea number {i} of good software design."
        for i in range(args.prompts)
    ]
    report: dict = {"model": args.model}
    with (
        tempfile.TemporaryDirectory() as tmp,
        LLMClient(config, Path(tmp) / "cache.sqlite") as client,
    ):
        started = time.perf_counter()
        answers = client.complete_many(
            [ChatRequest.from_prompt(q, temperature=1.0, max_tokens=256) for q in questions],
            desc="generate",
        )
        wall = time.perf_counter() - started
        tokens = sum(a.completion_tokens for a in answers)
        report["generate"] = {
            "requests": len(answers),
            "failed": sum(not a.ok for a in answers),
            "completion_tokens": tokens,
            "tokens_per_s": tokens / wall,
        }
        judge_requests = [
            build_aspect_request(
                "helpfulness",
                questions[i],
                [answers[i].text or "", answers[i + 1].text or ""],
                [1, 0],
                structured=True,
                sampling={"temperature": 0.0, "max_tokens": 512},
            )
            for i in range(0, len(questions) - 1, 2)
        ]
        replies = client.complete_many(judge_requests, desc="judge")
        parsed = [parse_aspect_reply("helpfulness", r.text, 2, True) for r in replies]
        readable = sum(p.status in ("ok", "na") for ratings in parsed for p in ratings)
        report["judge"] = {"calls": len(replies), "ratings_readable": readable / (2 * len(replies))}
        started = time.perf_counter()
        client.complete_many(judge_requests, desc=None)
        report["cached_rerun_s"] = time.perf_counter() - started
        report["client_stats"] = client.stats.__dict__
    save("vllm_offline", report)


if __name__ == "__main__":
    main()
