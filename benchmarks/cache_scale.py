"""What a request-cache lookup costs as the cache grows: 4k entries against 4M.

    python benchmarks/cache_scale.py [--sizes 4096,4194304] [--lookups 65536]

For each size, a fresh `RequestCache` in a temporary folder is filled through its own
`put` (answers of a judge reply's size, ~600 characters) and flushed; then `--lookups`
keys, half of them cached and half not, in a shuffled order, are looked up through
`get_many` in batches of 4,096, as the client looks up a batch of requests. Per size:
the file's size, the time per entry written, and the wall and CPU time per key looked up
(hits and misses alike). Then what a whole call costs the client with that cache: an
`LLMClient` on the cache makes `--calls` calls to the project's server (its own process,
zero latency), half of them answered from the cache by an earlier run, and its process
CPU per call is counted. The claims are the ratios of the largest size's costs to the
smallest's.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import cpu_seconds, save  # noqa: E402

BATCH = 4096
REPLY = (
    '{"rating": 4, "rationale": "The text answers the question and follows the format; one '
    + "claim is unsupported, which keeps it from the top rating. " * 8
    + '"}'
)


def client_calls(path: Path, calls: int, base_url: str, tag: str) -> float:
    """Client CPU seconds per call for `calls` calls on the cache at `path`, the first half
    cached by an earlier client."""
    from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient

    config = EndpointConfig.from_dict(
        {"backend": "openai", "model": "bench", "base_url": base_url, "max_concurrent": 64}
    )
    batch = [
        ChatRequest.from_prompt(f"{tag} prompt {i}", temperature=0.0, max_tokens=64)
        for i in range(calls)
    ]
    with LLMClient(config, path, progress=False) as client:
        client.complete_many(batch[: calls // 2], desc=None)
    with LLMClient(config, path, progress=False) as client:
        cpu = cpu_seconds()
        results = client.complete_many(batch, desc=None)
        cpu = cpu_seconds() - cpu
    assert sum(result.cached for result in results) == calls // 2
    return cpu / calls


def one_size(entries: int, lookups: int, calls: int, base_url: str, seed: int) -> dict:
    from llm_feedback.backends.cache import RequestCache
    from llm_feedback.backends.contract import ChatResult

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="llmfb-cache-scale-") as folder:
        path = Path(folder) / "request_cache.sqlite"
        cache = RequestCache(path)
        started = time.perf_counter()
        for n in range(entries):
            answer = ChatResult(REPLY, "stop", prompt_tokens=900, completion_tokens=150)
            cache.put(f"key-{n:012d}", answer)
        cache.flush()
        write_s = time.perf_counter() - started
        hits = [f"key-{rng.randrange(entries):012d}" for _ in range(lookups // 2)]
        misses = [f"absent-{n:012d}" for n in range(lookups - len(hits))]
        keys = hits + misses
        rng.shuffle(keys)
        answers, cpu = [], cpu_seconds()
        started = time.perf_counter()
        for start in range(0, len(keys), BATCH):
            answers.append(cache.get_many(keys[start : start + BATCH]))
        wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        batches = [keys[start : start + BATCH] for start in range(0, len(keys), BATCH)]
        found = sum(
            key in answer for batch, answer in zip(batches, answers, strict=True) for key in batch
        )
        cache.close()
        call_cpu = client_calls(path, calls, base_url, f"size {entries}")
        size_mib = sum(p.stat().st_size for p in Path(folder).iterdir()) / 2**20
    return {
        "entries": entries,
        "file_mib": size_mib,
        "write_us_per_entry": write_s / entries * 1e6,
        "lookups": len(keys),
        "found": found,
        "lookup_us_per_key": wall / len(keys) * 1e6,
        "lookup_cpu_us_per_key": cpu / len(keys) * 1e6,
        "calls": calls,
        "client_cpu_us_per_call": call_cpu * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="4096,4194304")
    parser.add_argument("--lookups", type=int, default=65_536)
    parser.add_argument("--calls", type=int, default=16_384)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    from llm_feedback.testing.server import serve_in_subprocess

    with serve_in_subprocess(latency_s=0.0, responder="echo") as base_url:
        with tempfile.TemporaryDirectory(prefix="llmfb-cache-warm-") as folder:
            # The first client of a process pays for imports and warm-up: not the cache's.
            client_calls(Path(folder) / "warm.sqlite", 1024, base_url, "warm-up")
        results = [one_size(size, args.lookups, args.calls, base_url, seed=size) for size in sizes]
    for result in results:
        assert result["found"] == result["lookups"] // 2, result  # every hit found, no miss
    save("cache_scale", {"results": results, "batch": BATCH})


if __name__ == "__main__":
    main()
