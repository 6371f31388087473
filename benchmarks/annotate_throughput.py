"""Annotate throughput (aspect calls and critiques) against the concurrency/latency bound.

The judge is the fake server in its own process, answering every JSON schema at a fixed
latency; what is measured is our annotation layer on top of the client.

    python benchmarks/annotate_throughput.py [--prompts 400] [--latency 0.2] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_seconds, save  # noqa: E402

from llm_feedback.annotation import DEFAULT_ASPECTS  # noqa: E402
from llm_feedback.annotation.runner import annotate_aspects, critique_completions  # noqa: E402
from llm_feedback.backends import EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.testing.server import serve_in_subprocess  # noqa: E402


def completions(prompts: int) -> pd.DataFrame:
    rows = [
        {"prompt_id": f"p{p:05d}", "completion_idx": c, "source": "sharegpt",
         "instruction": f"Explain idea {p} in plain words.", "world_knowledge": "",
         "model": f"m{c}", "principle": "helpfulness", "system_prompt": "Be helpful.",
         "response": f"Answer {c} to idea {p}: " + "some words " * 40, "error": None}
        for p in range(prompts) for c in range(4)
    ]
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    bound = args.concurrency / args.latency
    frame = completions(args.prompts)
    report: dict = {"latency_s": args.latency, "concurrency": args.concurrency,
                    "bound_calls_per_s": bound, "prompts": args.prompts}
    with serve_in_subprocess(latency_s=args.latency, responder="schema") as url, \
            tempfile.TemporaryDirectory() as tmp:
        config = EndpointConfig.from_dict({"backend": "openai", "model": "judge",
                                           "base_url": url, "max_concurrent": args.concurrency},
                                          name="judge")
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
                report[stage] = {"calls": calls, "rows": len(rows), "wall_s": wall,
                                 "calls_per_s": calls / wall,
                                 "ratio_of_bound": calls / wall / bound,
                                 "cpu_ms_per_call": 1000 * cpu / calls, "readable": readable}
    save("annotate_throughput", report)


if __name__ == "__main__":
    main()
