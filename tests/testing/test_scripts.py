"""The scripting responders (`scripts`): scripted rules, flaky failures, sequences and the
chaos benchmark's faults."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import openai
import pytest

from llm_feedback.testing.in_process import FakeLLMServer
from llm_feedback.testing.replies import Reply, RequestContext, echo_responder
from llm_feedback.testing.scripts import (
    CHAOS_FAULTS,
    CHAOS_STALL_S,
    chaos_responder,
    flaky,
    scripted,
    sequence,
)
from tests.testing.conftest import USER_QUESTION, client_for, user_message


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


def chaos_fault(reply: str | Reply) -> str:
    if isinstance(reply, str):
        return "answered"
    if reply.status == 429:
        return "rate_limited"
    if reply.status == 500:
        return "server_error"
    return "stall" if reply.delay_s == CHAOS_STALL_S else "malformed"


def test_chaos_faults_come_at_their_shares_and_repeat_per_attempt() -> None:
    body = {
        "messages": USER_QUESTION,
        "response_format": {"type": "json_object", "schema": {"type": "object"}},
    }
    draws = 4000
    contexts = [RequestContext(0, index % 4, f"{index:032x}", "/v1") for index in range(draws)]

    replies = [chaos_responder(body, context) for context in contexts]
    faults = Counter(chaos_fault(reply) for reply in replies)

    for fault, share in CHAOS_FAULTS.items():
        assert faults[fault] / draws == pytest.approx(share, abs=0.025), fault
    assert faults["answered"] / draws == pytest.approx(1 - sum(CHAOS_FAULTS.values()), abs=0.03)
    # The answered rest are schema_responder's documents; the same attempt draws the same.
    assert all(isinstance(json.loads(r), dict) for r in replies if isinstance(r, str))
    assert [chaos_responder(body, context) for context in contexts[:200]] == replies[:200]
