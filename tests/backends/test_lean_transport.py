"""The lean transport and the openai SDK send the same requests and read the same results,
over real HTTP against the project's server, on success and on every error path."""

import json

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LeanOpenAIBackend, LLMClient
from llm_feedback.backends.openai_backend import OpenAICompatibleBackend
from llm_feedback.testing.server import (
    FakeLLMServer,
    Reply,
    flaky,
    schema_responder,
    scripted,
)

SCHEMA = {
    "type": "object",
    "properties": {"rating": {"type": "integer", "enum": [1, 2, 3]}},
    "required": ["rating"],
    "additionalProperties": False,
}
REQUESTS = [
    ChatRequest.from_prompt("plain question", temperature=0.0, max_tokens=32),
    ChatRequest.from_prompt("with a system prompt", system="Be brief.", top_p=0.6, seed=7),
    ChatRequest.from_prompt("stop here", stop=["###", "\n\n"], max_tokens=8),
    ChatRequest.from_prompt("rate it", json_schema=SCHEMA, temperature=0.0),
    ChatRequest.from_prompt('ünïcödé ✓ "quotes" \\ backslash', temperature=0.3),
]


def endpoint(server, transport, **extra):
    definition = {
        "backend": "openai",
        "model": "m",
        "base_url": server.base_url,
        "transport": transport,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.02,
        "max_failure_share": 1.0,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="t")


def run_both(responder, requests=REQUESTS, **extra):
    """(bodies, results) per transport, each against a fresh server."""
    seen = {}
    for transport in ("lean", "sdk"):
        with FakeLLMServer(responder) as server:
            with LLMClient(endpoint(server, transport, **extra), None, progress=False) as client:
                results = client.complete_many(requests, desc=None)
                retries = client.stats.retries
            # In arrival order, which concurrency shuffles: compared as sorted JSON texts.
            bodies = sorted(json.dumps(body, sort_keys=True) for body in server.requests)
        seen[transport] = (bodies, results, retries)
    return seen


def summary(result):
    return (
        result.text,
        result.finish_reason,
        result.prompt_tokens,
        result.completion_tokens,
        result.error,
    )


def test_the_default_transport_is_lean_and_sdk_is_one_setting_away():
    assert isinstance(
        LLMClient(EndpointConfig.from_dict({"backend": "openai", "model": "m"})).backend,
        LeanOpenAIBackend,
    )
    sdk = EndpointConfig.from_dict({"backend": "openai", "model": "m", "transport": "sdk"})
    backend = LLMClient(sdk).backend
    assert type(backend) is OpenAICompatibleBackend


def test_same_bodies_and_same_results_on_success():
    seen = run_both(schema_responder)
    assert seen["lean"][0] == seen["sdk"][0]
    assert [summary(r) for r in seen["lean"][1]] == [summary(r) for r in seen["sdk"][1]]
    assert all(r.ok for r in seen["lean"][1])
    structured = next(json.loads(b) for b in seen["lean"][0] if "response_format" in b)
    assert structured["response_format"]["json_schema"]["schema"] == SCHEMA


def test_same_retries_after_429_and_500():
    seen = run_both(flaky(schema_responder, failures=2, status=429, retry_after=0.01))
    assert seen["lean"][2] == seen["sdk"][2] == 2 * len(REQUESTS)
    assert [summary(r) for r in seen["lean"][1]] == [summary(r) for r in seen["sdk"][1]]
    seen = run_both(flaky(schema_responder, failures=1, status=500, retry_after=None))
    assert seen["lean"][2] == seen["sdk"][2] == len(REQUESTS)


def test_same_failure_for_a_client_error():
    seen = run_both(lambda body, ctx: Reply(status=400, error_message="bad model"))
    lean, sdk = ([summary(r) for r in seen[t][1]] for t in ("lean", "sdk"))
    assert lean == sdk
    assert lean[0][4] == "HTTP 400: Error code: 400 - bad model"
    assert seen["lean"][2] == seen["sdk"][2] == 0  # never retried


@pytest.mark.parametrize(
    "reply",
    [Reply(raw_body="{not json"), Reply(raw_body='{"choices": []}'), Reply(content=None)],
)
def test_a_malformed_body_is_retried_then_given_up_by_both(reply):
    seen = run_both(
        scripted([], default=lambda body, ctx: reply), requests=REQUESTS[:1], max_retries=2
    )
    for transport in ("lean", "sdk"):
        (result,) = seen[transport][1]
        assert not result.ok
    lean_error, sdk_error = (seen[t][1][0].error for t in ("lean", "sdk"))
    if lean_error.startswith("gave up"):
        assert sdk_error.startswith("gave up after 3 attempts: malformed response")
        assert lean_error.startswith("gave up after 3 attempts: malformed response")
    else:  # a reply without content is an answer, not a transport fault
        assert lean_error == sdk_error == "empty reply"


def test_a_timeout_is_retried_by_both():
    replies = scripted(
        [],
        default=lambda body, ctx: (
            Reply(content="late", delay_s=1.0) if ctx.key_call_index == 0 else "in time"
        ),
    )
    seen = run_both(replies, requests=REQUESTS[:2], timeout_s=0.3)
    for transport in ("lean", "sdk"):
        assert [r.text for r in seen[transport][1]] == ["in time", "in time"]
        assert seen[transport][2] == 2


def test_azure_deployment_urls_and_keys(monkeypatch):
    monkeypatch.setenv("AZURE_API_KEY", "azure-key-0123456789")
    with FakeLLMServer(schema_responder, api_key="azure-key-0123456789") as server:
        for transport in ("lean", "sdk"):
            config = EndpointConfig.from_dict(
                {
                    "backend": "azure",
                    "model": "my-deployment",
                    "azure_endpoint": server.base_url.removesuffix("/v1"),
                    "transport": transport,
                },
                name="az",
            )
            with LLMClient(config, None, progress=False) as client:
                result = client.complete(REQUESTS[0])
                assert result.ok, result.error
                assert client.is_available()
