"""Client throughput against the concurrency/latency bound, and CPU per request.

The fake server runs in its own process so it does not share the client's GIL. Compares
our `LLMClient` with a plain `AsyncOpenAI` loop bounded by a semaphore (the ceiling any
wrapper is measured against). `--workers N` adds a zero-latency run that sends from N
worker processes (backends/workers.py); its CPU per request sums this process and the
workers.

    python benchmarks/throughput.py [--requests 1600] [--latency 0.2] [--concurrency 32]
                                    [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import openai
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from common import best_of, cpu_seconds, save  # noqa: E402

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.testing.server import serve_in_subprocess  # noqa: E402


def requests_for(n: int) -> list[ChatRequest]:
    return [
        ChatRequest.from_prompt(
            f"prompt number {i}", system="Be helpful.", temperature=0.0, max_tokens=64
        )
        for i in range(n)
    ]


def run_ours(
    base_url: str, n: int, concurrency: int, cache: Path | None, workers: int = 1
) -> dict[str, float]:
    config = EndpointConfig.from_dict(
        {
            "backend": "openai",
            "model": "bench",
            "base_url": base_url,
            "max_concurrent": concurrency,
            "workers": workers,
        }
    )
    batch = requests_for(n)
    with LLMClient(config, cache, progress=False) as client:
        processes = []
        if workers > 1:  # started before the clock: a run pays that once, for all stages
            client.complete_many([ChatRequest.from_prompt(f"warm-up {i}") for i in range(64)])
            processes = [psutil.Process(pid) for pid in client.worker_pool.pids]
        own_cpu, workers_cpu = cpu_seconds(), _cpu_of(processes)
        wall = time.perf_counter()
        results = client.complete_many(batch, desc=None)
        wall = time.perf_counter() - wall
        own_cpu, workers_cpu = cpu_seconds() - own_cpu, _cpu_of(processes) - workers_cpu
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return {
        "requests_per_s": n / wall,
        "cpu_ms_per_request": 1000 * (own_cpu + workers_cpu) / n,
        "parent_cpu_ms_per_request": 1000 * own_cpu / n,
        "processes": 1 + len(processes),
        "wall_s": wall,
    }


def _cpu_of(processes: list[psutil.Process]) -> float:
    """User and system CPU seconds the worker processes have used so far."""
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def run_plain(base_url: str, n: int, concurrency: int) -> dict[str, float]:
    async def main() -> None:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
        semaphore = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with semaphore:
                await client.chat.completions.create(
                    model="bench",
                    max_tokens=64,
                    temperature=0.0,
                    messages=[
                        {"role": "system", "content": "Be helpful."},
                        {"role": "user", "content": f"prompt number {i}"},
                    ],
                )

        await asyncio.gather(*(one(i) for i in range(n)))
        await client.close()

    cpu, wall = cpu_seconds(), time.perf_counter()
    asyncio.run(main())
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {"requests_per_s": n / wall, "cpu_ms_per_request": 1000 * cpu / n, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--zero-latency-requests", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--workers", type=int, default=1, help="also send the zero-latency run from N processes"
    )
    args = parser.parse_args()
    bound = args.concurrency / args.latency
    report: dict = {
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "bound_requests_per_s": bound,
    }
    with serve_in_subprocess(latency_s=args.latency, responder="echo") as url:
        ours = best_of(
            args.runs,
            lambda: run_ours(url, args.requests, args.concurrency, None),
            "requests_per_s",
        )
        plain = best_of(
            args.runs, lambda: run_plain(url, args.requests, args.concurrency), "requests_per_s"
        )
    report["latency_run"] = {
        "ours": ours,
        "plain_async_openai": plain,
        "ours_ratio_of_bound": ours["requests_per_s"] / bound,
        "plain_ratio_of_bound": plain["requests_per_s"] / bound,
    }
    # At zero latency the client's own CPU is the limit: what our layer adds per request.
    n = args.zero_latency_requests
    with (
        serve_in_subprocess(latency_s=0.0, responder="echo") as url,
        __import__("tempfile").TemporaryDirectory() as tmp,
    ):
        ours = best_of(
            args.runs, lambda: run_ours(url, n, args.concurrency, None), "requests_per_s"
        )
        cache = Path(tmp) / "cache.sqlite"
        with_cache = run_ours(url, n, args.concurrency, cache)
        rerun = run_ours(url, n, args.concurrency, cache)
        plain = best_of(args.runs, lambda: run_plain(url, n, args.concurrency), "requests_per_s")
        spread = None
        if args.workers > 1:
            spread = best_of(
                args.runs,
                lambda: run_ours(url, n, args.concurrency, None, args.workers),
                "requests_per_s",
            )
    report["zero_latency_run"] = {
        "ours": ours,
        **({f"ours_{args.workers}_workers": spread} if spread else {}),
        "ours_with_cache_writes": with_cache,
        "ours_cached_rerun": rerun,
        "plain_async_openai": plain,
        "overhead_cpu_ms_per_request": ours["cpu_ms_per_request"] - plain["cpu_ms_per_request"],
    }
    save("throughput", report)


if __name__ == "__main__":
    main()
