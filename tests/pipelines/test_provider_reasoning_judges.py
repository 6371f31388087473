"""Claude and Gemini as reasoning judges, through their official SDKs against the project's
server speaking each provider's API: the thinking budget goes natively (Anthropic's
`thinking.budget_tokens`, Gemini's `thinking_config.thinking_budget`) with the reply's cap
raised by it, the verdict is read after the thinking, log-probability verdicts are off
with the reason stated, and the thinking is billed.

The scripted judge (`ThinkingJudge`, field style) thinks for the whole of the verdict's
default budget on half the items. Gemini 2.5 thinks on its own when no budget is given,
inside `max_output_tokens`; for Claude the case without a budget stands for thinking held
inside the verdict's `max_tokens`, as Anthropic counts it."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
import pytest

from llm_feedback.backends import BACKENDS, ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.base import kind_of
from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation import run_evaluation
from llm_feedback.judges.kinds.single_1_10 import MAX_TOKENS
from llm_feedback.replies.status import EMPTY, OK
from llm_feedback.testing.provider_apis import THINKING_BUDGET
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext
from tests.pipelines.test_evaluate_reasoning_judge import ITEMS, THOUGHT, ThinkingJudge, samples

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

# The backends that reach a provider through its own SDK and batch API.
PROVIDERS = sorted(name for name in BACKENDS if hasattr(kind_of(name), "batch_jobs"))


def provider_endpoints(server: FakeLLMServer, backend: str, **settings: Any) -> dict[str, Any]:
    """Runtime endpoints whose `local` judge is `backend` pointed at the fake server."""
    return {
        "local": {
            "backend": backend,
            "model": "fake-model",
            "base_url": server.base_url.removesuffix("/v1"),  # the SDKs add /v1 or /v1beta
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            **settings,
        }
    }


def judge_with(server: FakeLLMServer, backend: str, **settings: Any) -> pd.DataFrame:
    params = {"mode": "single_1_10", "judge": {"endpoint": "local"}, "max_reasks": 0}
    endpoints = provider_endpoints(server, backend, **settings)
    judgments, _ = run_evaluation(samples(), params, endpoints, None, progress=False)
    return judgments


@pytest.mark.parametrize("backend", PROVIDERS)
def test_a_separate_thinking_budget_reaches_the_provider_and_every_verdict_is_read(backend, caplog):
    caplog.set_level(logging.INFO, logger="llm_feedback.evaluation.judging")
    judge = ThinkingJudge("field")
    with FakeLLMServer(judge) as server:
        judgments = judge_with(server, backend, reasoning_tokens=THOUGHT)
    assert (judgments["parse_status"] == OK).all()
    assert (judgments["score"] == 7).all()  # the verdict after the thought, never its 2
    # The provider got the budget in its own field and a cap holding thought and verdict.
    assert {body[THINKING_BUDGET] for body in judge.bodies} == {THOUGHT}
    assert set(judge.budgets) == {MAX_TOKENS + THOUGHT}
    assert "log-probability verdicts off: endpoints.local sets a reasoning budget" in caplog.text


@pytest.mark.parametrize("backend", PROVIDERS)
def test_without_it_the_unreadable_count_says_so(backend, caplog):
    caplog.set_level(logging.INFO, logger="llm_feedback.evaluation.judging")
    judge = ThinkingJudge("field")
    with FakeLLMServer(judge) as server:
        judgments = judge_with(server, backend)
    # No reasoning budget: the log still says why no token probabilities are asked for.
    reason = kind_of(backend).logprobs_unavailable(None)
    assert reason and f"log-probability verdicts off: {reason}" in caplog.text
    assert not any(THINKING_BUDGET in body for body in judge.bodies)
    assert set(judge.budgets) == {MAX_TOKENS}
    assert f"{ITEMS // 2} replies ran out of tokens before any answer" in caplog.text
    statuses = judgments.set_index("instance_id")["parse_status"]
    thinkers = [f"i{item}" for item in range(ITEMS) if item % 2]
    assert (statuses[thinkers] == EMPTY).all()
    assert (statuses.drop(thinkers) == OK).all()


def thinker(body: dict[str, Any], ctx: RequestContext) -> Reply:
    return Reply(content="Rating: [[8]]", reasoning="thought " * 40)


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("backend", PROVIDERS)
def test_thinking_is_billed_as_output_and_counted_as_reasoning(backend, batch, tmp_path):
    settings = {"reasoning_tokens": 2048, "batch_poll_seconds": 0.02}
    if batch:
        settings["mode"] = "batch"
    with FakeLLMServer(thinker) as server:
        definition = provider_endpoints(server, backend, **settings)["local"]
        config = EndpointConfig.from_dict(definition, name="judge")
        cache = tmp_path / "cache.sqlite"
        with LLMClient(config, cache, progress=False) as client:
            (result,) = client.complete_many([ChatRequest.from_prompt("Rate it.", max_tokens=64)])
            stats = client.stats
        (body,) = server.requests
    assert result.text == "Rating: [[8]]" and result.via_batch == batch
    assert body["max_tokens"] == 64 + 2048 and body[THINKING_BUDGET] == 2048
    # 40 words of thought and 2 of verdict (the server's token count), all billed.
    assert result.reasoning_tokens == 40 and result.completion_tokens == 42
    assert stats.reasoning_tokens == 40 and stats.completion_tokens == 42


@pytest.mark.parametrize("backend", PROVIDERS)
def test_an_effort_goes_as_the_providers_own_setting(backend):
    with FakeLLMServer(thinker) as server:
        definition = provider_endpoints(server, backend, reasoning_effort="high")["local"]
        config = EndpointConfig.from_dict(definition, name="judge")
        with LLMClient(config, progress=False) as client:
            result = client.complete(ChatRequest.from_prompt("Rate it.", max_tokens=64))
        (body,) = server.requests
    # Anthropic's output_config.effort, Gemini 3's thinking_level: the cap is the verdict's.
    assert result.ok and body["reasoning_effort"] == "high" and body["max_tokens"] == 64
    assert THINKING_BUDGET not in body
    assert config.reasoning_judge is not None  # its log-probability verdicts stay off


@pytest.mark.parametrize(
    ("backend", "settings", "message"),
    [
        ("anthropic", {"reasoning_tokens": 512}, "budget of at least 1024 tokens, got 512"),
        ("anthropic", {"reasoning_effort": "minimal"}, "Claude takes low, medium, high"),
        (
            "gemini",
            {"reasoning_tokens": 2048, "reasoning_effort": "low"},
            "set reasoning_tokens .* or reasoning_effort .*, not both",
        ),
    ],
)
def test_a_budget_the_provider_refuses_is_refused_before_any_call(backend, settings, message):
    definition = {"backend": backend, "model": "m", "base_url": "http://127.0.0.1:9", **settings}
    with pytest.raises(ConfigError, match=message):
        EndpointConfig.from_dict(definition, name="judge")
