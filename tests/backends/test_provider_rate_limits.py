"""Per-minute limits on Claude and Gemini endpoints, through their official SDKs against the
project's server enforcing the limits in each provider's words: Anthropic's
`anthropic-ratelimit-*` headers and 429 `retry-after`, Gemini's 429 with `RetryInfo` (it
sends no rate-limit headers)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.rate_limit import BURST_S
from llm_feedback.testing.server import FakeLLMServer, RateLimits, echo_responder
from tests.backends.test_provider_backends import PROVIDERS, endpoint

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

# The server's buckets hold two of the client's bursts (see tests/backends/test_rate_limit.py).
SERVER_BURST_S = 2 * BURST_S
RPM = 1200.0  # 20 a second: within what one SDK client sends on a shared 2-core machine


def limited(server: FakeLLMServer, backend: str, **settings) -> EndpointConfig:
    """A provider endpoint that retries long enough to ride out the server's refusals."""
    return endpoint(server, backend, max_retries=20, max_concurrent=16, **settings)


def run(server: FakeLLMServer, config: EndpointConfig, n: int):
    """(results, seconds) of `n` distinct requests through one client."""
    requests = [ChatRequest.from_prompt(f"question {i}", max_tokens=16) for i in range(n)]
    with LLMClient(config, None, progress=False) as client:
        started = time.perf_counter()
        results = client.complete_many(requests)
        return results, time.perf_counter() - started


@pytest.mark.parametrize("backend", PROVIDERS)
def test_configured_limits_pace_without_a_429(backend):
    n = 120
    limits = RateLimits(requests_per_minute=RPM, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        results, elapsed = run(server, limited(server, backend, requests_per_minute=RPM), n)
        stats = server.stats()
    assert all(result.ok for result in results)
    assert stats["rate_limited"] == 0 and stats["chat_requests"] == n
    # After the first burst, never faster than the limit.
    assert (n - RPM / 60 * BURST_S) / elapsed <= RPM / 60 * 1.05


def test_anthropics_headers_set_the_pace_where_none_is_configured():
    n = 120
    limits = RateLimits(requests_per_minute=RPM, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        results, elapsed = run(server, limited(server, "anthropic"), n)
        stats = server.stats()
    assert all(result.ok for result in results)
    # The first answers' headers name the limit: from then on no refusal.
    assert stats["rate_limited"] <= 16
    assert (n - 16 - RPM / 60 * BURST_S) / elapsed <= RPM / 60 * 1.05


def test_geminis_429s_are_retried_after_the_wait_they_name():
    """Gemini says nothing of its limits until it refuses: unpaced, its 429s' RetryInfo
    delays hold every send and space the sends after them, and every call is answered.
    (Released all at once, the held sends were refused three times per call, and one
    call in 80 lost every round until its 21 attempts were spent.)"""
    limits = RateLimits(requests_per_minute=RPM, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        results, _ = run(server, limited(server, "gemini"), 80)
        stats = server.stats()
    assert all(result.ok for result in results)
    assert stats["chat_requests"] == 80
    assert 0 < stats["rate_limited"] < stats["chat_requests"]


def test_anthropic_headers_are_read_in_the_names_the_pacing_takes():
    from llm_feedback.backends.anthropic_backend import rate_limit_headers  # noqa: PLC0415

    now = datetime(2026, 12, 6, 4, 0, 0, tzinfo=UTC).timestamp()
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-12-06T04:00:01.500Z",
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-reset": "not a time",
    }
    assert rate_limit_headers(headers, now) == {
        "x-ratelimit-limit-requests": "50",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1.500",
        "x-ratelimit-limit-tokens": "40000",
    }
