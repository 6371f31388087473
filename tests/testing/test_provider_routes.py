"""The test server's Anthropic and Gemini routes, read by the providers' own SDKs: their
errors arrive as the SDKs' own exception classes with the provider's wait attached, and
Anthropic's API version 2026-10-21 refuses sampling parameters as the real one does."""

from __future__ import annotations

import pytest

from llm_feedback.testing.server import FakeLLMServer, Reply, sequence

anthropic = pytest.importorskip("anthropic")
genai = pytest.importorskip("google.genai")


def claude(server: FakeLLMServer):
    return anthropic.Anthropic(
        api_key="test-key-123456", base_url=server.base_url.removesuffix("/v1"), max_retries=0
    )


def gemini(server: FakeLLMServer):
    root = server.base_url.removesuffix("/v1")
    options = genai.types.HttpOptions(base_url=root, api_version="v1beta")
    return genai.Client(api_key="test-key-123456", http_options=options)


def test_anthropic_refuses_temperature_like_api_version_2026_10_21():
    with FakeLLMServer() as server:
        client = claude(server)
        ask = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(anthropic.BadRequestError, match="temperature: Extra inputs"):
            client.messages.create(**ask, extra_body={"temperature": 0.0})
        message = client.messages.create(**ask)
    assert message.content[0].text == "Echo: hi"
    assert message.usage.input_tokens == 1 and server.request_count == 1


def test_anthropic_rate_limit_and_overload_arrive_as_the_sdk_classes():
    replies = [Reply(status=429, retry_after=7), Reply(status=529, error_message="Overloaded")]
    with FakeLLMServer(sequence(replies)) as server:
        client = claude(server)
        ask = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(anthropic.RateLimitError) as limited:
            client.messages.create(**ask)
        with pytest.raises(anthropic.OverloadedError) as overloaded:
            client.messages.create(**ask)
    assert limited.value.response.headers["retry-after"] == "7"
    assert limited.value.body["error"]["type"] == "rate_limit_error"
    assert overloaded.value.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert overloaded.value.response.headers["request-id"].startswith("req_")


def test_gemini_resource_exhausted_carries_retry_info():
    with FakeLLMServer(sequence([Reply(status=429, retry_after=12)])) as server:
        client = gemini(server)  # kept: a collected client closes its connection pool
        with pytest.raises(genai.errors.ClientError) as limited:
            client.models.generate_content(model="gemini-x", contents="hi")
    error = limited.value
    assert (error.code, error.status) == (429, "RESOURCE_EXHAUSTED")
    delays = [d.get("retryDelay") for d in error.details["error"]["details"]]
    assert "12s" in delays


def test_gemini_reads_a_wrong_key_as_api_key_invalid():
    with FakeLLMServer(api_key="the-right-key-000") as server:
        client = gemini(server)
        with pytest.raises(genai.errors.ClientError) as refused:
            client.models.generate_content(model="gemini-x", contents="hi")
    reasons = [d.get("reason") for d in refused.value.details["error"]["details"]]
    assert refused.value.code == 400 and reasons == ["API_KEY_INVALID"]


def test_anthropic_thinking_is_checked_and_comes_back_in_a_thinking_block():
    def thinker(body, ctx):
        return Reply(content="Rating: [[6]]", reasoning="weigh it")

    with FakeLLMServer(thinker) as server:
        client = claude(server)
        ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        with pytest.raises(anthropic.BadRequestError, match="budget_tokens: Input should be >="):
            client.messages.create(
                **ask, max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 512}
            )
        with pytest.raises(anthropic.BadRequestError, match="must be greater than"):
            client.messages.create(
                **ask, max_tokens=1024, thinking={"type": "enabled", "budget_tokens": 1024}
            )
        message = client.messages.create(
            **ask, max_tokens=1100, thinking={"type": "enabled", "budget_tokens": 1024}
        )
    thinking, text = message.content
    assert (thinking.type, thinking.thinking, text.text) == (
        "thinking",
        "weigh it",
        "Rating: [[6]]",
    )
    assert message.usage.output_tokens == 4  # the thought's two words and the verdict's two
    assert message.usage.output_tokens_details.thinking_tokens == 2
    assert server.request_count == 1  # the refused ones were never answered


def test_gemini_thinking_config_is_checked_and_its_thoughts_billed():
    def thinker(body, ctx):
        return Reply(content="Rating: [[6]]", reasoning="weigh it")

    with FakeLLMServer(thinker) as server:
        client = gemini(server)
        both = {"thinking_config": {"thinking_budget": 64, "thinking_level": "LOW"}}
        with pytest.raises(genai.errors.ClientError, match="not supported together"):
            client.models.generate_content(model="gemini-x", contents="hi", config=both)
        config = {"thinking_config": {"thinking_budget": 64}, "max_output_tokens": 80}
        response = client.models.generate_content(model="gemini-x", contents="hi", config=config)
        (body,) = server.requests
    assert response.text == "Rating: [[6]]"
    assert response.usage_metadata.thoughts_token_count == 2
    assert response.usage_metadata.candidates_token_count == 2
    assert body["max_tokens"] == 80 and body["thinking_budget"] == 64
