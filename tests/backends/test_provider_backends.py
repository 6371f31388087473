"""The `anthropic` and `gemini` backends through their official SDKs, against the project's
server speaking each provider's API over real HTTP: answers, cache, retries on 429/529 with
the provider's wait, a rejected key, images, and the batch APIs (submit, poll, collect,
resume, split, unanswered requests)."""

from __future__ import annotations

import base64
import time

import pytest
import yaml

from llm_feedback.backends import BACKENDS, ChatRequest, EndpointConfig, LLMClient, base
from llm_feedback.backends.base import kind_of, register_credentials
from llm_feedback.backends.batch_api import BatchLedger
from llm_feedback.backends.media import load_media, with_media
from llm_feedback.backends.preflight import preflight
from llm_feedback.core.errors import BatchPending, EndpointError
from llm_feedback.testing.server import BatchScript, FakeLLMServer, Reply, schema_responder
from tests.conftest import readme_block
from tests.media_files import png_bytes, wav_bytes

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

# The backends that reach a provider through its own SDK and batch API.
PROVIDERS = sorted(name for name in BACKENDS if hasattr(kind_of(name), "batch_jobs"))
SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["score"],
    "additionalProperties": False,
}
# The status each provider uses for "busy, come back later", beside 429.
BUSY = {"anthropic": 529, "gemini": 503}


def test_both_providers_are_registered():
    assert PROVIDERS == ["anthropic", "gemini"]


def endpoint(server: FakeLLMServer, backend: str, **settings) -> EndpointConfig:
    """`backend` pointed at the fake server's root (the SDKs add /v1 or /v1beta)."""
    definition = {
        "backend": backend,
        "model": "fake-model",
        "base_url": server.base_url.removesuffix("/v1"),
        "backoff_base_s": 0.01,
        "backoff_max_s": 5.0,
        "batch_poll_seconds": 0.02,
        "batch_poll_max_seconds": 0.05,
        **settings,
    }
    return EndpointConfig.from_dict(definition, name="judge")


def judge_requests(n: int) -> list[ChatRequest]:
    return [
        ChatRequest.from_prompt(
            f"rate answer {i}", system="You are a strict judge.", json_schema=SCHEMA, max_tokens=32
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("backend", PROVIDERS)
def test_online_answers_are_read_and_a_rerun_comes_from_the_cache(backend, tmp_path):
    with FakeLLMServer() as server:
        config = endpoint(server, backend)
        preflight(config)
        with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
            results = client.complete_many(judge_requests(4))
        sent = server.request_count
        with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
            again = client.complete_many(judge_requests(4))
        bodies = server.requests

    assert sent == 4 and server.request_count == 4  # the rerun sent nothing
    assert all(
        result.ok and 1 <= int(result.text.split(":")[1].strip(" }")) <= 10 for result in results
    )
    assert [r.text for r in again] == [r.text for r in results] and all(r.cached for r in again)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in results)
    # The provider's request carried the system prompt and the schema in its own fields.
    assert bodies[0]["messages"][0] == {"role": "system", "content": "You are a strict judge."}
    assert bodies[0]["response_format"]["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize("backend", PROVIDERS)
def test_an_image_goes_inline_as_the_provider_takes_it(backend, tmp_path):
    image = tmp_path / "chart.png"
    image.write_bytes(png_bytes(3, 2))
    media = load_media(image.name, "image", tmp_path, max_bytes=1 << 20)
    request = ChatRequest.from_messages(
        [{"role": "user", "content": with_media("What colour is it?", [media])}], max_tokens=8
    )
    with FakeLLMServer() as server:
        with LLMClient(endpoint(server, backend), progress=False) as client:
            result = client.complete(request)
        body = server.requests[0]

    assert result.ok
    parts = body["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "What colour is it?"}
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == image.read_bytes()


def busy_then_answer(status: int, wait_s: float):
    """The first attempt of every request is refused as busy, asking for `wait_s`."""

    def respond(body, ctx):
        if ctx.key_call_index == 0:
            return Reply(status=status, retry_after=wait_s, error_message="busy, come back")
        return schema_responder(body, ctx)

    return respond


@pytest.mark.parametrize("status", [429, "busy"])
@pytest.mark.parametrize("backend", PROVIDERS)
def test_429_and_overloaded_are_retried_after_the_wait_the_provider_asks(backend, status):
    status = BUSY[backend] if status == "busy" else status
    # 429 carries its wait (Anthropic's retry-after header, Google's RetryInfo detail).
    wait_s = 0.4 if status == 429 else None
    with FakeLLMServer(busy_then_answer(status, wait_s)) as server:
        config = endpoint(server, backend, backoff_base_s=0.001)  # backoff alone: ~1 ms
        started = time.perf_counter()
        with LLMClient(config, progress=False) as client:
            results = client.complete_many(judge_requests(2))
            retries = client.stats.retries
        elapsed = time.perf_counter() - started

    assert all(result.ok for result in results)
    assert retries == 2 and server.request_count == 4
    if wait_s is not None:  # the provider's wait, not the (tiny) backoff, was honoured
        assert elapsed >= wait_s
    else:
        assert elapsed < 5


@pytest.mark.parametrize("backend", PROVIDERS)
def test_a_rejected_key_stops_the_endpoint_naming_where_the_key_comes_from(backend, monkeypatch):
    variable = kind_of(backend).options_type.key_variables[0]
    monkeypatch.setenv(variable, "wrong-key-0123456789")
    with FakeLLMServer(api_key="right-key-0123456789") as server:
        config = endpoint(server, backend)
        with pytest.raises(EndpointError, match=f"key from {variable}.*rejects the key") as refused:
            preflight(config)
        with LLMClient(config, progress=False) as client:
            with pytest.raises(EndpointError, match=variable):
                client.complete(judge_requests(1)[0])
    assert "wrong-key" not in str(refused.value)

    monkeypatch.setenv(variable, "right-key-0123456789")
    with FakeLLMServer(api_key="right-key-0123456789") as server:
        with LLMClient(endpoint(server, backend), progress=False) as client:
            assert client.complete(judge_requests(1)[0]).ok


@pytest.mark.parametrize("backend", PROVIDERS)
def test_batch_submits_polls_and_collects(backend, tmp_path):
    with FakeLLMServer(batch=BatchScript(delay_s=0.15)) as server:
        config = endpoint(server, backend, mode="batch")
        with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
            results = client.complete_many(judge_requests(5))
        polls = len(server.batch_retrievals)
        with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
            again = client.complete_many(judge_requests(5))

    assert all(r.ok and r.via_batch for r in results)
    assert server.request_count == 0  # nothing went through the online route
    assert server.batch_counts["batches_created"] == 1
    assert server.batch_counts["batch_lines_answered"] == 5
    assert polls >= 2  # the batch was polled until it ended
    assert all(r.cached for r in again) and server.batch_counts["batches_created"] == 1
    assert BatchLedger(tmp_path / "cache.sqlite").load() == []


@pytest.mark.parametrize("backend", PROVIDERS)
def test_a_submitted_batch_is_resumed_by_a_later_run(backend, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(batch=BatchScript(delay_s=3600)) as server:
        config = endpoint(server, backend, mode="batch", batch_wait=False)
        with LLMClient(config, cache, progress=False) as client:
            with pytest.raises(BatchPending, match="run the same command later"):
                client.complete_many(judge_requests(3))
        [recorded] = BatchLedger(cache).load()

        server.batch_script = BatchScript()  # the provider finished it meanwhile
        with LLMClient(config, cache, progress=False) as client:
            results = client.complete_many(judge_requests(3))

    assert all(r.ok and r.via_batch for r in results)
    assert server.batch_counts["batches_created"] == 1  # collected, not submitted again
    assert server.batch_retrievals[-1] == recorded.id
    assert BatchLedger(cache).load() == []


@pytest.mark.parametrize("backend", PROVIDERS)
def test_batches_are_split_within_the_request_and_byte_limits(backend, tmp_path):
    with FakeLLMServer() as server:
        by_count = endpoint(server, backend, mode="batch", batch_max_requests=2)
        with LLMClient(by_count, tmp_path / "a.sqlite", progress=False) as client:
            assert all(r.ok for r in client.complete_many(judge_requests(5)))
        assert server.batch_counts["batches_created"] == 3  # 2 + 2 + 1

        by_bytes = endpoint(server, backend, mode="batch", batch_max_bytes=2048)
        with LLMClient(by_bytes, tmp_path / "b.sqlite", progress=False) as client:
            assert all(r.ok for r in client.complete_many(judge_requests(6)))
        made = server.batch_counts["batches_created"] - 3
    assert 2 <= made < 6  # several requests per batch, never more bytes than allowed


@pytest.mark.parametrize("backend", PROVIDERS)
def test_requests_an_expired_batch_left_unanswered_are_sent_online(backend, tmp_path):
    with FakeLLMServer(batch=BatchScript(expire_after=2)) as server:
        config = endpoint(server, backend, mode="batch")
        with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
            results = client.complete_many(judge_requests(5))

    assert all(r.ok for r in results)
    assert sum(r.via_batch for r in results) == 2
    assert server.request_count == 3  # the expired ones, one by one


def test_the_readme_endpoints_are_valid_definitions(monkeypatch):
    monkeypatch.setattr(base, "_registered_credentials", {})  # restored after the test
    endpoints = yaml.safe_load(readme_block("Claude and Gemini endpoints"))["endpoints"]
    register_credentials({"anthropic": {"api_key": "x" * 12}, "gemini": {"api_key": "y" * 12}})
    configs = [EndpointConfig.from_dict(d, name=name) for name, d in endpoints.items()]
    assert sorted(config.backend for config in configs) == PROVIDERS
    assert any(config.uses_batch_api for config in configs)


@pytest.mark.parametrize("backend", PROVIDERS)
def test_audio_goes_to_gemini_inline_and_is_refused_by_claude_per_row(backend, tmp_path):
    clip = tmp_path / "clip.wav"
    clip.write_bytes(wav_bytes())
    media = load_media(clip.name, "audio", tmp_path, max_bytes=1 << 20)
    heard = ChatRequest.from_messages(
        [{"role": "user", "content": with_media("Transcribe.", [media])}], max_tokens=8
    )
    with FakeLLMServer() as server:
        with LLMClient(endpoint(server, backend), progress=False) as client:
            results = client.complete_many([heard, judge_requests(1)[0]])
        bodies = server.requests

    if backend == "gemini":
        assert all(result.ok for result in results)
        # The two requests go out concurrently: the audio one is the one with parts.
        (heard_body,) = [b for b in bodies if isinstance(b["messages"][0]["content"], list)]
        audio = heard_body["messages"][0]["content"][1]["input_audio"]
        assert audio["format"] == "wav"
        assert base64.b64decode(audio["data"]) == clip.read_bytes()
    else:  # that row fails, saying why; the other row is answered
        assert "takes images, not audio" in results[0].error and results[1].ok
        assert len(bodies) == 1


@pytest.mark.parametrize("caching", [True, False])
def test_claude_prompt_caching_reads_the_shared_instructions_from_the_cache(caching):
    with FakeLLMServer() as server:
        config = endpoint(server, "anthropic", prompt_caching=caching, max_concurrent=1)
        with LLMClient(config, progress=False) as client:
            first, *later = client.complete_many(judge_requests(3))

    assert all(result.ok for result in (first, *later))
    if caching:  # written by the first call, read by the others; all of it still prompt
        assert (first.cache_write_tokens, first.cached_prompt_tokens) == (5, 0)
        assert all((r.cache_write_tokens, r.cached_prompt_tokens) == (0, 5) for r in later)
    else:
        assert all(
            (r.cache_write_tokens, r.cached_prompt_tokens) == (0, 0) for r in (first, *later)
        )
    assert first.prompt_tokens == later[0].prompt_tokens > 5


def test_gemini_reports_what_its_implicit_cache_served():
    with FakeLLMServer() as server:
        config = endpoint(server, "gemini", max_concurrent=1)
        with LLMClient(config, progress=False) as client:
            first, *later = client.complete_many(judge_requests(3))

    assert all(result.ok for result in (first, *later))
    # The shared instructions, served from the cache after the first call; still prompt.
    assert first.cached_prompt_tokens == 0 and first.cache_write_tokens is None
    assert all(result.cached_prompt_tokens == 5 for result in later)
    assert first.prompt_tokens == later[0].prompt_tokens > 5


@pytest.mark.parametrize("backend", PROVIDERS)
def test_busy_batch_calls_are_retried_after_the_providers_wait(backend, tmp_path):
    # create, the first poll and the results (Gemini: create and two polls) are refused once
    with FakeLLMServer(batch=BatchScript(busy_calls=3)) as server:
        config = endpoint(server, backend, mode="batch", backoff_base_s=10.0, backoff_max_s=30.0)
        started = time.perf_counter()
        with LLMClient(config, tmp_path / "cache.sqlite", progress=False) as client:
            results = client.complete_many(judge_requests(3))
        elapsed = time.perf_counter() - started

    assert all(r.ok and r.via_batch for r in results)
    assert server.batch_counts["batches_created"] == 1
    assert elapsed < 10  # each wait was the provider's 0.05 s, not the 10 s backoff


@pytest.mark.parametrize("backend", PROVIDERS)
def test_a_long_thought_within_the_thinking_budget_is_not_refused_as_too_large(backend, tmp_path):
    """The reply's size limit counts the thinking budget: ~80 kB of thought, over what the
    verdict's 32 tokens alone allow, is a reply like any other."""
    thought = "thought " * 10_000

    def thinker(body, ctx):
        return Reply(content='{"score": 8}', reasoning=thought)

    with FakeLLMServer(thinker) as server:
        config = endpoint(server, backend, reasoning_tokens=4096)
        with LLMClient(config, None, progress=False) as client:
            [result] = client.complete_many(judge_requests(1))
    assert result.ok, result.error
    assert result.text == '{"score": 8}'
