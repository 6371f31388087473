"""A run that cannot do its job stops before paying, and says so (issue: trust)."""

import fcntl
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kedro.validation import ParameterValidationError

from llm_feedback.core.errors import ConfigError, EndpointError, RunLocked
from llm_feedback.runs.lock import RunLock
from llm_feedback.testing.server import (
    FakeLLMServer,
    Reply,
    fetch_stats,
    flaky,
    schema_responder,
    serve_in_subprocess,
)
from tests.conftest import (
    KEDRO_CLI_ENV,
    PROJECT_ROOT,
    endpoints_via,
    kedro_cli,
    readme_block,
    run_kedro_cli,
)

FEW = {"max_prompts": 4}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def versions_written(data_root: Path) -> list[Path]:
    return [p for p in data_root.rglob("*.parquet/*") if p.is_dir()]


def test_an_endpoint_that_is_down_stops_the_cli_run_before_any_node(tmp_path):
    data_root = tmp_path / "data"
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kedro",
            "run",
            "--params",
            f"data_root={data_root},endpoints.local.backend=openai,"
            f"endpoints.local.base_url={url},endpoints.local.model=fake",
        ],
        cwd=PROJECT_ROOT,
        env={**os.environ, "KEDRO_DISABLE_TELEMETRY": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "endpoint 'local'" in output and url in output and "cannot be reached" in output
    assert time.monotonic() - started < 60  # the CLI's own start-up is most of it
    assert versions_written(data_root) == []  # not even sample wrote a version


def test_a_rejected_key_stops_the_run_naming_where_the_key_comes_from(
    run_kedro, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-0123456789")
    with FakeLLMServer(schema_responder, api_key="sk-right-key-0123456789") as server:
        started = time.monotonic()
        with pytest.raises(EndpointError) as error:
            run_kedro("__default__", {"endpoints": endpoints_via(server), "sample": FEW})
        assert time.monotonic() - started < 10
        assert server.request_count <= 3
    message = str(error.value)
    assert "rejects the key" in message and "OPENAI_API_KEY" in message
    assert "sk-wrong" not in message
    assert versions_written(tmp_path / "data") == []


def test_a_bad_annotate_block_fails_before_generate_pays(run_kedro, fake_llm):
    params = {
        "endpoints": endpoints_via(fake_llm),
        "sample": FEW,
        "annotate": {"judge": {"endpoint": "gpt-judge"}},
    }
    with pytest.raises(ConfigError, match="annotate.judge.endpoint: 'gpt-judge'"):
        run_kedro("__default__", params)
    assert fake_llm.request_count == 0


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"endpoints": {"local": {"max_concurrent": "abc"}}},
            "endpoints.local.max_concurrent must be int or null",
        ),
        ({"endpoints": {"local": {"timeout_s": "abc"}}}, "endpoints.local.timeout_s must be"),
        ({"generation": {"temperature": "hot"}}, "generation.temperature must be a number"),
        (
            {"annotate": {"judge": {"max_tokens": "abc"}}},
            "annotate.judge.max_tokens must be an integer",
        ),
        ({"annotate": {"aspects": ["wit"]}}, "unknown aspect 'wit'"),
        ({"annotate": {"n_shuffles": 0}}, "annotate.n_shuffles must be an integer >= 1"),
        ({"sample": {"seeed": 1}}, "sample.seeed: unknown setting"),
    ],
)
def test_each_bad_parameter_is_named_before_any_call(run_kedro, fake_llm, override, message):
    params = {"endpoints": endpoints_via(fake_llm), "sample": FEW}
    for key, value in override.items():
        if key == "endpoints":
            params["endpoints"]["local"].update(value["local"])
        else:
            params[key] = {**params.get(key, {}), **value}
    # An endpoints block fails Kedro's own validation (params.blocks), in the parser's words.
    with pytest.raises((ConfigError, ParameterValidationError), match=message):
        run_kedro("__default__", params)
    assert fake_llm.request_count == 0


def test_a_half_failing_endpoint_stops_the_node_and_keeps_what_was_answered(run_kedro, tmp_path):
    def half_fail(body, ctx):
        if ctx.call_index % 2:
            return Reply(status=400, error_message="bad luck")
        return "an answer"

    with FakeLLMServer(half_fail) as server:
        params = {
            "endpoints": endpoints_via(server, max_retries=0),
            "sample": {"max_prompts": None},
        }
        run_kedro("sample", params)
        with pytest.raises(EndpointError, match="failed") as error:
            run_kedro("generate", params)
        sent = server.stats()["chat_requests"]
    assert sent < 37 * 4  # stopped early, not ground through every row
    assert "endpoint 'local'" in str(error.value) and "cached" in str(error.value)
    import sqlite3

    cache = tmp_path / "data" / "02_intermediate" / "request_cache.sqlite"
    with sqlite3.connect(cache) as db:
        answered = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    # Every answer that arrived before the stop is cached (the message counts them).
    reported = int(re.search(r"(\d+) answered calls are cached", str(error.value))[1])
    assert answered >= reported > 0
    assert not list((tmp_path / "data" / "03_primary").glob("completions.parquet/*"))


def test_failures_over_the_share_fail_the_node_even_when_few(run_kedro, fake_llm, tmp_path):
    rows = 4 * 4

    def one_in_eight(body, ctx):
        return Reply(status=400, error_message="no") if ctx.call_index % 8 == 0 else "fine"

    with FakeLLMServer(one_in_eight) as server:
        params = {"endpoints": endpoints_via(server, max_retries=0), "sample": FEW}
        run_kedro("sample", params)
        with pytest.raises(EndpointError, match=r"14 of 16 answered.*max_failure_share 5%"):
            run_kedro("generate", params)
        # An endpoint that tolerates the share: the rerun sends only the 2 failed calls
        # (the server's 17th call fails again, its 18th is answered).
        params["endpoints"]["local"]["max_failure_share"] = 0.2
        completions = run_kedro("generate", params)["catalog"].load("completions").read()
        assert server.stats()["chat_requests"] == rows + 2
    assert len(completions) == rows and completions["error"].notna().sum() == 1


def test_retries_are_logged_at_warning(run_kedro, caplog):
    with FakeLLMServer(flaky(schema_responder, failures=1, retry_after=0.01)) as server:
        params = {"endpoints": endpoints_via(server), "sample": FEW}
        run_kedro("sample", params)
        with caplog.at_level(logging.WARNING):
            run_kedro("generate", params)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("retr" in line and "endpoint 'local'" in line for line in warnings)
    assert any(re.search(r"16 of 16 answered.*, [1-9]\d* retries", line) for line in warnings)


def test_the_readme_conf_local_examples_add_to_base(run_kedro, fake_llm, monkeypatch):
    """conf/local/{credentials,parameters}.yml verbatim from the README: `local` stays, every
    example endpoint parses, and --params overrides keep the rest of a block."""
    local = PROJECT_ROOT / "conf" / "local"
    written = [local / "parameters.yml", local / "credentials.yml"]
    assert not any(path.exists() for path in written), "a developer's own conf/local is there"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    monkeypatch.setenv("AZURE_API_KEY", "azure-test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-key")
    for path in written:
        path.write_text(readme_block(f"conf/local/{path.name}"))
    try:
        params = {
            "endpoints": endpoints_via(fake_llm),
            "sample": FEW,
            "annotate": {"judge": {"endpoint": "local"}},
        }  # as --params would
        run_kedro("sample", params)
        outputs = run_kedro("generate", params)
        parameters = outputs["catalog"].load("parameters")
    finally:
        for path in written:
            path.unlink()
    assert {"local", "openai", "azure", "vllm_server", "gpu"} <= set(parameters["endpoints"])
    assert parameters["endpoints"]["openai"]["model"] == "gpt-4o-mini"
    assert parameters["annotate"]["aspects"]  # the rest of annotate survived the override
    assert parameters["annotate"]["judge"]["top_p"] == 0.6
    assert len(outputs["catalog"].load("completions").read()) == 16
    assert fake_llm.stats()["chat_requests"] == 16


def test_one_run_per_data_root(tmp_path):
    lock_path = tmp_path / "request_cache.sqlite.lock"
    first = RunLock(lock_path)
    first.acquire()
    try:
        with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
            RunLock(lock_path).acquire()
    finally:
        first.release()
    again = RunLock(lock_path)  # released: free again
    again.acquire()
    again.release()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    lock_path = tmp_path / "request_cache.sqlite.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from llm_feedback.runs.lock import RunLock; "
            f"lock = RunLock({str(lock_path)!r}); lock.acquire(); print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(RunLocked, match=f"pid {holder.pid}"):
        RunLock(lock_path).acquire()
    holder.kill()
    holder.wait()
    lock = RunLock(lock_path)
    lock.acquire()
    lock.release()


def test_the_run_lock_and_its_refusal_mask_a_url_password_and_keys(tmp_path):
    lock_path = tmp_path / "request_cache.sqlite.lock"
    argv = [
        "kedro",
        "run",
        "--params",
        "endpoints.j.base_url=https://bob:pw-s3cret@host/v1,endpoints.j.api_key=plainkey99",
    ]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from llm_feedback.runs.lock import RunLock; "
            f"sys.argv = {argv!r}; "
            f"lock = RunLock({str(lock_path)!r}); lock.acquire(); print('held', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        stored = lock_path.read_text()
        with pytest.raises(RunLocked) as refusal:
            RunLock(lock_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    for shown in (stored, str(refusal.value)):
        assert "pw-s3cret" not in shown and "plainkey99" not in shown
        assert "https://bob:***@host/v1" in shown and "api_key=***" in shown
    # A lock an older version wrote with the raw command line is masked when quoted.
    lock_path.write_text(f"pid 1 ({' '.join(argv)}) since 2026-01-01")
    with open(lock_path) as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with pytest.raises(RunLocked) as refusal:
            RunLock(lock_path).acquire()
    assert "pw-s3cret" not in str(refusal.value) and "bob:***@host" in str(refusal.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"source": "flan", "instruction": "ok"}\n{"source": "flan", instruction}\n',
            r"bad\.jsonl, line 2, column \d+: malformed JSON",
        ),
        (
            b'{"source": "flan", "instruction": "ok"}\n\n'
            b'{"source": "flan", "instruction": "caf\xe9"}\n',
            r"bad\.jsonl, line 3: not UTF-8 \(byte 0xe9",
        ),
        (b'["not", "an", "object"]\n', r"bad\.jsonl, line 1: expected a JSON object"),
    ],
)
def test_a_bad_prompt_file_is_named_by_file_and_line(
    run_kedro, fake_llm, tmp_path, content, message
):
    raw = tmp_path / "prompts"
    raw.mkdir()
    (raw / "bad.jsonl").write_bytes(content)
    with pytest.raises(Exception, match=message):
        run_kedro("sample", {"raw_prompts_dir": str(raw), "endpoints": endpoints_via(fake_llm)})
    assert fake_llm.request_count == 0


def test_a_second_run_on_the_same_data_root_is_refused_and_pays_nothing(tmp_path):
    data_root = tmp_path / "data"
    with serve_in_subprocess(latency_s=1.0, responder="echo") as url:
        command = kedro_cli(data_root, url, "sample.max_prompts=8")
        run_kedro_cli(command, "sample")
        first = subprocess.Popen(
            [*command, "--pipelines", "generate"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while fetch_stats(url)["chat_requests"] == 0:
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.run(
            [*command, "--pipelines", "generate"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            capture_output=True,
            text=True,
            check=False,
        )
        assert first.wait(timeout=120) == 0
        sent = fetch_stats(url)["chat_requests"]
    assert second.returncode != 0
    assert f"pid {first.pid}" in second.stdout + second.stderr
    assert sent == 8 * 4  # every call paid once, by the first run only
    # (32 calls, 4 at a time, 1 s each: the first run is still busy when the second starts)


def test_an_over_long_prompt_is_skipped_counted_and_not_judged(run_kedro, fake_llm, tmp_path):
    raw = tmp_path / "prompts"
    raw.mkdir()
    lines = [{"source": "flan", "instruction": f"Question {i}?"} for i in range(3)]
    lines.append({"source": "flan", "instruction": "word " * 200_000})  # ~1 MB
    (raw / "mixed.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    params = {
        "raw_prompts_dir": str(raw),
        "sample": {"max_prompts": None},
        "endpoints": endpoints_via(fake_llm, max_input_tokens=4000),
    }
    outputs = run_kedro("__default__", params)
    completions = outputs["catalog"].load("completions").read()
    skipped = completions["error"].fillna("").str.startswith("skipped_too_long")
    assert skipped.sum() == 4 and completions.loc[~skipped, "error"].isna().all()
    assert fake_llm.stats()["chat_requests"] > 0
    assert all(len(json.dumps(body)) < 100_000 for body in fake_llm.requests)  # never sent
    aspects = outputs["catalog"].load("aspect_annotations").read()
    assert len(aspects) == 3 * 4 * 4  # 3 prompts x 4 completions x 4 aspects, none skipped
