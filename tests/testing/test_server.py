"""The fake OpenAI-compatible server, exercised over real HTTP with the real openai client."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx2 as httpx
import openai
import psutil
import pytest

from llm_feedback.testing.server import (
    FakeLLMServer,
    Reply,
    RequestContext,
    echo_responder,
    fetch_stats,
    flaky,
    resolve_responder,
    schema_responder,
    scripted,
    sequence,
    serve_in_subprocess,
)

USER_QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def user_message(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def echo_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(responder=echo_responder) as server:
        yield server


def client_for(server: FakeLLMServer, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key="test-key", **{"max_retries": 0, **options}
    )


# --- a small JSON Schema validator, independent of the server's generator -----------------


def schema_violations(instance: Any, schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return schema_violations(instance, target, root)
    problems: list[str] = []
    if "const" in schema and instance != schema["const"]:
        problems.append(f"{instance!r} != const {schema['const']!r}")
    if "enum" in schema and instance not in schema["enum"]:
        problems.append(f"{instance!r} not in {schema['enum']!r}")
    for part in schema.get("allOf", []):
        problems += schema_violations(instance, part, root)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        matching = [branch for branch in branches if not schema_violations(instance, branch, root)]
        if not matching or ("oneOf" in schema and len(matching) > 1):
            problems.append(f"{instance!r} matches {len(matching)} branches")
    if "type" in schema:
        problems += typed_violations(instance, schema, root)
    return problems


PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def typed_violations(instance: Any, schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    expected_types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    # bool is an int subclass in Python but not an integer in JSON Schema.
    if isinstance(instance, bool) and "boolean" not in expected_types:
        return [f"{instance!r} is a boolean, expected {expected_types}"]
    if not any(isinstance(instance, PYTHON_TYPES[name]) for name in expected_types):
        return [f"{instance!r} is not of type {expected_types}"]
    problems: list[str] = []
    if isinstance(instance, dict):
        properties = schema.get("properties", {})
        problems += [
            f"missing {name}" for name in schema.get("required", []) if name not in instance
        ]
        if schema.get("additionalProperties") is False:
            problems += [f"extra {name}" for name in instance if name not in properties]
        for name, value in instance.items():
            if name in properties:
                problems += schema_violations(value, properties[name], root)
    elif isinstance(instance, list):
        if not schema.get("minItems", 0) <= len(instance) <= schema.get("maxItems", len(instance)):
            problems.append(f"array length {len(instance)} out of bounds")
        for item in instance:
            problems += schema_violations(item, schema.get("items", {}), root)
    elif isinstance(instance, str):
        if (
            not schema.get("minLength", 0)
            <= len(instance)
            <= schema.get("maxLength", len(instance))
        ):
            problems.append(f"{instance!r} has a length out of bounds")
    elif isinstance(instance, (int, float)) and not isinstance(instance, bool):
        if instance < schema.get("minimum", instance) or instance > schema.get("maximum", instance):
            problems.append(f"{instance} outside [minimum, maximum]")
        if instance <= schema.get("exclusiveMinimum", instance - 1):
            problems.append(f"{instance} <= exclusiveMinimum")
        if instance >= schema.get("exclusiveMaximum", instance + 1):
            problems.append(f"{instance} >= exclusiveMaximum")
    return problems


RATING_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Rating": {
            "type": "object",
            "properties": {
                "aspect": {"type": "string", "enum": ["helpfulness", "honesty", "truthfulness"]},
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
                "rationale": {"type": "string", "minLength": 30},
            },
            "required": ["aspect", "score", "rationale"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "ratings": {
            "type": "array",
            "items": {"$ref": "#/$defs/Rating"},
            "minItems": 2,
            "maxItems": 4,
        },
        "overall": {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 10},
        "flagged": {"type": "boolean"},
        "verdict": {"anyOf": [{"type": "string", "const": "accept"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}, "maxItems": 0},
    },
    "required": ["ratings", "overall", "flagged", "verdict", "tags"],
    "additionalProperties": False,
}


# --- replies --------------------------------------------------------------------------------


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


# --- responders -----------------------------------------------------------------------------


def test_schema_responder_output_validates_and_varies_with_the_request() -> None:
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "ratings", "schema": RATING_REPLY_SCHEMA, "strict": True},
    }
    with FakeLLMServer(schema_responder) as server, client_for(server) as client:
        documents = [
            json.loads(
                client.chat.completions.create(
                    model="judge",
                    messages=user_message(f"Rate answer {index}"),
                    response_format=response_format,
                )
                .choices[0]
                .message.content
                or ""
            )
            for index in range(25)
        ]
        repeated = client.chat.completions.create(
            model="judge", messages=user_message("Rate answer 0"), response_format=response_format
        )

    for document in documents:
        assert schema_violations(document, RATING_REPLY_SCHEMA, RATING_REPLY_SCHEMA) == []
    scores = {rating["score"] for document in documents for rating in document["ratings"]}
    aspects = {rating["aspect"] for document in documents for rating in document["ratings"]}
    assert len(scores) >= 4  # spread over 1..5, not stuck on one value
    assert aspects == {"helpfulness", "honesty", "truthfulness"}
    assert json.loads(repeated.choices[0].message.content or "") == documents[0]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
        {"type": "number", "minimum": -1.5, "maximum": -1.25},
        {"type": ["integer", "null"], "minimum": 7, "maximum": 7},
        {"type": "null"},
        {"const": {"fixed": [1, 2]}},
        {"oneOf": [{"type": "boolean"}, {"type": "string", "minLength": 40}]},
        {"type": "string", "maxLength": 3},
        {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 5, "maxItems": 5},
        {
            "allOf": [
                {"$ref": "#/definitions/Named"},
                {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            ]
        },
    ],
)
def test_schema_responder_covers_each_keyword(schema: dict[str, Any]) -> None:
    named = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    root = {**schema, "definitions": {"Named": named}}
    body = {
        "messages": USER_QUESTION,
        "response_format": {"type": "json_object", "schema": root},
    }
    for call_index in range(5):
        context = RequestContext(call_index, 0, f"{call_index:032x}", "/v1/chat/completions")
        document = json.loads(schema_responder(body, context))
        assert schema_violations(document, root, root) == [], document


def test_schema_responder_without_schema_falls_back_to_echo() -> None:
    context = RequestContext(0, 0, "0" * 32, "/v1/chat/completions")
    plain = {"messages": USER_QUESTION}
    json_mode = {**plain, "response_format": {"type": "json_object"}}

    assert schema_responder(plain, context) == "Echo: What is the capital of France?"
    assert json.loads(schema_responder(json_mode, context)) == {
        "echo": "Echo: What is the capital of France?"
    }


def test_flaky_fails_exactly_k_times_per_distinct_request() -> None:
    with FakeLLMServer(flaky(echo_responder, failures=2)) as server, client_for(server) as client:
        outcomes: dict[str, list[str]] = {"first": [], "second": []}
        for _ in range(3):
            for text, seen in outcomes.items():
                try:
                    client.chat.completions.create(model="m", messages=user_message(text))
                    seen.append("ok")
                except openai.RateLimitError as error:
                    assert error.response.headers["retry-after"] == "0.05"
                    seen.append("429")

    assert outcomes == {"first": ["429", "429", "ok"], "second": ["429", "429", "ok"]}


def test_client_retries_honour_retry_after_until_flaky_succeeds() -> None:
    with FakeLLMServer(flaky(echo_responder, failures=2, status=503)) as server:
        with client_for(server, max_retries=2) as client:
            completion = client.chat.completions.create(model="m", messages=USER_QUESTION)

    assert completion.choices[0].message.content == "Echo: What is the capital of France?"
    assert server.request_count == 3


def test_scripted_rules_answer_in_order_with_default() -> None:
    def numbered(body: dict[str, Any], ctx: RequestContext) -> str:
        return f"call {ctx.call_index}"

    responder = scripted(
        [
            ("capital", "Paris"),
            (lambda body: body.get("temperature") == 0, Reply(content="cold")),
            ("capital of Spain", "never reached: an earlier rule matches"),
            ("count", numbered),
        ]
    )
    with FakeLLMServer(responder) as server, client_for(server) as client:

        def ask(text: str, **options: Any) -> str | None:
            completion = client.chat.completions.create(
                model="m", messages=user_message(text), **options
            )
            return completion.choices[0].message.content

        assert ask("What is the capital of Spain?") == "Paris"
        assert ask("anything", temperature=0) == "cold"
        assert ask("count me") == "call 2"
        assert ask("no rule for this") == "Echo: no rule for this"


def test_sequence_plays_replies_in_order_then_repeats_the_last() -> None:
    responder = sequence(["first", Reply(status=429), "last"])
    with FakeLLMServer(responder) as server, client_for(server) as client:
        first = client.chat.completions.create(model="m", messages=USER_QUESTION)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=USER_QUESTION)
        rest = [
            client.chat.completions.create(model="m", messages=USER_QUESTION)
            .choices[0]
            .message.content
            for _ in range(2)
        ]

    assert first.choices[0].message.content == "first"
    assert rest == ["last", "last"]


def test_resolve_responder_by_name() -> None:
    assert resolve_responder("echo") is echo_responder
    assert resolve_responder("schema") is schema_responder
    assert resolve_responder("llm_feedback.testing.server:echo_responder") is echo_responder
    with pytest.raises(ValueError, match="module:callable"):
        resolve_responder("no_such_builtin")


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


# --- subprocess mode ------------------------------------------------------------------------


def server_children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def test_subprocess_server_serves_reports_stats_and_is_terminated() -> None:
    children_before = server_children()
    with serve_in_subprocess(responder="llm_feedback.testing.server:echo_responder") as base_url:
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        (server_pid,) = server_children() - children_before
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            completion = client.chat.completions.create(model="m", messages=USER_QUESTION)
        stats = fetch_stats(base_url)

    assert completion.choices[0].message.content == "Echo: What is the capital of France?"
    assert stats["chat_requests"] == 1
    assert server_children() == children_before
    assert not psutil.pid_exists(server_pid)


def test_subprocess_is_terminated_when_the_body_raises() -> None:
    children_before = server_children()
    with pytest.raises(RuntimeError, match="benchmark failed"):
        with serve_in_subprocess(latency_s=0.01):
            raise RuntimeError("benchmark failed")

    assert server_children() == children_before


def test_subprocess_reports_a_responder_that_cannot_be_loaded() -> None:
    with pytest.raises(RuntimeError, match="no_such_module"):
        with serve_in_subprocess(responder="no_such_module:respond"):
            pass


def test_subprocess_server_completes_500_concurrent_requests() -> None:
    async def ask_all(base_url: str) -> int:
        concurrency = asyncio.Semaphore(50)
        async with openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0) as client:

            async def ask(index: int) -> str | None:
                async with concurrency:
                    completion = await client.chat.completions.create(
                        model="m", messages=user_message(f"question {index}")
                    )
                return completion.choices[0].message.content

            contents = await asyncio.gather(*(ask(index) for index in range(500)))
        return len({content for content in contents if content})

    with serve_in_subprocess(responder="echo") as base_url:
        distinct_answers = asyncio.run(ask_all(base_url))
        stats = fetch_stats(base_url)

    assert distinct_answers == 500
    assert stats["chat_requests"] == 500
    assert stats["connections"] <= 51  # pooled keep-alive connections, plus fetch_stats
