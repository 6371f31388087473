"""`mode: batch` against the project's server over real HTTP: Files and Batches routes,
scripted delays, partial failures, expiry, cancellation, chunking and resuming."""

import json

import httpx2
import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.batch_api import LEDGER_SUFFIX, batch_chunks, jsonl_chunks
from llm_feedback.core.errors import BatchPending, ConfigError, EndpointError
from llm_feedback.testing.server import BatchScript, FakeLLMServer, Reply, flaky, scripted


def _endpoint(server: FakeLLMServer, **extra) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {
            "backend": "openai",
            "model": "fake-model",
            "base_url": server.base_url,
            "mode": "batch",
            "batch_poll_seconds": 0.01,
            "batch_poll_max_seconds": 0.05,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
            **extra,
        },
        name="batched",
    )


def _requests(n: int) -> list[ChatRequest]:
    return [ChatRequest.from_prompt(f"question {i}", temperature=0.0) for i in range(n)]


def _complete(config, cache, requests):
    with LLMClient(config, cache, progress=False) as client:
        return client.complete_many(requests)


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "request_cache.sqlite"


def test_batch_answers_every_request_and_a_rerun_pays_nothing(cache):
    with FakeLLMServer() as server:
        results = _complete(_endpoint(server), cache, _requests(5))
        assert [r.text for r in results] == [f"Echo: question {i}" for i in range(5)]
        assert all(r.ok and r.via_batch and r.completion_tokens > 0 for r in results)
        assert server.batch_counts == {
            "files_uploaded": 1,
            "batches_created": 1,
            "batch_lines_answered": 5,
        }
        assert server.request_count == 0  # nothing went through the chat route
        assert not (cache.parent / f"{cache.name}{LEDGER_SUFFIX}").read_text().count("batch_")

        again = _complete(_endpoint(server), cache, _requests(5))
        assert all(r.cached and r.via_batch for r in again)
        assert server.batch_counts["files_uploaded"] == 1
        assert server.batch_counts["batches_created"] == 1
        assert server.request_count == 0


def test_lines_of_one_batch_carry_our_ids_and_the_chat_body(cache):
    with FakeLLMServer() as server:
        _complete(_endpoint(server), cache, _requests(2))
        bodies = server.requests
    assert [b["messages"][-1]["content"] for b in bodies] == ["question 0", "question 1"]
    assert all(b["model"] == "fake-model" and b["temperature"] == 0.0 for b in bodies)


def test_submission_is_chunked_at_the_configured_limits(cache):
    with FakeLLMServer() as server:
        results = _complete(_endpoint(server, batch_max_requests=2), cache, _requests(5))
        assert all(r.ok for r in results)
        assert server.batch_counts["batches_created"] == 3

    with FakeLLMServer() as server:
        # Each line is ~250 bytes (a 64-character id and the chat body): 12 need 3 KB.
        config = _endpoint(server, batch_max_bytes=1024)
        results = _complete(config, cache.with_name("other.sqlite"), _requests(12))
        assert all(r.ok for r in results)
        assert server.batch_counts["batches_created"] >= 3
        assert server.batch_counts["batch_lines_answered"] == 12


def _first_attempt_fails(status: int):
    """Batch lines (each request's first attempt) whose prompt ends in an odd digit fail."""
    return scripted(
        [(lambda body: body["messages"][-1]["content"][-1] in "13579", flaky(_echo, 1, status))]
    )


def _echo(body, ctx):
    return f"Echo: {body['messages'][-1]['content']}"


def test_partial_failures_are_retried_through_the_normal_endpoint(cache):
    with FakeLLMServer(responder=_first_attempt_fails(400)) as server:
        results = _complete(_endpoint(server), cache, _requests(6))
        assert all(r.ok for r in results)
        assert [r.via_batch for r in results] == [True, False] * 3
        assert server.request_count == 3  # only the three failed lines, one call each


def test_partial_failures_can_be_recorded_as_failed(cache):
    with FakeLLMServer(responder=_first_attempt_fails(400)) as server:
        results = _complete(_endpoint(server, batch_unanswered="fail"), cache, _requests(4))
        assert server.request_count == 0
    assert [r.ok for r in results] == [True, False, True, False]
    assert "batch batch_1 completed: HTTP 400" in results[1].error
    assert "simulated failure" in results[1].error


def test_an_expired_batch_keeps_what_it_answered_and_retries_the_rest(cache):
    with FakeLLMServer(batch=BatchScript(expire_after=2)) as server:
        results = _complete(_endpoint(server), cache, _requests(5))
        assert all(r.ok for r in results)
        assert [r.via_batch for r in results] == [True, True, False, False, False]
        assert server.request_count == 3


def test_an_expired_batch_under_fail_names_the_expiry(cache):
    with FakeLLMServer(batch=BatchScript(expire_after=1)) as server:
        results = _complete(_endpoint(server, batch_unanswered="fail"), cache, _requests(3))
    assert [r.ok for r in results] == [True, False, False]
    assert "batch batch_1 expired: batch_expired" in results[2].error


def test_a_failed_batch_reports_its_errors(cache):
    with FakeLLMServer(batch=BatchScript(fail="quota exceeded")) as server:
        results = _complete(_endpoint(server, batch_unanswered="fail"), cache, _requests(2))
    assert not any(r.ok for r in results)
    assert "batch batch_1 failed: quota exceeded" in results[0].error


def test_malformed_batch_output_is_a_failed_row_not_a_crash(cache):
    responder = scripted([("question 1", Reply(raw_body='{"choices": "not a list"}'))])
    with FakeLLMServer(responder=responder) as server:
        results = _complete(_endpoint(server, batch_unanswered="fail"), cache, _requests(2))
    assert results[0].ok and not results[1].ok
    assert "malformed batch output" in results[1].error


def test_submit_and_exit_then_a_later_run_collects_the_same_batch(cache):
    requests = _requests(3)
    with FakeLLMServer(batch=BatchScript(delay_s=0.3)) as server:
        with pytest.raises(BatchPending, match=r"batch_1.*run the same command later"):
            _complete(_endpoint(server, batch_wait=False), cache, requests)
        ledger = json.loads((cache.parent / f"{cache.name}{LEDGER_SUFFIX}").read_text())
        assert [entry["id"] for entry in ledger["batches"]] == ["batch_1"]

        results = _complete(_endpoint(server), cache, requests)
        assert all(r.ok and r.via_batch for r in results)
        assert server.batch_counts["batches_created"] == 1
        assert set(server.batch_retrievals) == {"batch_1"}
        ledger = json.loads((cache.parent / f"{cache.name}{LEDGER_SUFFIX}").read_text())
        assert ledger["batches"] == []


def test_a_cancelled_batch_is_answered_through_the_normal_endpoint(cache):
    requests = _requests(3)
    with FakeLLMServer(batch=BatchScript(delay_s=60)) as server:
        with pytest.raises(BatchPending):
            _complete(_endpoint(server, batch_wait=False), cache, requests)
        cancelled = httpx2.post(f"{server.base_url}/batches/batch_1/cancel").json()
        assert cancelled["status"] == "cancelled"
        results = _complete(_endpoint(server), cache, requests)
        assert all(r.ok and not r.via_batch for r in results)
        assert server.request_count == 3
        assert server.batch_counts["batches_created"] == 1


def test_new_rows_beside_a_pending_batch_go_into_a_new_one(cache):
    with FakeLLMServer(batch=BatchScript(delay_s=0.2)) as server:
        with pytest.raises(BatchPending):
            _complete(_endpoint(server, batch_wait=False), cache, _requests(2))
        results = _complete(_endpoint(server), cache, _requests(4))
        assert all(r.ok and r.via_batch for r in results)
        assert server.batch_counts["batches_created"] == 2
        assert server.batch_counts["batch_lines_answered"] == 4


def test_azure_batches_use_the_deployment_and_api_version(cache, monkeypatch):
    monkeypatch.setenv("AZURE_API_KEY", "azure-test-key")
    with FakeLLMServer(api_key="azure-test-key") as server:
        config = EndpointConfig.from_dict(
            {
                "backend": "azure",
                "model": "my-deployment",
                "azure_endpoint": server.base_url.removesuffix("/v1"),
                "mode": "batch",
                "batch_poll_seconds": 0.01,
            },
            name="azure",
        )
        results = _complete(config, cache, _requests(2))
        assert all(r.ok and r.via_batch for r in results)
        assert server.requests[0]["model"] == "my-deployment"
        assert server.batch_counts["batches_created"] == 1


def test_batch_settings_are_checked_before_anything_starts(caplog):
    base = {"model": "m", "mode": "batch"}
    # Another backend's setting (left over when --params swaps a backend) is named, unused.
    local = EndpointConfig.from_dict({**base, "backend": "local"}, name="e")
    assert not local.kind.uses_batch_api(local)
    assert "endpoints.e: backend 'local' ignores mode" in caplog.text
    with pytest.raises(ConfigError, match="transport lean"):
        EndpointConfig.from_dict({**base, "backend": "openai", "transport": "sdk"}, name="e")
    with pytest.raises(ConfigError, match="batch_unanswered must be 'retry' or 'fail'"):
        EndpointConfig.from_dict({**base, "backend": "openai", "batch_unanswered": "x"})
    with pytest.raises(ConfigError, match=r"endpoints\.e\.batch_wait must be bool"):
        EndpointConfig.from_dict({**base, "backend": "openai", "batch_wait": "no"}, name="e")
    with pytest.raises(ConfigError, match="batch_max_requests must lie between 1 and 50000"):
        EndpointConfig.from_dict({**base, "backend": "openai", "batch_max_requests": 60_000})
    with pytest.raises(ConfigError, match="mode must be 'online' or 'batch'"):
        EndpointConfig.from_dict({"backend": "openai", "model": "m", "mode": "offline"})


def test_batch_mode_without_a_cache_says_why(fake_llm):
    with pytest.raises(ConfigError, match="mode batch needs the request cache"):
        _complete(_endpoint(fake_llm), None, _requests(1))


def test_a_recorded_batch_the_provider_does_not_know_names_the_ledger(cache):
    ledger = cache.parent / f"{cache.name}{LEDGER_SUFFIX}"
    with FakeLLMServer(batch=BatchScript(delay_s=60)) as server:
        with pytest.raises(BatchPending):
            _complete(_endpoint(server, batch_wait=False), cache, _requests(1))
        ledger.write_text(ledger.read_text().replace("batch_1", "batch_99"))
        with pytest.raises(EndpointError, match=r"HTTP 404.*batch_99 is recorded in .*batches"):
            _complete(_endpoint(server, max_retries=0), cache, _requests(1))


def test_the_server_rejects_a_batch_whose_input_file_is_not_ours(fake_llm):
    good = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions"}
    good["body"] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    duplicate = dict(good)
    content = "\n".join(json.dumps(line) for line in (good, duplicate))
    upload = httpx2.post(
        f"{fake_llm.base_url}/files",
        data={"purpose": "batch"},
        files={"file": ("in.jsonl", content.encode(), "application/jsonl")},
    )
    create = httpx2.post(
        f"{fake_llm.base_url}/batches",
        json={"input_file_id": upload.json()["id"], "endpoint": "/v1/chat/completions"},
    )
    assert create.status_code == 400 and "line 2" in create.json()["error"]["message"]
    unknown = httpx2.post(f"{fake_llm.base_url}/batches", json={"input_file_id": "file-9"})
    assert unknown.status_code == 400
    assert fake_llm.batch_counts["batches_created"] == 0


def test_a_batch_output_beyond_the_reply_cap_is_cut_off_not_buffered(cache):
    huge = Reply(raw_body='{"choices": [{"message": {"content": "' + "x" * 3_000_000 + '"}}]}')
    with FakeLLMServer(responder=lambda body, ctx: huge) as server:
        config = _endpoint(server, max_reply_bytes=100_000, max_retries=0)
        with pytest.raises(EndpointError) as raised:
            _complete(config, cache, _requests(2))
    message = str(raised.value)
    assert "GET files failed: reply too large: the server announced 6000434 bytes" in message
    assert "beyond the 208192 bytes allowed" in message and "batched.max_reply_bytes" in message
    # The batch stays in the ledger: a later run with a larger cap collects it.
    assert "batch_" in (cache.parent / f"{cache.name}{LEDGER_SUFFIX}").read_text()


def test_busy_batch_calls_are_retried(cache):
    with FakeLLMServer(batch=BatchScript(busy_calls=3)) as server:
        results = _complete(_endpoint(server), cache, _requests(3))
    assert all(r.ok and r.via_batch for r in results)
    assert server.batch_counts["batches_created"] == 1


def test_batches_are_cut_within_both_limits_and_a_request_over_the_byte_limit_is_refused():
    sized = [(f"k{i}", f"entry {i}", 400) for i in range(5)]
    assert [keys for keys, _, _ in batch_chunks(sized, 2, 10_000)] == [
        ["k0", "k1"],
        ["k2", "k3"],
        ["k4"],
    ]
    assert [(keys, size) for keys, _, size in batch_chunks(sized, 100, 1000)] == [
        (["k0", "k1"], 800),
        (["k2", "k3"], 800),
        (["k4"], 400),
    ]
    lines = [("a", b'{"n": 1}'), ("b", b'{"n": 2}')]
    assert list(jsonl_chunks(lines, 100, 1000)) == [(["a", "b"], b'{"n": 1}\n{"n": 2}\n')]
    with pytest.raises(EndpointError, match=r"request big alone is 1001 bytes.*\(1000\)"):
        list(batch_chunks([("big", "x", 1001)], 100, 1000))
