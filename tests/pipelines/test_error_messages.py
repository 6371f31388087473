"""An expected error ends `kedro run` with one message naming the problem, no traceback.

Each case runs the project's `kedro run` as a child process and reads its stderr: a short
message (what, where), exit status 1, the traceback in info.log, or on the terminal with
`--verbose` / LLM_FEEDBACK_VERBOSE=1.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from llm_feedback.testing.server import FakeLLMServer, schema_responder
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT

MAX_STDERR_LINES = 4


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(tmp_path: Path, *params: str, env: dict | None = None, flags=(), pipeline="sample"):
    settings = ",".join([f"data_root={tmp_path / 'data'}", *params])
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kedro",
            "run",
            *flags,
            "--pipelines",
            pipeline,
            "--params",
            settings,
        ],
        cwd=PROJECT_ROOT,
        env={**KEDRO_CLI_ENV, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _assert_one_clear_message(result: subprocess.CompletedProcess, *named: str) -> str:
    assert result.returncode == 1, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) <= MAX_STDERR_LINES, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "╭" not in result.stderr
    assert lines[0].startswith("error: ")
    for text in named:
        assert text in lines[0], lines[0]
    return lines[0]


def test_a_bad_parameter_is_one_line(tmp_path):
    result = _run(tmp_path, "sample.max_prompts=-3")
    _assert_one_clear_message(result, "sample.max_prompts", "-3")
    assert "info.log" in result.stderr  # where the traceback went


def test_the_verbose_flag_and_variable_print_the_traceback(tmp_path):
    for flags, env in ((("--verbose",), None), ((), {"LLM_FEEDBACK_VERBOSE": "1"})):
        result = _run(tmp_path, "sample.max_prompts=-3", flags=flags, env=env)
        assert result.returncode != 0
        assert "Traceback" in result.stderr and "sample.max_prompts" in result.stderr


def test_an_empty_prompts_file_says_it_is_empty(tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "mine.jsonl").write_text("\n\n")
    result = _run(tmp_path, f"raw_prompts_dir={prompts}")
    message = _assert_one_clear_message(result, str(prompts / "mine.jsonl"), "is empty")
    assert "columns present" not in message


def test_a_json_prompts_file_says_only_jsonl_is_read(tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "mine.json").write_text('[{"instruction": "Hi?"}]')
    result = _run(tmp_path, f"raw_prompts_dir={prompts}")
    message = _assert_one_clear_message(result, "mine.json", "only .jsonl files are read")
    assert "No partitions" not in message


def test_a_dead_endpoint_is_one_message_naming_it(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    result = _run(
        tmp_path,
        "endpoints.local.backend=openai",
        f"endpoints.local.base_url={url}",
        "endpoints.local.model=fake",
        pipeline="__default__",
    )
    _assert_one_clear_message(result, "endpoint 'local'", url, "cannot be reached")


def test_a_rejected_key_is_one_message_naming_where_the_key_comes_from(tmp_path):
    with FakeLLMServer(schema_responder, api_key="sk-right-key-0123456789") as server:
        result = _run(
            tmp_path,
            "endpoints.local.backend=openai",
            f"endpoints.local.base_url={server.base_url}",
            "endpoints.local.model=fake",
            "sample.max_prompts=2",
            env={"OPENAI_API_KEY": "sk-wrong-key-0123456789"},
            pipeline="__default__",
        )
    _assert_one_clear_message(result, "OPENAI_API_KEY")
    assert "sk-wrong" not in result.stderr
