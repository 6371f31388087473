"""Calls/s of the `ray` backend against the `openai` backend, and Ray's fixed start-up cost.

Both send the same requests to the project's server (in its own process, 200 ms a call)
with the same total concurrency, so both have the same bound: concurrency / latency. The
ray backend runs on a local Ray started here (`--cpus`), its http processor with
`--replicas` workers of `--batch-size` rows. Its fixed start-up cost: starting Ray (timed
apart, once a process) and, in every stage, starting the worker pool (whose processes
import the project): the time until the server sees the first call. The steady rate is
the server's, between 10% and 90% of the calls (its counter polled every 50 ms).

    python benchmarks/ray_throughput.py [--requests 1600] [--latency 0.2] [--concurrency 32]
                                        [--replicas 2] [--batch-size 64] [--cpus 2]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import results_runs  # noqa: E402
from common import machine, save, write_section  # noqa: E402

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.testing.server import fetch_stats, serve_in_subprocess  # noqa: E402


def requests_for(n: int, tag: str) -> list[ChatRequest]:
    return [
        ChatRequest.from_prompt(
            f"{tag} prompt number {i}", system="Be helpful.", temperature=0.0, max_tokens=64
        )
        for i in range(n)
    ]


def timed_run(config: EndpointConfig, requests: list[ChatRequest], url: str) -> dict[str, float]:
    """Wall time, and from the server's counter (polled): when the first call arrived and
    the rate between 10% and 90% of the calls (the steady part, start-up excluded)."""
    samples: list[tuple[float, int]] = []
    done = threading.Event()
    before = fetch_stats(url)["chat_requests"]

    def poll() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), fetch_stats(url)["chat_requests"] - before))
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    with LLMClient(config, None, progress=False) as client:
        started = time.perf_counter()
        poller.start()
        results = client.complete_many(requests, desc=None)
        wall = time.perf_counter() - started
    done.set()
    poller.join()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    n = len(requests)

    def reached(share: float) -> tuple[float, int]:
        return next((when, count) for when, count in samples if count >= share * n)

    (t10, c10), (t90, c90) = reached(0.1), reached(0.9)
    return {
        "wall_s": wall,
        "calls_per_s": n / wall,
        "first_call_s": reached(1 / n)[0] - started,
        "steady_calls_per_s": (c90 - c10) / max(t90 - t10, 1e-9),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1600)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()
    import ray

    n, bound = args.requests, args.concurrency / args.latency
    with serve_in_subprocess(latency_s=args.latency, responder="echo") as url:
        common = {"model": "bench", "base_url": url, "max_concurrent": args.concurrency}
        openai = EndpointConfig.from_dict({"backend": "openai", **common}, name="openai")
        cluster = EndpointConfig.from_dict(
            {
                "backend": "ray",
                **common,
                "ray_replicas": args.replicas,
                "ray_batch_size": args.batch_size,
            },
            name="ray",
        )
        openai_run = timed_run(openai, requests_for(n, "openai"), url)
        started = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        ray_init_s = time.perf_counter() - started
        try:
            ray_run = timed_run(cluster, requests_for(n, "ray"), url)
        finally:
            ray.shutdown()

    report = {
        "requests": n,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "bound_calls_per_s": bound,
        "ray": {"cpus": args.cpus, "replicas": args.replicas, "batch_size": args.batch_size},
        "openai": openai_run,
        "ray_backend": {**ray_run, "ray_init_s": ray_init_s},
    }
    for name in ("openai", "ray_backend"):
        report[name]["ratio_of_bound"] = report[name]["calls_per_s"] / bound
        report[name]["steady_ratio_of_bound"] = report[name]["steady_calls_per_s"] / bound
    save("ray_throughput", report)
    write_section(
        "ray-throughput",
        f"{results_runs.ray_throughput([report])}\n\nWritten by `benchmarks/ray_throughput.py` "
        f"on {time.strftime('%Y-%m-%d %H:%M')}: {machine()}.",
    )


if __name__ == "__main__":
    main()
