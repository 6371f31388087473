"""Judge throughput against the concurrency/latency bound, and the judge layer's CPU cost.

A `Judge` batch (prompt building, the client's cache/retry/concurrency path, reply
parsing) against the fake server in its own process, answering like a judge: "Rating:
[[N]]" to a 1-10 grading prompt, "1" or "0" to a binary one.

    python benchmarks/judge_throughput.py [--judgments 1600] [--latency 0.2] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import best_of, cpu_seconds, save  # noqa: E402

from llm_feedback.backends import EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.judges import Judge  # noqa: E402
from llm_feedback.testing.server import serve_in_subprocess  # noqa: E402

RESPONDER = "judge_throughput:judge_responder"  # imported by the server's own process


def judge_responder(body: dict[str, Any], ctx: Any) -> str:
    """A deterministic judge: the verdict depends on the prompt's text only."""
    text = body["messages"][-1]["content"]
    digest = zlib.crc32(text.encode())
    if "[[6]]" in text:  # the 1-10 prompt shows its reply format with an example
        return f"The answer is relevant and mostly accurate. Rating: [[{digest % 10 + 1}]]"
    return str(digest % 2)


def endpoint(base_url: str, concurrency: int) -> EndpointConfig:
    # Free-text replies, as a judge without structured output gives them.
    return EndpointConfig.from_dict(
        {
            "backend": "openai",
            "model": "bench-judge",
            "base_url": base_url,
            "max_concurrent": concurrency,
            "structured_output": False,
        },
        name="bench",
    )


def items(n: int) -> tuple[list[str], list[str], list[str]]:
    questions = [f"Question {i}: what is {i} squared?" for i in range(n)]
    references = [str(i * i) for i in range(n)]
    predictions = [f"{i} squared is {i * i + i % 3}." for i in range(n)]
    return questions, references, predictions


def run_judge(base_url: str, kind: str, n: int, concurrency: int) -> dict[str, float]:
    questions, references, predictions = items(n)
    with Judge(endpoint(base_url, concurrency)) as judge:
        cpu, wall = cpu_seconds(), time.perf_counter()
        if kind == "single_1_10":
            outcomes = judge.evaluate_single_batch(questions, predictions)
        else:
            outcomes = judge.evaluate_binary_batch(questions, references, predictions)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    parsed = sum(outcome["success"] for outcome in outcomes)
    assert parsed == n, f"{n - parsed} of {n} replies were not parsed"
    return {"judgments_per_s": n / wall, "cpu_ms_per_judgment": 1000 * cpu / n, "wall_s": wall}


def run_client_only(base_url: str, n: int, concurrency: int) -> dict[str, float]:
    """The same 1-10 requests through the bare client, built before the clock starts:
    the baseline that isolates what building and parsing judgments cost."""
    questions, _, predictions = items(n)
    config = endpoint(base_url, concurrency)
    with Judge(config) as judge:
        requests = [
            judge.single_task(question, prediction).request
            for question, prediction in zip(questions, predictions, strict=True)
        ]
    with LLMClient(config, None, progress=False) as client:
        cpu, wall = cpu_seconds(), time.perf_counter()
        client.complete_many(requests, desc=None)
        wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {"judgments_per_s": n / wall, "cpu_ms_per_judgment": 1000 * cpu / n, "wall_s": wall}


def ratio(result: dict[str, float], bound: float) -> dict[str, float]:
    return {**result, "ratio_of_bound": result["judgments_per_s"] / bound}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--judgments", type=int, default=1600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--zero-latency-judgments", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    bound = args.concurrency / args.latency
    report: dict[str, Any] = {
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "bound_judgments_per_s": bound,
        "judgments": args.judgments,
    }
    with serve_in_subprocess(latency_s=args.latency, responder=RESPONDER) as url:
        for kind in ("single_1_10", "binary"):
            report[kind] = ratio(
                best_of(
                    args.runs,
                    lambda kind=kind: run_judge(url, kind, args.judgments, args.concurrency),
                    "judgments_per_s",
                ),
                bound,
            )
        # Measured in the same conditions: the share of the bound the bare client reaches.
        report["client_only"] = ratio(
            best_of(
                args.runs,
                lambda: run_client_only(url, args.judgments, args.concurrency),
                "judgments_per_s",
            ),
            bound,
        )
    # At zero latency the client's own CPU is the limit: what judging adds per call.
    n = args.zero_latency_judgments
    with serve_in_subprocess(latency_s=0.0, responder=RESPONDER) as url:
        judge = best_of(
            args.runs, lambda: run_judge(url, "single_1_10", n, args.concurrency), "judgments_per_s"
        )
        client = best_of(
            args.runs, lambda: run_client_only(url, n, args.concurrency), "judgments_per_s"
        )
    report["zero_latency"] = {
        "judgments": n,
        "judge": judge,
        "client_only": client,
        "judge_overhead_cpu_ms_per_judgment": judge["cpu_ms_per_judgment"]
        - client["cpu_ms_per_judgment"],
    }
    save("judge_throughput", report)


if __name__ == "__main__":
    main()
