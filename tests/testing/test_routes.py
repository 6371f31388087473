"""The fake server's chat, auxiliary and control routes (`routes`, `protocol`), over real
HTTP with the real openai client."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import httpx2 as httpx
import openai
import pytest

from llm_feedback.testing.cli import fetch_stats
from llm_feedback.testing.in_process import FakeLLMServer
from llm_feedback.testing.replies import Reply, RequestContext, echo_responder
from llm_feedback.testing.scripts import flaky, scripted
from tests.testing.conftest import USER_QUESTION, client_for, user_message

# --- chat replies ---------------------------------------------------------------------------


def test_reply_is_a_chat_completion_with_usage_and_the_requested_model(
    echo_server: FakeLLMServer,
) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    with client_for(echo_server) as client:
        completion = client.chat.completions.create(model="judge-7b", messages=messages)

    assert completion.object == "chat.completion"
    assert completion.id and completion.created > 0
    assert completion.model == "judge-7b"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "Echo: What is the capital of France?"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 2 + 6
    assert completion.usage.completion_tokens == 7
    assert completion.usage.total_tokens == 15
    assert echo_server.requests == [{"model": "judge-7b", "messages": messages}]


def test_many_requests_reuse_one_keep_alive_connection(echo_server: FakeLLMServer) -> None:
    with client_for(echo_server) as client:
        for index in range(40):
            client.chat.completions.create(model="m", messages=user_message(f"question {index}"))

    assert echo_server.request_count == 40
    assert echo_server.connection_count == 1


def test_rate_limit_reply_carries_retry_after_header() -> None:
    responder = scripted([("", Reply(status=429, retry_after=0.05, error_message="slow down"))])
    with FakeLLMServer(responder) as server, client_for(server) as client:
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(model="m", messages=USER_QUESTION)

    raw_response = raised.value.response
    assert raw_response.status_code == 429
    assert raw_response.headers["retry-after"] == "0.05"
    assert raw_response.json()["error"] == {
        "message": "slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert raised.value.code == "rate_limit_exceeded"


def test_server_error_reply_raises_internal_server_error() -> None:
    with FakeLLMServer(lambda body, ctx: Reply(status=500)) as server, client_for(server) as client:
        with pytest.raises(openai.InternalServerError) as raised:
            client.chat.completions.create(model="m", messages=USER_QUESTION)

    assert raised.value.status_code == 500
    assert "retry-after" not in raised.value.response.headers


def test_reply_delayed_past_the_client_timeout_times_out() -> None:
    late = Reply(content="too late", delay_s=2.0)
    with FakeLLMServer(lambda body, ctx: late) as server:
        with client_for(server, timeout=0.2) as client, pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(model="m", messages=USER_QUESTION)


def test_global_latency_does_not_block_concurrent_requests() -> None:
    async def ask_concurrently(base_url: str) -> list[str | None]:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            completions = await asyncio.gather(
                *(
                    client.chat.completions.create(model="m", messages=user_message(f"q{i}"))
                    for i in range(10)
                )
            )
        return [completion.choices[0].message.content for completion in completions]

    with FakeLLMServer(echo_responder, latency_s=0.3) as server:
        started = time.perf_counter()
        contents = asyncio.run(ask_concurrently(server.base_url))
        elapsed = time.perf_counter() - started

    assert contents == [f"Echo: q{i}" for i in range(10)]
    # Ten sequential sleeps would take 3 s; overlapping ones take about 0.3 s.
    assert 0.3 <= elapsed < 2.5


def test_malformed_body_makes_the_client_raise_a_json_error() -> None:
    broken = Reply(raw_body='{"id": "chatcmpl-1", "choices": [')
    with FakeLLMServer(lambda body, ctx: broken) as server, client_for(server) as client:
        # The client trusts Content-Type: application/json and lets the decode error out.
        with pytest.raises(json.JSONDecodeError):
            client.chat.completions.create(model="m", messages=USER_QUESTION)


def test_length_finish_reason_models_truncated_output() -> None:
    truncated = Reply(content='{"score": 4, "rationale": "The answer', finish_reason="length")
    with FakeLLMServer(lambda body, ctx: truncated) as server, client_for(server) as client:
        completion = client.chat.completions.create(model="m", messages=USER_QUESTION)

    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == truncated.content


def test_responder_exception_becomes_a_500_naming_it() -> None:
    def broken(body: dict[str, Any], ctx: RequestContext) -> str:
        raise KeyError("missing-template")

    with FakeLLMServer(broken) as server, client_for(server) as client:
        with pytest.raises(openai.InternalServerError, match="missing-template"):
            client.chat.completions.create(model="m", messages=USER_QUESTION)


def test_streaming_requests_are_refused_clearly(echo_server: FakeLLMServer) -> None:
    with client_for(echo_server) as client, pytest.raises(openai.BadRequestError, match="stream"):
        client.chat.completions.create(model="m", messages=USER_QUESTION, stream=True)


# --- routes ---------------------------------------------------------------------------------


def test_azure_deployment_route_echoes_the_deployment(echo_server: FakeLLMServer) -> None:
    azure_endpoint = echo_server.base_url.removesuffix("/v1")
    with openai.AzureOpenAI(
        azure_endpoint=azure_endpoint, api_key="k", api_version="2024-06-01", max_retries=0
    ) as client:
        completion = client.chat.completions.create(model="gpt-deploy", messages=USER_QUESTION)

    assert completion.model == "gpt-deploy"
    assert completion.choices[0].message.content == "Echo: What is the capital of France?"


def test_unversioned_chat_route_and_auxiliary_routes(echo_server: FakeLLMServer) -> None:
    origin = echo_server.base_url.removesuffix("/v1")
    with httpx.Client(base_url=origin, trust_env=False) as http:
        chat = http.post("/chat/completions", json={"model": "m", "messages": USER_QUESTION})
        models = http.get("/v1/models")
        health = http.get("/health")
        unknown = http.get("/v1/embeddings")
        wrong_method = http.get("/v1/chat/completions")
        not_json = http.post("/v1/chat/completions", content=b"{oops")

    assert chat.json()["choices"][0]["message"]["content"].startswith("Echo: ")
    assert [model["id"] for model in models.json()["data"]] == ["fake-model"]
    assert health.json() == {"status": "ok"}
    assert unknown.status_code == 404
    assert wrong_method.status_code == 405
    assert not_json.status_code == 400
    assert not_json.json()["error"]["type"] == "invalid_request_error"


def test_connection_close_is_honoured(echo_server: FakeLLMServer) -> None:
    body = json.dumps({"model": "m", "messages": USER_QUESTION}).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with socket.create_connection(("127.0.0.1", echo_server.port), timeout=5) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):  # ends only because the server closes
            received += chunk

    head, _, payload = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK")
    assert b"Connection: close" in head
    assert json.loads(payload)["object"] == "chat.completion"


def raw_exchange(port: int, request: bytes) -> tuple[bytes, bytes]:
    """Sends `request` on a fresh socket and reads until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, payload = received.partition(b"\r\n\r\n")
    return head, payload


def test_http_1_0_closes_after_one_request_and_bad_heads_get_a_400(
    echo_server: FakeLLMServer,
) -> None:
    body = json.dumps({"model": "m", "messages": USER_QUESTION}).encode()
    http_1_0 = b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    bad_length = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: ten\r\n\r\n"

    head, payload = raw_exchange(echo_server.port, http_1_0)
    assert head.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in head
    assert json.loads(payload)["choices"][0]["message"]["content"].startswith("Echo: ")
    for request, complaint in ((chunked, "Content-Length"), (bad_length, "'ten'")):
        head, payload = raw_exchange(echo_server.port, request)
        assert head.startswith(b"HTTP/1.1 400 Bad Request")
        assert complaint in json.loads(payload)["error"]["message"]


def test_a_wrong_api_key_gets_a_401_and_the_right_one_an_answer() -> None:
    with FakeLLMServer(echo_responder, api_key="sk-right") as server:
        with client_for(server) as client, pytest.raises(openai.AuthenticationError):
            client.chat.completions.create(model="m", messages=USER_QUESTION)
        with openai.OpenAI(base_url=server.base_url, api_key="sk-right", max_retries=0) as client:
            completion = client.chat.completions.create(model="m", messages=USER_QUESTION)

    assert completion.choices[0].message.content == "Echo: What is the capital of France?"


# --- counters -------------------------------------------------------------------------------


def test_counters_stats_and_reset(echo_server: FakeLLMServer) -> None:
    with client_for(echo_server) as client:
        for index in range(3):
            client.chat.completions.create(model="m", messages=user_message(f"q{index}"))
        client.models.list()

    assert echo_server.request_count == 3
    assert [body["messages"][0]["content"] for body in echo_server.requests] == ["q0", "q1", "q2"]
    assert fetch_stats(echo_server.base_url) == {
        "requests": 4,
        "chat_requests": 3,
        "connections": 2,  # the openai client's and fetch_stats' own
        "max_in_flight": 1,  # one call after another
    }

    echo_server.reset()

    assert echo_server.request_count == 0
    assert echo_server.requests == []
    assert echo_server.stats() == {
        "requests": 0,
        "chat_requests": 0,
        "connections": 0,
        "max_in_flight": 0,
    }


def test_reset_route_also_forgets_attempts_per_request() -> None:
    with FakeLLMServer(flaky(echo_responder, failures=1)) as server, client_for(server) as client:
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=USER_QUESTION)
        client.chat.completions.create(model="m", messages=USER_QUESTION)

        reset = httpx.post(server.base_url.removesuffix("/v1") + "/_reset", trust_env=False)

        assert reset.json() == {"reset": True}
        assert server.request_count == 0
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=USER_QUESTION)


def test_server_without_recording_keeps_no_bodies() -> None:
    with FakeLLMServer(echo_responder, record=False) as server, client_for(server) as client:
        client.chat.completions.create(model="m", messages=USER_QUESTION)

    assert server.request_count == 1
    assert server.requests == []
