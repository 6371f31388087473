"""Hostile servers and bad settings (issue 21): capped replies, bounded settings, Retry-After
per RFC 9110, the first 401/403 stops the endpoint, secrets of any shape masked, attempts
reported truthfully, and the Azure SDK's own variables select Azure."""

from __future__ import annotations

import dataclasses
import email.utils
import logging
import math
import subprocess
import time
import tracemalloc

import pandas as pd
import pytest

from llm_feedback.backends import (
    BACKENDS,
    ChatRequest,
    EndpointConfig,
    LeanOpenAIBackend,
    LLMClient,
    endpoint_from_env,
    register_backend,
    register_credentials,
)
from llm_feedback.backends.contract import ChatResult
from llm_feedback.backends.endpoints import parse_endpoints, parse_model_pool
from llm_feedback.backends.error_bodies import ERROR_BODY_BYTES
from llm_feedback.backends.pacing import AdaptiveTimeout, PacedSends
from llm_feedback.backends.preflight import preflight
from llm_feedback.backends.secrets import mask_secrets_in_logs, register_secrets
from llm_feedback.completions.generation import generate_completions
from llm_feedback.core.errors import ConfigError, EndpointError
from llm_feedback.testing.server import FakeLLMServer, Reply
from tests.backends.hostile import (
    HostileServer,
    announced,
    completion,
    endless_chunks,
    gzip_bomb,
    response,
)
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT, kedro_cli, run_kedro_cli

PLAIN_KEY = "plainsecretvalue0042"  # no sk- prefix: masked by its value, not its shape


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch):
    for name in ("OPENAI_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY", "API_TYPE"):
        monkeypatch.delenv(name, raising=False)


def endpoint(base_url: str, **extra) -> EndpointConfig:
    definition = {
        "backend": "openai",
        "model": "judge-x",
        "base_url": base_url,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="judge")


def ask(config: EndpointConfig, prompt: str = "hello", **sampling):
    with LLMClient(config, None, progress=False) as client:
        return client.complete(ChatRequest.from_prompt(prompt, **sampling))


# -- reply caps, on both transports (lean: aiohttp; sdk: the openai SDK's httpx) ---------
TRANSPORTS = pytest.mark.parametrize("transport", ["lean", "sdk"])


@TRANSPORTS
def test_a_50_mb_reply_to_max_tokens_128_is_cut_off_not_stored(transport):
    huge = Reply(raw_body='{"choices": [{"message": {"content": "' + "x" * 50_000_000 + '"}}]}')
    with FakeLLMServer(lambda body, ctx: huge) as server:
        result = ask(endpoint(server.base_url, transport=transport, max_retries=0), max_tokens=128)
    assert not result.ok and "reply too large" in result.error
    assert "max_reply_bytes" in result.error


@TRANSPORTS
def test_a_gzip_bomb_is_counted_as_it_is_decompressed(transport):
    bomb = gzip_bomb(64)  # 64 MB of text in ~64 KB on the wire
    assert len(bomb) < 200_000
    headers = ("Content-Type: application/json", "Content-Encoding: gzip")
    with HostileServer([response(200, bomb, *headers)]) as server:
        result = ask(
            endpoint(server.base_url, transport=transport, max_retries=0, max_reply_bytes=1_000_000)
        )
    assert not result.ok and "more than 1000000 bytes arrived" in result.error


@TRANSPORTS
def test_a_2_gb_content_length_is_refused_before_any_body_is_read(transport):
    with HostileServer([announced(2 * 1024**3)]) as server:
        started = time.perf_counter()
        result = ask(endpoint(server.base_url, transport=transport, max_retries=0, timeout_s=30))
    assert not result.ok and "announced 2147483648 bytes" in result.error
    assert time.perf_counter() - started < 5  # not buffered until the timeout


@TRANSPORTS
def test_a_body_that_never_ends_is_cut_off_as_it_streams(transport):
    with HostileServer([endless_chunks()]) as server:
        result = ask(
            endpoint(server.base_url, transport=transport, max_retries=0, timeout_s=30),
            max_tokens=16,
        )
    assert not result.ok and "arrived" in result.error


@TRANSPORTS
def test_an_error_body_that_never_ends_is_cut_off(transport):
    # The SDK reads a whole error body for its message: without a cap this never returns.
    with HostileServer([endless_chunks(status=400)]) as server:
        started = time.perf_counter()
        result = ask(endpoint(server.base_url, transport=transport, max_retries=0, timeout_s=60))
    assert not result.ok
    assert time.perf_counter() - started < 20
    assert len(result.error) < 2 * ERROR_BODY_BYTES


@TRANSPORTS
def test_a_gzip_bomb_as_an_error_body_is_inflated_only_to_the_cap(transport):
    bomb = gzip_bomb(64)  # 64 MB once inflated
    headers = ("Content-Type: application/json", "Content-Encoding: gzip")
    tracemalloc.start()
    try:
        with HostileServer([response(400, bomb, *headers)]) as server:
            result = ask(endpoint(server.base_url, transport=transport, max_retries=0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not result.ok and result.error.startswith(("HTTP 400", "reply too large"))
    assert len(result.error) < 2 * ERROR_BODY_BYTES
    assert peak < 16 * 1024 * 1024  # the 64 MB were never held


def test_an_error_body_keeps_its_message_under_the_cap():
    body = b'{"error": {"message": "model judge-x does not exist", "type": "invalid"}}'
    with HostileServer([response(404, body, "Content-Type: application/json")]) as server:
        result = ask(endpoint(server.base_url, transport="sdk", max_retries=0))
    assert not result.ok and "model judge-x does not exist" in result.error


@TRANSPORTS
def test_an_ordinary_reply_passes_the_default_cap(transport):
    with FakeLLMServer() as server:
        result = ask(endpoint(server.base_url, transport=transport), max_tokens=16)
    assert result.ok


# -- bounds on every numeric setting -----------------------------------------------------
def _numeric_settings():
    for backend in ("local", "openai", "azure", "vllm", "ray"):
        options_type = BACKENDS[backend].options_type
        for spec in (*dataclasses.fields(EndpointConfig), *dataclasses.fields(options_type)):
            if "bounds" in spec.metadata:
                yield backend, spec.name, spec.metadata["bounds"]


@pytest.mark.parametrize(("backend", "name", "limits"), list(_numeric_settings()))
@pytest.mark.parametrize("bad", [math.nan, math.inf, "high", "low"])
def test_every_numeric_setting_refuses_nan_infinity_and_out_of_bounds(backend, name, limits, bad):
    low, high = limits
    value = {"high": high * 10 + 1, "low": low - 1}.get(bad, bad)
    if isinstance(low, int) and isinstance(high, int) and isinstance(value, float):
        if math.isfinite(value):
            value = int(value)
    definition = {"backend": backend, "model": "m", "azure_endpoint": "https://a.example"}
    if backend != "azure":
        definition.pop("azure_endpoint")
    with pytest.raises(ConfigError) as refused:
        EndpointConfig.from_dict({**definition, name: value}, name="e")
    message = str(refused.value)
    assert f"endpoints.e.{name} must" in message and "\n" not in message


def test_timeout_nan_and_max_concurrent_1e8_are_refused_naming_the_parameter():
    with pytest.raises(ConfigError, match=r"endpoints\.judge\.timeout_s must lie between"):
        endpoint("http://h/v1", timeout_s=float("nan"))
    with pytest.raises(ConfigError, match=r"endpoints\.judge\.max_concurrent must lie between"):
        endpoint("http://h/v1", max_concurrent=100_000_000)


# -- Retry-After -------------------------------------------------------------------------
def _busy(retry_after: str) -> bytes:
    return response(429, b'{"error": {"message": "busy"}}', f"Retry-After: {retry_after}")


def test_a_retry_after_that_is_neither_seconds_nor_a_date_is_ignored_with_a_warning(caplog):
    with HostileServer([_busy("soon-ish"), completion("made it")]) as server:
        result = ask(endpoint(server.base_url))
    assert result.ok and result.text == "made it"
    assert "ignoring Retry-After: 'soon-ish'" in caplog.text


def test_a_retry_after_http_date_is_waited_for():
    moment = email.utils.formatdate(time.time() + 2, usegmt=True)
    with HostileServer([_busy(moment), completion()]) as server:
        started = time.perf_counter()
        result = ask(endpoint(server.base_url, backoff_max_s=5))
    assert result.ok and time.perf_counter() - started >= 0.9


# -- auth --------------------------------------------------------------------------------
def _reject(body, ctx):
    return Reply(status=401, error_message="Incorrect API key provided")


def test_the_first_401_stops_the_endpoint_naming_its_credentials_entry():
    register_credentials({"judge-key": {"api_key": PLAIN_KEY}})
    try:
        with FakeLLMServer(_reject) as server:  # its /models answers without auth
            config = endpoint(server.base_url, credentials="judge-key", max_concurrent=2)
            preflight(config)  # passes: the models route is public
            with LLMClient(config, None, progress=False) as client:
                with pytest.raises(EndpointError) as stopped:
                    client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(40)])
            sent = server.request_count
    finally:
        register_credentials({})
    assert sent <= 2  # what was in flight, not the breaker's 10
    message = str(stopped.value)
    assert "rejects the key" in message
    assert "credentials entry 'judge-key' in conf/local/credentials.yml" in message


def test_a_403_names_the_environment_variable_the_key_came_from(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_KEY)
    refuse = Reply(status=403, error_message="forbidden")
    with FakeLLMServer(lambda body, ctx: refuse) as server:
        with pytest.raises(EndpointError, match="refuses access.*check OPENAI_API_KEY"):
            ask(endpoint(server.base_url))
        assert server.request_count == 1


# -- secrets -----------------------------------------------------------------------------
def _echo_key(body, ctx):
    status = 500 if ctx.key_call_index == 0 else 400  # one retry logged, then a failure
    return Reply(status=status, error_message=f"key {PLAIN_KEY} is not allowed here")


def test_a_key_of_any_shape_that_a_server_echoes_is_masked_everywhere(caplog):
    register_credentials({"judge-key": {"api_key": PLAIN_KEY}})
    try:
        with FakeLLMServer(_echo_key) as server:
            definitions = {
                "judge": {
                    "backend": "openai",
                    "model": "m",
                    "base_url": server.base_url,
                    "credentials": "judge-key",
                    "backoff_base_s": 0.01,
                }
            }
            pool = parse_model_pool({"m": {"endpoint": "judge"}}, parse_endpoints(definitions), {})
            sampled = pd.DataFrame(
                {
                    "prompt_id": ["p1"],
                    "completion_idx": [0],
                    "instruction": ["hi"],
                    "model": ["m"],
                    "system_prompt": [""],
                }
            )
            completions = generate_completions(sampled, pool, None, progress=False)
    finally:
        register_credentials({})
    (error,) = completions["error"]
    assert "is not allowed here" in error and PLAIN_KEY not in error and "***" in error
    assert "is not allowed here" in caplog.text  # the retry's warning
    assert PLAIN_KEY not in caplog.text


def test_a_password_in_the_base_url_is_masked_in_messages_and_logs(caplog):
    caplog.set_level("INFO")
    with FakeLLMServer() as server:
        url = server.base_url.replace("http://", "http://alice:hunter2pw@")
        config = endpoint(url)
        preflight(config)
        assert ask(config).ok
    assert "alice:***@" in config.describe() and "hunter2pw" not in config.describe()
    assert "hunter2pw" not in str(config.public_dict())
    assert "preflight" in caplog.text and "hunter2pw" not in caplog.text


# -- attempts ----------------------------------------------------------------------------
class _SharedCoresBackend(PacedSends, LeanOpenAIBackend):
    """An HTTP endpoint paced as the embedded model is (its timeouts follow its load)."""


def _paced(server, **extra) -> EndpointConfig:
    register_backend("paced-http", _SharedCoresBackend, replace=True)
    definition = {"backend": "paced-http", "model": "m", "base_url": server.base_url}
    return EndpointConfig.from_dict({**definition, **extra}, name="paced")


def test_one_attempt_is_reported_as_one():
    stall = Reply(content="late", delay_s=2.0)
    with FakeLLMServer(lambda body, ctx: stall) as server:
        result = ask(_paced(server, timeout_s=0.2, max_retries=0), temperature=0.0)
        assert server.request_count == 1
    assert result.error.startswith("gave up after 1 attempt: APITimeoutError")


def test_a_paced_endpoint_finishes_slower_where_a_fixed_timeout_fails():
    """A model five times slower than the timeout expects (a busy machine): the fixed
    timeout fails every call, the paced one finishes them all, its retries given more
    time and later calls the time the measured token rate says they need."""
    slow = Reply(content="one two three four", delay_s=0.5)
    requests = [ChatRequest.from_prompt(f"q{i}", temperature=0.0, max_tokens=8) for i in range(6)]
    with FakeLLMServer(lambda body, ctx: slow) as server:
        fixed = endpoint(server.base_url, timeout_s=0.1, max_retries=2, max_concurrent=2)
        with LLMClient(fixed, None, progress=False) as client:
            assert not any(result.ok for result in client.complete_many(requests))
        paced = _paced(server, timeout_s=0.1, max_retries=3, max_concurrent=2)
        with LLMClient(paced, None, progress=False) as client:
            results = client.complete_many(requests)
    assert all(result.ok for result in results)


def test_the_adaptive_timeout_grows_with_the_token_rate_and_the_queue():
    pace = AdaptiveTimeout(floor_s=1.0, slots=2)
    assert pace.start(max_tokens=100) == 1.0  # nothing measured yet: the floor
    pace.finish(ChatResult(text="x", completion_tokens=50, latency_s=5.0), timed_out=False)
    alone = pace.start(max_tokens=100)  # 0.1 s a token, 100 tokens, headroom 3
    assert alone == pytest.approx(30.0)
    pace.start(max_tokens=100)
    behind = pace.start(max_tokens=100)  # three in flight on two slots: two waves
    assert behind == pytest.approx(60.0)
    pace.finish(None, timed_out=True)
    assert pace.start(max_tokens=100) == pytest.approx(2 * 60.0)  # a timeout doubles it


def test_retried_attempts_are_counted():
    stall = Reply(content="late", delay_s=1.0)
    with FakeLLMServer(lambda body, ctx: stall) as server:
        result = ask(endpoint(server.base_url, timeout_s=0.1, max_retries=2))
        assert server.request_count == 3
    assert result.error.startswith("gave up after 3 attempts")


# -- Azure from the Azure SDK's own variables ---------------------------------------------
def test_the_azure_sdks_variables_select_azure_without_api_type(monkeypatch):
    with FakeLLMServer() as server:
        resource = server.base_url.removesuffix("/v1")
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", resource)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", PLAIN_KEY)
        monkeypatch.setenv("OPENAI_API_VERSION", "2025-01-01")
        monkeypatch.setenv("MODEL_VERSION", "my-deployment")
        config = endpoint_from_env()
        assert config.backend == "azure"
        assert ask(config).ok
        (sent,) = server.requests
    assert sent["model"] == "my-deployment"


def test_api_type_still_wins_over_the_azure_variables(monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", PLAIN_KEY)
    monkeypatch.setenv("API_TYPE", "openai")
    monkeypatch.setenv("MODEL_VERSION", "gpt-x")
    assert endpoint_from_env().backend == "openai"


def test_a_run_whose_server_echoes_the_key_shows_it_nowhere(tmp_path, monkeypatch):
    """`kedro run` with a key of no known shape (from OPENAI_API_KEY) that the server puts
    in its error bodies: masked in every line on the terminal (the completions' error
    column: `test_a_key_of_any_shape_that_a_server_echoes_is_masked_everywhere`)."""
    monkeypatch.setenv("OPENAI_API_KEY", PLAIN_KEY)
    data_root = tmp_path / "data"
    with FakeLLMServer(_echo_key) as server:
        command = kedro_cli(
            data_root,
            server.base_url,
            "sample.max_prompts=2",
            "endpoints.local.max_failure_share=1",
        )
        run_kedro_cli(command, "sample")
        run = subprocess.run(
            [*command, "--pipelines", "generate"],
            cwd=PROJECT_ROOT,
            env={**KEDRO_CLI_ENV, "OPENAI_API_KEY": PLAIN_KEY},
            capture_output=True,
            text=True,
            check=False,
        )
    output = " ".join((run.stdout + run.stderr).split())  # Rich wraps long lines
    assert "is not allowed here" in output  # the retries' warnings and the node's error
    assert PLAIN_KEY not in output.replace(" ", "")


def test_every_log_handler_masks_secrets_whoever_logs_them(tmp_path):
    register_secrets([PLAIN_KEY])
    handler = logging.FileHandler(tmp_path / "info.log")
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        mask_secrets_in_logs()
        logging.getLogger("someone.else").warning("calling https://bob:pw4242@h with %s", PLAIN_KEY)
    finally:
        root.removeHandler(handler)
        handler.close()
    written = (tmp_path / "info.log").read_text()
    assert "calling https://bob:***@h with ***" in written
    assert PLAIN_KEY not in written and "pw4242" not in written
