"""What a request-cache lookup costs as the cache grows: 4k entries against 4M.

    python benchmarks/cache_scale.py [--sizes 4096,4194304] [--lookups 65536]

For each size, a fresh `RequestCache` in a temporary folder is filled through its own
`put` (answers of a judge reply's size, ~600 characters) and flushed; then `--lookups`
keys, half of them cached and half not, in a shuffled order, are looked up through
`get_many` in batches of 4,096, as the client looks up a batch of requests. Per size:
the file's size, the time per entry written, and the wall and CPU time per key looked up
(hits and misses alike); the claim is the ratio of the largest size's per-key cost to
the smallest's.
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


def one_size(entries: int, lookups: int, seed: int) -> dict:
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
        size_mib = sum(p.stat().st_size for p in Path(folder).iterdir()) / 2**20
    return {
        "entries": entries,
        "file_mib": size_mib,
        "write_us_per_entry": write_s / entries * 1e6,
        "lookups": len(keys),
        "found": found,
        "lookup_us_per_key": wall / len(keys) * 1e6,
        "lookup_cpu_us_per_key": cpu / len(keys) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="4096,4194304")
    parser.add_argument("--lookups", type=int, default=65_536)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    results = [one_size(size, args.lookups, seed=size) for size in sizes]
    for result in results:
        assert result["found"] == result["lookups"] // 2, result  # every hit found, no miss
    save("cache_scale", {"results": results, "batch": BATCH})


if __name__ == "__main__":
    main()
