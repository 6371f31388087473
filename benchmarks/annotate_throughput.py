"""Annotate throughput (aspect calls and critiques) against the concurrency/latency bound.

The judge is the fake server in its own process, answering every JSON schema at a fixed
latency; what is measured is our annotation layer on top of the client.

    python benchmarks/annotate_throughput.py [--prompts 400] [--latency 0.2] [--concurrency 32]

`--latency 0` measures CPU per call instead: no bound then, the client's CPU is the limit.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import openai
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_seconds, save  # noqa: E402

from llm_feedback.annotation import (  # noqa: E402
    DEFAULT_ASPECTS,
    build_aspect_request,
    shuffle_orders,
)
from llm_feedback.annotation.stages import annotate_aspects, critique_completions  # noqa: E402
from llm_feedback.backends import EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.backends.openai_backend import response_format_for  # noqa: E402
from llm_feedback.testing.server import serve_in_subprocess  # noqa: E402


def completions(prompts: int) -> pd.DataFrame:
    rows = [
        {
            "prompt_id": f"p{p:05d}",
            "completion_idx": c,
            "source": "sharegpt",
            "instruction": f"Explain idea {p} in plain words.",
            "world_knowledge": "",
            "model": f"m{c}",
            "principle": "helpfulness",
            "system_prompt": "Be helpful.",
            "response": f"Answer {c} to idea {p}: " + "some words " * 40,
            "error": None,
        }
        for p in range(prompts)
        for c in range(4)
    ]
    return pd.DataFrame(rows)


def plain_client_run(url: str, requests: list, concurrency: int) -> dict[str, float]:
    """The same requests through a bare AsyncOpenAI loop: the ceiling for this payload."""

    async def send_all() -> None:
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(request) -> None:
            async with semaphore:
                await client.chat.completions.create(
                    model="judge",
                    messages=list(request.messages),
                    temperature=0.0,
                    max_tokens=request.max_tokens,
                    response_format=response_format_for(request.json_schema),
                )

        await asyncio.gather(*(one(r) for r in requests))
        await client.close()

    wall, cpu = time.perf_counter(), cpu_seconds()
    asyncio.run(send_all())
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {"calls_per_s": len(requests) / wall, "cpu_ms_per_call": 1000 * cpu / len(requests)}


def share(rate: float, bound: float | None) -> float | None:
    return rate / bound if bound else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    # At zero latency there is no bound: the client's own CPU is the limit.
    bound = args.concurrency / args.latency if args.latency else None
    frame = completions(args.prompts)
    report: dict = {
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "bound_calls_per_s": bound,
        "prompts": args.prompts,
    }
    with (
        serve_in_subprocess(latency_s=args.latency, responder="schema") as url,
        tempfile.TemporaryDirectory() as tmp,
    ):
        config = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": "judge",
                "base_url": url,
                "max_concurrent": args.concurrency,
            },
            name="judge",
        )
        with LLMClient(config, Path(tmp) / "cache.sqlite", progress=False) as judge:
            for stage, run in (
                ("aspects", lambda: annotate_aspects(frame, judge, aspects=DEFAULT_ASPECTS)),
                ("critiques", lambda: critique_completions(frame, judge)),
            ):
                calls_before = judge.stats.calls
                wall, cpu = time.perf_counter(), cpu_seconds()
                rows = run()
                wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
                calls = judge.stats.calls - calls_before
                readable = float(rows["parse_status"].isin(["ok", "na"]).mean())
                report[stage] = {
                    "calls": calls,
                    "rows": len(rows),
                    "wall_s": wall,
                    "calls_per_s": calls / wall,
                    "ratio_of_bound": share(calls / wall, bound),
                    "cpu_ms_per_call": 1000 * cpu / calls,
                    "readable": readable,
                }
        # Rebuild exactly the aspect requests the runner sent, for the bare-client ceiling.
        requests = [
            build_aspect_request(
                aspect, instruction, list(group["response"]), order, structured=True
            )
            for (_, instruction), group in frame.groupby(["prompt_id", "instruction"])
            for aspect in DEFAULT_ASPECTS
            for order in shuffle_orders(str(group["prompt_id"].iloc[0]), 4, 1, 42, aspect=aspect)
        ]
        plain = plain_client_run(url, requests, args.concurrency)
        report["plain_async_openai_same_aspect_requests"] = {
            **plain,
            "ratio_of_bound": share(plain["calls_per_s"], bound),
        }
        report["aspects"]["ratio_of_plain_client"] = (
            report["aspects"]["calls_per_s"] / plain["calls_per_s"]
        )
    save("annotate_throughput", report)


if __name__ == "__main__":
    main()
