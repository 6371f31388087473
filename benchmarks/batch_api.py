"""Batch mode at scale: the client's cost of writing, uploading, polling and collecting
Batch API jobs, against the project's server in its own process (answers at once).

What is measured is our side: JSONL building, chunking, ledger writes, downloads, parsing
and caching, then a cached rerun.

    python benchmarks/batch_api.py [--requests 20000] [--chunk 5000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_seconds, peak_rss_mib, save  # noqa: E402

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.testing.server import fetch_stats, serve_in_subprocess  # noqa: E402


def run(requests: int, chunk: int) -> dict[str, float]:
    prompts = [
        ChatRequest.from_prompt(f"Question {i}: explain item {i} in two sentences.", max_tokens=64)
        for i in range(requests)
    ]
    figures: dict[str, float] = {"requests": requests, "batch_max_requests": chunk}
    with serve_in_subprocess(responder="echo") as url, tempfile.TemporaryDirectory() as tmp:
        config = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": "fake-model",
                "base_url": url,
                "mode": "batch",
                "batch_poll_seconds": 0.05,
                "batch_max_requests": chunk,
            },
            name="batched",
        )
        cache = Path(tmp) / "request_cache.sqlite"
        for label in ("first", "cached_rerun"):
            wall, cpu = time.perf_counter(), cpu_seconds()
            with LLMClient(config, cache, progress=False) as client:
                results = client.complete_many(prompts, desc=None)
            figures[f"{label}_wall_s"] = round(time.perf_counter() - wall, 2)
            figures[f"{label}_client_cpu_s"] = round(cpu_seconds() - cpu, 2)
            assert all(result.ok for result in results)
        figures["chat_requests_sent"] = fetch_stats(url)["chat_requests"]
    figures["client_cpu_ms_per_request"] = round(1000 * figures["first_client_cpu_s"] / requests, 3)
    figures["peak_rss_mib"] = round(peak_rss_mib(), 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=5_000)
    args = parser.parse_args()
    save("batch_api", run(args.requests, args.chunk))


if __name__ == "__main__":
    main()
