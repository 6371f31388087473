"""Worker processes over real HTTP against the project's fake server: the same answers and
cache as one process, one concurrency limit, one call per distinct request, retries in the
workers, and a stage that neither hangs nor loses answers when a worker dies."""

import json
import logging
import os
import shlex
import signal
import sqlite3
import subprocess
import sys

import pandas as pd
import psutil
import pytest

from llm_feedback.backends import (
    ChatRequest,
    EndpointConfig,
    LLMClient,
    register_credentials,
    workers,
)
from llm_feedback.backends.workers import concurrency_shares, worker_processes
from llm_feedback.core.errors import ConfigError, EndpointError
from llm_feedback.testing.server import FakeLLMServer, echo_responder, flaky, scripted
from tests.backends.test_client import endpoint
from tests.conftest import (
    documentation_section,
    kedro_cli,
    run_kedro_cli,
    with_default_sigint,
)

RATING_SCHEMA = {
    "type": "object",
    "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["rating"],
}


def mixed_requests(n):
    """Free-text and schema-constrained requests, each distinct one asked twice."""
    distinct = [
        ChatRequest.from_prompt(f"rate answer {i}", temperature=0.0, json_schema=RATING_SCHEMA)
        if i % 2
        else ChatRequest.from_prompt(f"question {i}", temperature=0.0)
        for i in range(n)
    ]
    return distinct + distinct[::-1]


def comparable(result):
    # Not `cached`: whether a repeat finds its first's answer in the cache or still in
    # flight depends on timing (counted apart below).
    return (
        result.text,
        result.finish_reason,
        result.prompt_tokens,
        result.completion_tokens,
        result.error,
        result.model,
    )


def cache_rows(path):
    """Every cached answer by key, without its latency (a measurement, not an output)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT key, result FROM responses").fetchall()
    return {
        key: {k: v for k, v in json.loads(value).items() if k != "latency_s"} for key, value in rows
    }


@pytest.mark.timeout(180)
def test_two_workers_answer_and_cache_exactly_what_one_process_does(tmp_path):
    requests = mixed_requests(60)
    outcomes = {}
    with FakeLLMServer() as server:  # one URL: it is part of every cache key
        for count in (1, 2):
            server.reset()
            cache = tmp_path / f"cache-{count}.sqlite"
            config = endpoint(server, workers=count, max_concurrent=8)
            with LLMClient(config, cache, progress=False) as client:
                results = client.complete_many(requests)
                started = client.worker_pool.pids if client.worker_pool else []
                stats = client.stats
            assert server.request_count == 60  # duplicates are sent once
            assert len(started) == (2 if count == 2 else 0)
            # Each repeat shares its first's answer: still in flight (deduplicated) or, when
            # the first was answered before the repeat's chunk came, from the cache.
            assert stats.calls == 60 and stats.deduplicated + stats.cache_hits == 60
            assert sum(result.cached for result in results) == stats.cache_hits
            outcomes[count] = ([comparable(r) for r in results], cache_rows(cache))
    assert len(outcomes[2][1]) == 60  # each distinct request cached once
    assert outcomes[2] == outcomes[1]
    texts = [r[0] for r in outcomes[2][0]]
    assert texts[0] == "Echo: question 0" and 1 <= json.loads(texts[1])["rating"] <= 5


@pytest.mark.timeout(180)
def test_a_rerun_sends_nothing_and_starts_no_worker(tmp_path):
    cache = tmp_path / "cache.sqlite"
    requests = mixed_requests(20)
    with FakeLLMServer() as server:
        with LLMClient(endpoint(server, workers=2), cache, progress=False) as client:
            first = client.complete_many(requests)
        with LLMClient(endpoint(server, workers=2), cache, progress=False) as client:
            again = client.complete_many(requests)
            assert client.worker_pool.pids == []
            assert client.stats.calls == 0 and client.stats.cache_hits == 40
        assert server.request_count == 20
    assert all(r.cached for r in again)
    assert [r.text for r in again] == [r.text for r in first]


@pytest.mark.timeout(180)
def test_the_server_never_holds_more_requests_than_the_endpoint_limit():
    with FakeLLMServer(echo_responder, latency_s=0.02) as server:
        with LLMClient(
            endpoint(server, workers=2, max_concurrent=6), None, progress=False
        ) as client:
            results = client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(150)])
            assert client.worker_pool.shares == [3, 3]
        assert server.request_count == 150
        # Both workers kept their slots busy, and together never more than the limit.
        assert 4 <= server.max_in_flight <= 6
    assert all(r.ok for r in results)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("status", [429, 500])
def test_workers_retry_like_the_client(status):
    responder = flaky(echo_responder, failures=2, status=status, retry_after=0.01)
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server, workers=2), None, progress=False) as client:
            results = client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(20)])
            assert client.stats.retries == 40  # counted in the workers, summed in the parent
            assert len(client.worker_pool.pids) == 2
        assert server.request_count == 60
    assert [r.text for r in results] == [f"Echo: q{i}" for i in range(20)]


@pytest.mark.timeout(180)
def test_requests_that_keep_failing_in_a_worker_fail_as_in_one_process():
    doomed = scripted([("doomed", flaky(echo_responder, failures=99, status=503))])
    with FakeLLMServer(doomed) as server:
        with LLMClient(endpoint(server, workers=2, max_retries=1), None, progress=False) as client:
            results = client.complete_many(
                [ChatRequest.from_prompt("doomed"), ChatRequest.from_prompt("fine")]
            )
            assert client.stats.failures == 1
    assert "gave up after 2 attempts" in results[0].error and "HTTP 503" in results[0].error
    assert results[1].text == "Echo: fine"


@pytest.mark.timeout(180)
def test_a_credentials_key_reaches_the_workers_and_nothing_else(tmp_path, caplog):
    secret = "sk-worker-secret-0123456789"
    register_credentials({"judge": {"api_key": secret}})
    cache = tmp_path / "cache.sqlite"
    caplog.set_level(logging.DEBUG)
    try:
        with FakeLLMServer(echo_responder, api_key=secret) as server:
            config = endpoint(server, workers=2, credentials="judge")
            with LLMClient(config, cache, progress=False) as client:
                results = client.complete_many(
                    [ChatRequest.from_prompt(f"q{i}") for i in range(20)]
                )
                assert len(client.worker_pool.pids) == 2
    finally:
        register_credentials({})
    assert [r.text for r in results] == [f"Echo: q{i}" for i in range(20)]  # no 401
    assert secret not in caplog.text
    assert secret.encode() not in cache.read_bytes()


def kill_worker_after(client, answers, which):
    """An on_result callback that SIGKILLs the workers `which` picks once `answers` arrived."""
    seen = []

    def on_result(index, result):
        seen.append(result)
        if len(seen) == answers:
            for pid in which(client.worker_pool.pids):
                os.kill(pid, signal.SIGKILL)

    return on_result, seen


@pytest.mark.timeout(120)
def test_a_killed_worker_hands_its_requests_to_the_other(caplog):
    caplog.set_level(logging.WARNING, logger="llm_feedback.backends.workers")
    n = 160
    with FakeLLMServer(echo_responder, latency_s=0.05) as server:
        config = endpoint(server, workers=2, max_concurrent=8)
        with LLMClient(config, None, progress=False) as client:
            on_result, _ = kill_worker_after(client, 20, lambda pids: pids[:1])
            results = client.complete_many(
                [ChatRequest.from_prompt(f"q{i}") for i in range(n)], on_result=on_result
            )
            assert len(client.worker_pool.pids) == 1
            assert client.worker_pool.shares == [8]  # the survivor took over the dead share
        # What the dead worker held (at most its share) may have been sent twice.
        assert n <= server.request_count <= n + 4
    assert [r.text for r in results] == [f"Echo: q{i}" for i in range(n)]
    assert "exited with code -9" in caplog.text and "send" in caplog.text


@pytest.mark.timeout(120)
def test_when_every_worker_dies_the_stage_fails_and_keeps_what_was_answered(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(echo_responder, latency_s=0.05) as server:
        config = endpoint(server, workers=2, max_concurrent=8)
        with LLMClient(config, cache, progress=False) as client:
            on_result, seen = kill_worker_after(client, 20, lambda pids: pids)
            with pytest.raises(EndpointError, match="every worker process exited"):
                client.complete_many(
                    [ChatRequest.from_prompt(f"q{i}") for i in range(400)], on_result=on_result
                )
            answered = len(seen)
        with LLMClient(endpoint(server, workers=1), cache, progress=False) as client:
            client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(400)])
            assert client.stats.cache_hits >= answered >= 20  # nothing answered was lost


@pytest.mark.timeout(120)
def test_workers_stop_when_the_client_closes_on_an_error():
    with FakeLLMServer(echo_responder) as server:
        with pytest.raises(RuntimeError, match="the caller failed"):
            with LLMClient(endpoint(server, workers=2), None, progress=False) as client:
                client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(10)])
                pids = client.worker_pool.pids
                raise RuntimeError("the caller failed")
    assert len(pids) == 2 and not any(psutil.pid_exists(pid) for pid in pids)


LEFT_OPEN = """
from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.testing.server import FakeLLMServer
server = FakeLLMServer().start()
config = EndpointConfig.from_dict(
    {"backend": "openai", "model": "m", "base_url": server.base_url, "workers": 2}
)
client = LLMClient(config, None, progress=False)
client.open()
client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(10)])
print(*client.worker_pool.pids)
"""


@pytest.mark.timeout(120)
def test_workers_of_a_client_left_open_stop_quietly_at_exit():
    run = subprocess.run(
        [sys.executable, "-c", LEFT_OPEN], check=False, capture_output=True, text=True, timeout=100
    )
    assert run.returncode == 0, run.stderr
    pids = [int(pid) for pid in run.stdout.split()]
    assert len(pids) == 2 and not any(psutil.pid_exists(pid) for pid in pids)
    assert "exited" not in run.stderr  # stopped by us, not reported as dying


INTERRUPTED = """
from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.testing.server import FakeLLMServer
with FakeLLMServer(latency_s=0.05) as server:
    config = EndpointConfig.from_dict(
        {"backend": "openai", "model": "m", "base_url": server.base_url, "workers": 2}
    )
    with LLMClient(config, None, progress=False) as client:
        def on_result(index, result):
            if index == 0:
                print(*client.worker_pool.pids, flush=True)
        client.complete_many(
            [ChatRequest.from_prompt(f"q{i}") for i in range(100_000)], on_result=on_result
        )
"""


@pytest.mark.timeout(120)
def test_ctrl_c_stops_the_stage_and_its_workers():
    child = subprocess.Popen(
        with_default_sigint([sys.executable, "-c", INTERRUPTED]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        pids = [int(pid) for pid in child.stdout.readline().split()]
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode != 0 and b"KeyboardInterrupt" in stderr
    assert len(pids) == 2 and not any(psutil.pid_exists(pid) for pid in pids)


@pytest.mark.timeout(180)
def test_auto_sends_in_process_below_the_threshold_and_from_workers_above(monkeypatch):
    monkeypatch.setattr(workers, "usable_cores", lambda: 4)  # auto's smallest worker machine
    with FakeLLMServer(echo_responder) as server:
        config = endpoint(server, max_concurrent=8)
        assert config.workers == "auto" and worker_processes(config) == 3
        with LLMClient(config, None, progress=False) as client:
            client.complete_many([ChatRequest.from_prompt(f"q{i}") for i in range(50)])
            assert client.worker_pool.pids == []  # 50 misses: one process sends them
            monkeypatch.setattr(workers, "WORKER_THRESHOLD", 30)
            results = client.complete_many([ChatRequest.from_prompt(f"r{i}") for i in range(50)])
            pids = client.worker_pool.pids
            assert len(pids) == worker_processes(config)
            client.complete_many([ChatRequest.from_prompt(f"s{i}") for i in range(50)])
            assert client.worker_pool.pids == pids  # the next stage reuses them
        assert server.request_count == 150
    assert [r.text for r in results] == [f"Echo: r{i}" for i in range(50)]


def test_how_many_processes_each_endpoint_uses(fake_llm, monkeypatch):
    for cores, processes in [(1, 1), (2, 1), (3, 1), (4, 3), (5, 4), (64, 4)]:
        monkeypatch.setattr(workers, "usable_cores", lambda cores=cores: cores)
        assert worker_processes(endpoint(fake_llm, max_concurrent=64)) == processes
    assert worker_processes(endpoint(fake_llm, max_concurrent=2)) == 2
    assert worker_processes(endpoint(fake_llm, transport="sdk")) == 1
    assert worker_processes(endpoint(fake_llm, workers=3, max_concurrent=2)) == 2
    local = EndpointConfig.from_dict({"backend": "local", "model": "m"}, name="local")
    vllm = EndpointConfig.from_dict({"backend": "vllm", "model": "m"}, name="gpu")
    assert worker_processes(local) == worker_processes(vllm) == 1
    assert concurrency_shares(32, 3) == [11, 11, 10]
    assert concurrency_shares(5, 5) == [1, 1, 1, 1, 1]


@pytest.mark.parametrize("value", [0, -2, "many", True, 2.5, None])
def test_a_bad_workers_setting_is_named(fake_llm, value):
    with pytest.raises(ConfigError, match=r"endpoints\.test\.workers"):
        endpoint(fake_llm, workers=value)


def test_workers_on_an_in_process_model_are_refused():
    with pytest.raises(ConfigError, match=r"endpoints\.local\.workers.*HTTP endpoints"):
        EndpointConfig.from_dict({"backend": "local", "model": "m", "workers": 2}, name="local")


def readme_workers_command():
    section = documentation_section("More than one core")
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    words = shlex.split(block.strip())
    assert words[:4] == ["kedro", "run", "--pipelines", "sample,generate"], words
    return words[words.index("--params") + 1].split(",")


@pytest.mark.timeout(300)
def test_the_readme_workers_command(tmp_path):
    """The documented `kedro run` with `workers: 2`, its server URL replaced by the fake's."""
    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        params = [
            setting.replace("http://localhost:8000/v1", server.base_url)
            for setting in readme_workers_command()
        ]
        command = kedro_cli(data_root, server.base_url, *params)
        run = run_kedro_cli(command, "sample")
        run = run_kedro_cli(command, "generate")
        sent = server.request_count
    log = " ".join((run.stdout + run.stderr).decode().split())
    assert "sending from 2 worker processes" in log
    (path,) = (data_root / "03_primary").glob("completions.parquet/*/completions.parquet")
    completions = pd.read_parquet(path)
    assert sent == len(completions) > 0
    assert completions["error"].isna().all() and completions["response"].str.len().gt(0).all()
