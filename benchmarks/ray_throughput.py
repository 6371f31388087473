"""Calls/s of the `ray` backend against the `openai` backend, and Ray's fixed start-up cost.

Both send the same requests to the project's server (in its own process, 200 ms a call)
with the same total concurrency, so both have the same bound: concurrency / latency. The
ray backend runs on a local Ray started here (`--cpus`), its http processor with
`--replicas` workers of `--batch-size` rows. Its start-up cost is measured apart: starting
Ray, and a first tiny run (worker processes import the project); the calls/s of the big
run are given end to end and net of one worker pool's start-up (which every stage pays).

    python benchmarks/ray_throughput.py [--requests 1600] [--latency 0.2] [--concurrency 32]
                                        [--replicas 2] [--batch-size 64] [--cpus 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import save, write_section  # noqa: E402

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.testing.server import serve_in_subprocess  # noqa: E402


def requests_for(n: int, tag: str) -> list[ChatRequest]:
    return [
        ChatRequest.from_prompt(
            f"{tag} prompt number {i}", system="Be helpful.", temperature=0.0, max_tokens=64
        )
        for i in range(n)
    ]


def timed_run(config: EndpointConfig, requests: list[ChatRequest]) -> float:
    with LLMClient(config, None, progress=False) as client:
        started = time.perf_counter()
        results = client.complete_many(requests, desc=None)
        wall = time.perf_counter() - started
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return wall


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
        openai_wall = timed_run(openai, requests_for(n, "openai"))

        started = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        ray_init_s = time.perf_counter() - started
        try:
            tiny = args.replicas  # one row per worker: almost all of it is start-up
            tiny_wall = timed_run(cluster, requests_for(tiny, "tiny"))
            ray_wall = timed_run(cluster, requests_for(n, "ray"))
        finally:
            ray.shutdown()

    pool_start_s = max(tiny_wall - args.latency, 0.0)
    report = {
        "requests": n,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "bound_calls_per_s": bound,
        "ray": {"cpus": args.cpus, "replicas": args.replicas, "batch_size": args.batch_size},
        "openai": {"wall_s": openai_wall, "calls_per_s": n / openai_wall},
        "ray_backend": {
            "wall_s": ray_wall,
            "calls_per_s": n / ray_wall,
            "calls_per_s_net_of_pool_start": n / max(ray_wall - pool_start_s, 1e-9),
        },
        "ray_start_up": {"ray_init_s": ray_init_s, "worker_pool_start_s": pool_start_s},
    }
    for name in ("openai", "ray_backend"):
        report[name]["ratio_of_bound"] = report[name]["calls_per_s"] / bound
    save("ray_throughput", report)
    when = {"when": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count()}
    write_section("ray-throughput", markdown({**report, **when}))


def markdown(report: dict) -> str:
    openai, ray_run, start = report["openai"], report["ray_backend"], report["ray_start_up"]
    setup = report["ray"]
    return f"""
## The ray backend against the openai backend (`ray_throughput.py`)
{report["requests"]} calls, {report["latency_s"] * 1000:.0f} ms each, {report["concurrency"]}
in flight (bound {report["bound_calls_per_s"]:.0f} calls/s); a local Ray of {setup["cpus"]} CPUs,
{setup["replicas"]} workers of {setup["batch_size"]} rows; {report["cpus"]} cores, {report["when"]}.

| backend | wall s | calls/s | share of the bound |
| --- | --- | --- | --- |
| openai | {openai["wall_s"]:.1f} | {openai["calls_per_s"]:.0f} | {openai["ratio_of_bound"]:.2f} |
| ray | {ray_run["wall_s"]:.1f} | {ray_run["calls_per_s"]:.0f} | {ray_run["ratio_of_bound"]:.2f} |

Fixed start-up cost of the ray backend: {start["ray_init_s"]:.1f} s to start Ray (once a
process) and {start["worker_pool_start_s"]:.1f} s for a stage's worker pool (every stage);
net of the pool's start the ray run made {ray_run["calls_per_s_net_of_pool_start"]:.0f} calls/s.
On one machine the ray backend can only lose: the same bound, plus its start-up and the
tail of each batch. It wins where one machine is the limit: workers on many nodes, each
with its own CPU, connections and share of the concurrency (or a GPU per vLLM replica).
"""


if __name__ == "__main__":
    main()
