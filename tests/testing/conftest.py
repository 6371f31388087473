"""What the fake server's tests share: a question, an echo server and a client for it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from llm_feedback.testing.in_process import FakeLLMServer
from llm_feedback.testing.replies import echo_responder

USER_QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def user_message(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def client_for(server: FakeLLMServer, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key="test-key", **{"max_retries": 0, **options}
    )


@pytest.fixture
def echo_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(responder=echo_responder) as server:
        yield server
