"""The client over real HTTP against the project's fake OpenAI-compatible server."""

import asyncio
import json
import logging
import time

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient, register_credentials
from llm_feedback.core.errors import ConfigError, EndpointError
from llm_feedback.testing.routes import CACHE_MIN_TOKENS
from llm_feedback.testing.server import FakeLLMServer, Reply, echo_responder, flaky, scripted


def endpoint(server, **extra):
    definition = {
        "backend": "openai",
        "model": "judge-x",
        "base_url": server.base_url,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="test")


def prompts(n, **sampling):
    return [ChatRequest.from_prompt(f"question {i}", **sampling) for i in range(n)]


def test_answers_come_back_in_request_order_with_usage():
    with FakeLLMServer(echo_responder, latency_s=0.01) as server:
        with LLMClient(endpoint(server, max_concurrent=8), None, progress=False) as client:
            results = client.complete_many(prompts(40))
    assert [r.text for r in results] == [f"Echo: question {i}" for i in range(40)]
    assert all(r.ok and r.finish_reason == "stop" for r in results)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in results)


def test_concurrency_is_bounded_by_max_concurrent():
    with FakeLLMServer(echo_responder, latency_s=0.05) as server:
        with LLMClient(endpoint(server, max_concurrent=4), None, progress=False) as client:
            started = time.perf_counter()
            client.complete_many(prompts(16))
            elapsed = time.perf_counter() - started
    # 16 requests of 50 ms each, never more than 4 in flight: at least 4 rounds.
    assert elapsed >= 4 * 0.05 * 0.9


def test_cached_rerun_makes_zero_requests(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), cache, progress=False) as client:
            first = client.complete_many(prompts(10, temperature=0.0))
        assert server.request_count == 10
        with LLMClient(endpoint(server), cache, progress=False) as client:
            again = client.complete_many(prompts(10, temperature=0.0))
            assert client.stats.cache_hits == 10 and client.stats.calls == 0
        assert server.request_count == 10
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.cached for r in again)


def test_new_rows_are_answered_and_only_old_rows_reused(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), cache, progress=False) as client:
            client.complete_many(prompts(5))
            results = client.complete_many(prompts(8))
        assert server.request_count == 8
    assert [r.text for r in results] == [f"Echo: question {i}" for i in range(8)]
    assert [r.cached for r in results] == [True] * 5 + [False] * 3


def test_identical_requests_in_one_batch_are_sent_once():
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            batch = prompts(3) * 4
            results = client.complete_many(batch)
        assert server.request_count == 3
    assert [r.text for r in results] == [f"Echo: question {i % 3}" for i in range(12)]


def test_a_stream_read_as_it_comes_keeps_only_what_the_cache_does_not_hold(tmp_path):
    """`keep_results=False`: each answer (duplicates and cache hits too) reaches on_result
    once; the answers the cache holds are not kept, failures are; without a cache all are."""
    responder = scripted([("doomed", Reply(status=500))])
    batch = [*prompts(3, temperature=0.0), ChatRequest.from_prompt("doomed")] * 2
    with FakeLLMServer(responder) as server:
        for cache in (tmp_path / "c.sqlite", None):
            with LLMClient(endpoint(server, max_retries=0), cache, progress=False) as client:
                client.complete(batch[0])  # one answer comes from the cache
                seen = {}
                kept = client.call(
                    client.stream(batch, on_result=seen.__setitem__, keep_results=False)
                )
            assert sorted(seen) == list(range(8))
            assert [seen[i].text for i in range(3)] == [f"Echo: question {i}" for i in range(3)]
            assert [seen[i + 4].text for i in range(3)] == [seen[i].text for i in range(3)]
            assert not seen[3].ok and not seen[7].ok
            if cache is None:
                assert kept == [seen[i] for i in range(8)]
            else:
                assert kept == [None, None, None, seen[3]] * 2
        # Duplicates are never sent: 1 + 3 calls with the cache (one answer from it), 1 + 4
        assert server.request_count == 4 + 5


@pytest.mark.parametrize("refresh", [False, True])
def test_a_long_stream_sends_each_distinct_request_once_and_forgets_what_it_answered(
    tmp_path, refresh
):
    """A stream read as it comes keeps no key of an answered request (at a million calls
    those would be a gigabyte): a copy that comes after its first was answered is served
    by the cache, one still in flight shares its answer, and nothing is sent twice, with
    `refresh` (no lookups: the stream keeps its keys) too."""
    distinct = prompts(300, temperature=0.0)
    # Copies right behind their first (in flight) and ~1,000 requests later (answered).
    stream = [*distinct[:50], *distinct[:50], *distinct, *distinct[:300:7], *distinct[::-1]]
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), tmp_path / "c.sqlite", progress=False) as client:
            client.refresh = refresh
            seen = {}
            client.call(client.stream(iter(stream), on_result=seen.__setitem__, keep_results=False))
            assert server.request_count == len(distinct)
            assert [seen[i].text for i in range(len(stream))] == [
                f"Echo: {request.messages[-1]['content']}" for request in stream
            ]
            assert client.stats.requests == len(stream)
            assert client.stats.calls == len(distinct)
            # Forgotten once answered: later copies are cache hits, not shared answers.
            assert (client.stats.cache_hits > 0) is not refresh


def test_attempt_makes_a_deliberate_repeat_a_new_call(tmp_path):
    request = ChatRequest.from_prompt("same", temperature=0.0)
    again = ChatRequest.from_prompt("same", temperature=0.0, attempt=1)
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), tmp_path / "c.sqlite", progress=False) as client:
            client.complete_many([request])
            client.complete_many([request, again])
        assert server.request_count == 2


def test_429_with_retry_after_is_retried_and_honoured():
    responder = flaky(echo_responder, failures=2, status=429, retry_after=0.2)
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server, backoff_max_s=5), None, progress=False) as client:
            started = time.perf_counter()
            result = client.complete(ChatRequest.from_prompt("hello"))
            elapsed = time.perf_counter() - started
            assert client.stats.retries == 2
        assert server.request_count == 3
    assert result.ok and result.text == "Echo: hello"
    assert elapsed >= 0.4  # two waits of the server's Retry-After


def test_500s_are_retried_then_reported_without_raising(tmp_path):
    always_500 = scripted([("doomed", Reply(status=500, error_message="boom"))])
    with FakeLLMServer(always_500) as server:
        with LLMClient(
            endpoint(server, max_retries=2), tmp_path / "c.sqlite", progress=False
        ) as client:
            results = client.complete_many(
                [ChatRequest.from_prompt("doomed"), ChatRequest.from_prompt("fine")]
            )
        assert server.request_count == 4  # three tries for the doomed one, one for the other
    assert not results[0].ok and "HTTP 500" in results[0].error
    assert "gave up after 3 attempts" in results[0].error
    assert results[1].ok


def test_failed_calls_are_not_cached(tmp_path):
    cache = tmp_path / "cache.sqlite"
    failing = scripted([("q", Reply(status=503))])
    with FakeLLMServer(failing) as server:
        with LLMClient(endpoint(server, max_retries=0), cache, progress=False) as client:
            assert not client.complete(ChatRequest.from_prompt("q")).ok
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server, max_retries=0), cache, progress=False) as client:
            assert client.complete(ChatRequest.from_prompt("q")).text == "Echo: q"
        assert server.request_count == 1


def test_a_reply_slower_than_the_timeout_is_retried_then_fails():
    slow = scripted([("slow", Reply(content="late", delay_s=2.0))])
    with FakeLLMServer(slow) as server:
        with LLMClient(
            endpoint(server, timeout_s=0.2, max_retries=1), None, progress=False
        ) as client:
            result = client.complete(ChatRequest.from_prompt("slow"))
    assert not result.ok and "Timeout" in result.error


def test_malformed_body_is_retried_then_reported():
    broken = scripted([("bad", Reply(raw_body="{not json"))])
    with FakeLLMServer(broken) as server:
        with LLMClient(endpoint(server, max_retries=1), None, progress=False) as client:
            result = client.complete(ChatRequest.from_prompt("bad"))
        assert server.request_count == 2
    assert not result.ok and "malformed" in result.error


def test_truncated_output_keeps_its_finish_reason():
    truncated = scripted([("long", Reply(content="cut off mid", finish_reason="length"))])
    with FakeLLMServer(truncated) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            result = client.complete(ChatRequest.from_prompt("long"))
    assert result.ok and result.finish_reason == "length"


def test_client_errors_fail_fast_and_redact_keys():
    unauthorized = scripted(
        [("x", Reply(status=401, error_message="Incorrect API key provided: sk-abcdef123456"))]
    )
    with FakeLLMServer(unauthorized) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            with pytest.raises(EndpointError, match="rejects the key") as stopped:
                client.complete(ChatRequest.from_prompt("x"))
        assert server.request_count == 1  # a 401 is not retried
    message = str(stopped.value)
    assert "HTTP 401" in message and "abcdef123456" not in message


def test_json_schema_is_sent_as_response_format():
    schema = {
        "type": "object",
        "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["rating"],
        "additionalProperties": False,
    }
    with FakeLLMServer() as server:  # the default responder fills the schema
        with LLMClient(endpoint(server), None, progress=False) as client:
            result = client.complete(ChatRequest.from_prompt("rate", json_schema=schema))
        sent = server.requests[-1]
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"] == schema
    assert 1 <= json.loads(result.text)["rating"] <= 5


def test_sampling_parameters_reach_the_server():
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(
            endpoint(server, max_tokens_field="max_completion_tokens"), None, progress=False
        ) as client:
            client.complete(
                ChatRequest.from_prompt(
                    "p",
                    system="sys",
                    temperature=0.0,
                    top_p=0.6,
                    max_tokens=7,
                    stop=["END"],
                    seed=3,
                )
            )
        sent = server.requests[-1]
    assert sent["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "p"},
    ]
    assert (
        sent["temperature"],
        sent["top_p"],
        sent["max_completion_tokens"],
        sent["stop"],
        sent["seed"],
        sent["model"],
    ) == (0.0, 0.6, 7, ["END"], 3, "judge-x")


def test_async_api_works_from_a_running_loop():
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:

            async def main():
                single = await client.acomplete(ChatRequest.from_prompt("a"))
                many = await client.acomplete_many(prompts(3))
                return single, many

            single, many = asyncio.run(main())
            assert client.is_available()
    assert single.text == "Echo: a" and [r.text for r in many][2] == "Echo: question 2"


def test_is_available_is_false_for_a_dead_endpoint():
    config = EndpointConfig.from_dict(
        {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}, name="dead"
    )
    with LLMClient(config, None, progress=False) as client:
        assert client.is_available(timeout_s=1.0) is False


def test_credentials_come_from_the_registry_and_never_reach_logs(caplog):
    register_credentials({"judge": {"api_key": "sk-secretsecretsecret"}})
    try:
        with FakeLLMServer(echo_responder) as server:
            caplog.set_level(logging.DEBUG)
            with LLMClient(endpoint(server, credentials="judge"), None, progress=False) as client:
                client.complete_many(prompts(2), desc="secret-check")
            assert "secretsecret" not in json.dumps(server.requests)
        assert "secretsecret" not in caplog.text
        assert "secretsecret" not in repr(endpoint(server, credentials="judge"))
    finally:
        register_credentials({})


def test_bad_endpoint_definitions_are_rejected_with_the_parameter_named():
    with pytest.raises(ConfigError, match="unknown backend 'ollama'"):
        EndpointConfig.from_dict({"backend": "ollama", "model": "m"}, name="x")
    with pytest.raises(ConfigError, match="unknown setting.*temprature"):
        EndpointConfig.from_dict({"backend": "openai", "model": "m", "temprature": 1}, name="x")
    with pytest.raises(ConfigError, match="credentials: entry 'nope' not found"):
        EndpointConfig.from_dict({"backend": "openai", "model": "m", "credentials": "nope"})


def test_refresh_ignores_and_replaces_cached_answers(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(echo_responder) as server:
        with LLMClient(endpoint(server), cache, progress=False) as client:
            client.complete_many(prompts(3))
        with LLMClient(endpoint(server), cache, progress=False, refresh=True) as client:
            redone = client.complete_many(prompts(3))
        assert server.request_count == 6
    assert not any(r.cached for r in redone)


def test_max_string_chars_caps_free_text_fields_of_the_schema(tmp_path):
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["why", "verdict"],
        "properties": {
            "why": {"type": "string"},
            "verdict": {"type": "string", "enum": ["yes", "no"]},
            "notes": {"type": "array", "items": {"type": "string", "maxLength": 500}},
        },
    }
    request = ChatRequest.from_prompt("judge", json_schema=schema)
    with FakeLLMServer() as server:
        with LLMClient(
            endpoint(server, max_string_chars=40), tmp_path / "c.sqlite", progress=False
        ) as client:
            client.complete(request)
        with LLMClient(endpoint(server), tmp_path / "c.sqlite", progress=False) as client:
            client.complete(request)  # uncapped: a different request, not a cache hit
        capped, uncapped = (r["response_format"]["json_schema"]["schema"] for r in server.requests)
    assert capped["properties"]["why"]["maxLength"] == 40
    assert capped["properties"]["notes"]["items"]["maxLength"] == 40
    assert "maxLength" not in capped["properties"]["verdict"]  # an enum needs no cap
    assert "maxLength" not in uncapped["properties"]["why"]
    assert schema["properties"]["why"] == {"type": "string"}  # the caller's schema is untouched


@pytest.mark.timeout(60)
def test_a_tripped_breaker_ends_a_long_stream_at_once():
    """The breaker stops a stream whose queue of requests is still full: no hang."""
    always_503 = scripted([("q", Reply(status=503, error_message="down"))])
    with FakeLLMServer(always_503) as server:
        config = endpoint(server, max_retries=0, max_concurrent=2)
        with LLMClient(config, None, progress=False) as client:
            with pytest.raises(EndpointError, match="10 of 10 calls failed, stopping"):
                client.complete_many(prompts(500))
        assert server.request_count < 20


@pytest.mark.parametrize("transport", ["lean", "sdk"])
def test_the_prompt_tokens_the_servers_cache_served_are_read_and_cached(transport, tmp_path):
    system = "judge kindly " * (CACHE_MIN_TOKENS // 2)  # long enough for OpenAI's cache
    requests = [
        ChatRequest.from_prompt(f"question {i}", system=system, temperature=0.0) for i in range(3)
    ]
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(echo_responder) as server:
        config = endpoint(server, max_concurrent=1, transport=transport)
        with LLMClient(config, cache, progress=False) as client:
            first, *later = client.complete_many(requests)
        with LLMClient(config, cache, progress=False) as client:
            again = client.complete_many(requests)

    # `prompt_tokens_details.cached_tokens`: the system message after its first call, of
    # the prompt all the same; OpenAI reports no cache writes.
    assert first.cached_prompt_tokens == 0 and first.cache_write_tokens is None
    assert [r.cached_prompt_tokens for r in later] == [CACHE_MIN_TOKENS] * 2
    assert all(r.prompt_tokens == first.prompt_tokens for r in later)
    assert all(r.cached for r in again)
    assert [r.cached_prompt_tokens for r in again] == [0, CACHE_MIN_TOKENS, CACHE_MIN_TOKENS]


def test_an_unreadable_cache_count_is_unknown_not_a_failed_reply():
    from llm_feedback.backends.anthropic_backend import message_result
    from llm_feedback.backends.openai_backend import reply_fields

    message = {"role": "assistant", "content": "5"}
    odd = {
        "prompt_tokens": 9,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": "x"},
    }
    assert reply_fields(message, odd, "stop")["cached_prompt_tokens"] is None
    assert reply_fields(message, {"prompt_tokens": 9}, "stop")["cached_prompt_tokens"] is None
    claude = message_result(
        {
            "type": "message",
            "content": [{"type": "text", "text": "5"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 1, "cache_read_input_tokens": "x"},
        },
        0.0,
        "claude",
    )
    assert claude.ok and claude.prompt_tokens == 9
    assert claude.cached_prompt_tokens is None and claude.cache_write_tokens is None
