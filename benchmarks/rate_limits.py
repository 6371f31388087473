"""Calls against a server that enforces per-minute limits: paced to them, is any refused,
and how close does the throughput come to the limit?

The project's server runs in its own process enforcing `--rpm` requests and `--tpm`
tokens a minute (its buckets hold `--server-burst` seconds of each, far less than a
provider's minute, so that any excess is refused), answering with OpenAI's rate-limit
headers. The client sends `--requests` distinct calls with the endpoint's
`requests_per_minute` / `tokens_per_minute` set to the same limits; then, for contrast,
`--unpaced` calls with pacing off (the client as it was: concurrency and retries only),
which its circuit breaker may stop when too many calls give up after their retries; then
`--requests` calls to Claude's Messages API through the anthropic SDK, once with the same
limits set and once with none (paced by the `anthropic-ratelimit-*` headers alone).

    python benchmarks/rate_limits.py [--requests 2000] [--rpm 600] [--tpm 60000]

Writes results/rate_limits.json and prints it. RESULTS.md counts the throughput after the
client's first burst (`rate_limit.BURST_S` seconds of the limit, sent at once): answered
calls beyond it per minute of wall time, as a share of the limit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import results_runs  # noqa: E402
from common import machine, save, write_section  # noqa: E402

from llm_feedback.backends import ChatRequest, ChatResult, EndpointConfig, LLMClient  # noqa: E402
from llm_feedback.backends.rate_limit import BURST_S  # noqa: E402
from llm_feedback.core.errors import EndpointError  # noqa: E402
from llm_feedback.testing.server import RateLimits, fetch_stats, serve_in_subprocess  # noqa: E402


def run(
    url: str,
    count: int,
    args: argparse.Namespace,
    *,
    paced: bool,
    backend: str = "openai",
    configured: bool = True,
) -> dict:
    """Send `count` distinct calls; what the client and the server saw. `backend`
    anthropic speaks Anthropic's Messages API through its SDK (the server's
    `anthropic-ratelimit-*` headers); `configured` False leaves the endpoint's limits
    unset, so only the server's headers pace it."""
    before = fetch_stats(url)
    limits = {"requests_per_minute": args.rpm, "tokens_per_minute": args.tpm}
    config = EndpointConfig.from_dict(
        {
            "backend": backend,
            "model": "limited",
            # The anthropic SDK adds /v1 itself.
            "base_url": url if backend == "openai" else url.removesuffix("/v1"),
            "max_concurrent": 32,
            "max_retries": 30,
            "backoff_max_s": 5.0,
            **(limits if configured else {}),
        },
        name="limited",
    )
    label = f"{backend} {'paced' if paced else 'unpaced'} {configured}"
    requests = [
        ChatRequest.from_prompt(f"{label} call {i}", max_tokens=args.max_tokens)
        for i in range(count)
    ]
    results: list[ChatResult] = []
    stopped = None
    with LLMClient(config, None, progress=False) as client:
        if not paced:
            client.rate_limiter = None
        started = time.perf_counter()
        try:
            client.complete_many(requests, desc=None, on_result=lambda _, r: results.append(r))
        except EndpointError as error:  # the circuit breaker: too many calls gave up
            stopped = str(error)
        wall = time.perf_counter() - started
    after = fetch_stats(url)
    tokens = sum(result.prompt_tokens + result.completion_tokens for result in results)
    return {
        "calls": count,
        "answered": sum(result.ok for result in results),
        "stopped_by_breaker": stopped,
        "wall_s": wall,
        "refused_429": after["rate_limited"] - before["rate_limited"],
        "requests_sent": after["chat_requests"] - before["chat_requests"],
        "tokens_per_minute": tokens / wall * 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--unpaced", type=int, default=300)
    parser.add_argument("--rpm", type=float, default=600.0)
    parser.add_argument("--tpm", type=float, default=60_000.0)
    parser.add_argument("--server-burst", type=float, default=2.0)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    limits = RateLimits(args.rpm, args.tpm, args.server_burst)
    with serve_in_subprocess(latency_s=0.05, responder="echo", rate_limits=limits) as url:
        paced = run(url, args.requests, args, paced=True)
        unpaced = run(url, args.unpaced, args, paced=False)
        claude = run(url, args.requests, args, paced=True, backend="anthropic")
        claude_headers = run(
            url, args.requests, args, paced=True, backend="anthropic", configured=False
        )
    report = {
        "rpm": args.rpm,
        "tpm": args.tpm,
        "server_burst_s": args.server_burst,
        "client_burst_s": BURST_S,
        "paced": paced,
        "unpaced": unpaced,
        "claude_paced": claude,
        "claude_headers": claude_headers,
    }
    save("rate_limits", report)
    write_section(
        "rate_limits",
        f"{results_runs.rate_limits([report])}\n\nWritten by `benchmarks/rate_limits.py` on "
        f"{time.strftime('%Y-%m-%d %H:%M')}: {machine()}.",
    )


if __name__ == "__main__":
    main()
