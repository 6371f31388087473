"""Per-minute request and token limits over real HTTP: the fake server enforces them with
429s and rate-limit headers; the client paces to them without a storm of refusals."""

from __future__ import annotations

import asyncio
import time

import pandas as pd
import pytest

from llm_feedback.backends import ChatRequest, ChatResult, EndpointConfig, LLMClient
from llm_feedback.backends.rate_limit import BURST_S, RateLimiter, duration_seconds
from llm_feedback.core.errors import ConfigError
from llm_feedback.testing.server import FakeLLMServer, RateLimits, echo_responder


def endpoint(server: FakeLLMServer, **extra) -> EndpointConfig:
    definition = {
        "backend": "openai",
        "model": "judge-x",
        "base_url": server.base_url,
        "backoff_base_s": 0.01,
        "backoff_max_s": 5.0,
        "max_concurrent": 32,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="limited")


# The server's buckets hold two of the client's bursts: requests arrive a little after
# the client counted them, so equal buckets would refuse by a hair (providers hold a minute).
SERVER_BURST_S = 2 * BURST_S


def prompts(n: int, max_tokens: int = 16) -> list[ChatRequest]:
    return [ChatRequest.from_prompt(f"question {i}", max_tokens=max_tokens) for i in range(n)]


def paced_run(server: FakeLLMServer, config: EndpointConfig, n: int, **sampling):
    """(results, seconds) of `n` distinct requests through one client."""
    with LLMClient(config, None, progress=False) as client:
        started = time.perf_counter()
        results = client.complete_many(prompts(n, **sampling))
        return results, time.perf_counter() - started


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.25", 0.25)],
)
def test_reset_durations_read_as_providers_write_them(text: str, seconds: float):
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [None, "", "soon", "5 s", "1x"])
def test_unreadable_reset_durations_are_none(text):
    assert duration_seconds(text) is None


def test_requests_per_minute_paces_without_429_at_the_limit():
    rpm, n = 6000.0, 500  # 100 a second
    limits = RateLimits(requests_per_minute=rpm, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        results, elapsed = paced_run(server, endpoint(server, requests_per_minute=rpm), n)
        stats = server.stats()
    assert all(result.ok for result in results)
    assert stats["rate_limited"] == 0 and stats["chat_requests"] == n
    # After the first second's burst, the pace is the limit's.
    steady = (n - rpm / 60 * BURST_S) / elapsed
    assert steady == pytest.approx(rpm / 60, rel=0.05)


def test_tokens_per_minute_paces_on_estimates_corrected_by_usage():
    tpm, n = 120_000.0, 300  # 2,000 tokens a second; each call counts ~4 + 16 before usage
    limits = RateLimits(tokens_per_minute=tpm, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        config = endpoint(server, tokens_per_minute=tpm)
        results, elapsed = paced_run(server, config, n, max_tokens=16)
        stats = server.stats()
    assert all(result.ok for result in results)
    assert stats["rate_limited"] == 0
    used = sum(result.prompt_tokens + result.completion_tokens for result in results)
    # Corrected by usage, the pace is not the estimate's (max_tokens) but what was used.
    assert used / elapsed > 0.5 * tpm / 60


def test_the_servers_headers_set_the_pace_where_none_is_configured():
    rpm, n = 6000.0, 400
    limits = RateLimits(requests_per_minute=rpm, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        results, elapsed = paced_run(server, endpoint(server, max_concurrent=16), n)
        stats = server.stats()
    assert all(result.ok for result in results)
    # The first answers' headers name the limit: from then on no refusal.
    assert stats["rate_limited"] <= 16
    # Paced: beyond the sends before the first headers (16) and a burst, at the limit.
    assert (n - 16 - rpm / 60 * BURST_S) / elapsed == pytest.approx(rpm / 60, rel=0.05)


def test_without_pacing_a_limited_server_refuses_in_a_storm():
    """What the pacing prevents: the same run paced only by its concurrency, every
    refusal retried on its own."""
    limits = RateLimits(requests_per_minute=6000.0, burst_s=SERVER_BURST_S)
    with FakeLLMServer(echo_responder, rate_limits=limits) as server:
        config = endpoint(server, max_retries=50)
        with LLMClient(config, None, progress=False) as client:
            client.rate_limiter = None  # the client as it was before per-minute limits
            results = client.complete_many(prompts(400))
        stats = server.stats()
    # Refusals by the hundreds (thousands on a quiet machine; a loaded one sends slower),
    # where the paced run above gets none.
    assert stats["rate_limited"] > len(results) // 4
    assert stats["chat_requests"] == sum(result.ok for result in results)


def test_a_429s_retry_after_pauses_every_send():
    limiter = RateLimiter(None, None, "test")
    limiter.pause(0.2)
    assert limiter.paused_until > time.monotonic() + 0.1
    limiter.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"})
    assert limiter.paused_until > time.monotonic() + 1.5
    limiter.observe({"x-ratelimit-limit-tokens": "60000"})
    assert limiter.tokens is not None and limiter.tokens.per_minute == 60_000


def test_after_a_pause_held_sends_go_one_per_named_wait_and_answers_speed_them_up():
    """The pause's end is no herd: sends are spaced by the 429's wait, each answer halves it."""

    limiter = RateLimiter(None, None, "test")
    limiter.pause(0.1)
    assert limiter.spacing_s == 0.1

    async def three_sends() -> list[float]:
        sent = []
        for _ in range(3):
            await limiter.acquire(10)
            sent.append(time.monotonic())
        return sent

    sent = asyncio.run(three_sends())
    assert all(later - earlier >= 0.09 for earlier, later in zip(sent, sent[1:], strict=False))
    limiter.settle(10, ChatResult(text="ok"))
    assert limiter.spacing_s == 0.05
    for _ in range(10):
        limiter.settle(10, ChatResult(text="ok"))
    assert limiter.spacing_s == 0.0


def test_limits_are_checked_and_paced_by_one_process():
    with FakeLLMServer(echo_responder) as server:
        with pytest.raises(ConfigError, match=r"endpoints\.limited\.requests_per_minute"):
            endpoint(server, requests_per_minute=0)
        with pytest.raises(ConfigError, match=r"endpoints\.limited\.workers"):
            endpoint(server, requests_per_minute=60, workers=4)


def test_the_plan_says_how_long_the_calls_take_at_the_limits():
    from llm_feedback.reporting.metrics import price_usage  # noqa: PLC0415
    from llm_feedback.runs.plan import Stage, describe_plan  # noqa: PLC0415
    from llm_feedback.storage.schema import RUN_PLAN_COLUMN_TYPES  # noqa: PLC0415

    with FakeLLMServer(echo_responder) as server:
        limited = endpoint(server, requests_per_minute=60, tokens_per_minute=1_000_000)
        free = EndpointConfig.from_dict({"backend": "openai", "model": "m"}, name="free")
    rows = []
    for config in (limited, free):
        stage = Stage(config, prompts(120), None)
        rows += stage.rows("judge", [config.model] * 120, "counted")
    plan = price_usage(pd.DataFrame(rows, columns=list(RUN_PLAN_COLUMN_TYPES)), {})
    minutes = dict(zip(plan["endpoint"], plan["minutes_at_limits"], strict=True))
    assert minutes["limited"] == pytest.approx(2.0)  # 120 calls at 60 a minute
    assert pd.isna(minutes["free"])
    assert "endpoint 'limited' needs at least ~2.0 minutes" in describe_plan(plan)
