"""The command line (`cli`): naming responders, and the server as a child process that
benchmarks start with `serve_in_subprocess` and read with `fetch_stats`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import openai
import psutil
import pytest

from llm_feedback.testing import server
from llm_feedback.testing.cli import fetch_stats, resolve_responder, serve_in_subprocess
from llm_feedback.testing.replies import echo_responder, schema_responder
from llm_feedback.testing.scripts import chaos_responder
from tests.testing.conftest import USER_QUESTION, user_message


def teapot_responder(body: dict[str, Any], ctx: server.RequestContext) -> server.Reply:
    """A --responder written the way callers write one: its Reply from `testing.server`."""
    return server.scripted([("capital", server.Reply(status=418, error_message="teapot"))])(
        body, ctx
    )


def test_resolve_responder_by_name() -> None:
    assert resolve_responder("echo") is echo_responder
    assert resolve_responder("schema") is schema_responder
    assert resolve_responder("chaos") is chaos_responder
    assert resolve_responder("llm_feedback.testing.server:echo_responder") is echo_responder
    with pytest.raises(ValueError, match="module:callable"):
        resolve_responder("no_such_builtin")


def test_the_command_line_keeps_its_name_and_options() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "llm_feedback.testing.server", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert shown.startswith("usage: python -m llm_feedback.testing.server")
    for option in ("--host", "--port", "--latency", "--responder"):
        assert option in shown


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


def test_subprocess_serves_a_responder_module_that_imports_from_testing_server() -> None:
    with serve_in_subprocess(responder=f"{__name__}:teapot_responder") as base_url:
        with openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            with pytest.raises(openai.APIStatusError, match="teapot") as raised:
                client.chat.completions.create(model="m", messages=USER_QUESTION)
            echoed = client.chat.completions.create(model="m", messages=user_message("hi"))

    assert raised.value.status_code == 418
    assert echoed.choices[0].message.content == "Echo: hi"
