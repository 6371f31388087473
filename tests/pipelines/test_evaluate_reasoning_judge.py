"""A reasoning judge over real HTTP: its thinking has a budget of its own, its verdict is
read after the thinking, its log-probability verdicts are off and its thinking is billed."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.lean import LeanOpenAIBackend, chat_result
from llm_feedback.backends.reasoning import split_thinking
from llm_feedback.evaluation import run_evaluation
from llm_feedback.judges.kinds.single_1_10 import MAX_TOKENS
from llm_feedback.replies.status import EMPTY, OK
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext
from tests.conftest import endpoints_via

ITEMS = 8
# A thinker on its hard items thinks for the whole of the verdict's default budget.
THOUGHT = MAX_TOKENS
STYLES = ("tags", "field")


class ThinkingJudge:
    """Thinks before its verdict, as a reasoning model served over chat completions: in
    `<think>` tags in the content ("tags") or in `reasoning_content` ("field"). On odd
    items it thinks for `THOUGHT` tokens (a word each); a budget too small for the thought
    and the verdict is cut off mid-thought (finish_reason "length", no verdict). The
    thought rates the response 2 before settling on 7: only the verdict after it counts."""

    def __init__(self, style: str) -> None:
        self.style = style
        self.budgets: list[int] = []
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any], ctx: RequestContext) -> Reply:
        self.bodies.append(body)
        budget = body.get("max_completion_tokens") or body["max_tokens"]
        self.budgets.append(budget)
        item = int(re.search(r"Question (\d+)", body["messages"][-1]["content"])[1])
        length = THOUGHT if item % 2 else 8
        thought = " ".join(["Rating: [[2]]? no, weigh it again."] + ["hmm"] * (length - 7))
        verdict = "Clear and right.\nRating: [[7]]"
        if budget < length + len(verdict.split()):
            cut = " ".join(thought.split()[:budget])
            if self.style == "tags":
                return Reply(content=f"<think>{cut}", finish_reason="length")
            return Reply(content=None, reasoning=cut, finish_reason="length")
        if self.style == "tags":
            return Reply(content=f"<think>{thought}</think>\n\n{verdict}")
        return Reply(content=verdict, reasoning=thought)


def samples() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "instance_id": f"i{item}",
                "question": f"Question {item}: say why the sky is blue.",
                "response": "Rayleigh scattering.",
                "model": "m",
            }
            for item in range(ITEMS)
        ]
    )


def judge_with(server: FakeLLMServer, **endpoint: Any) -> pd.DataFrame:
    endpoints = endpoints_via(server, structured_output=False, **endpoint)
    params = {"mode": "single_1_10", "judge": {"endpoint": "local"}, "max_reasks": 0}
    judgments, _ = run_evaluation(samples(), params, endpoints, None, progress=False)
    return judgments


@pytest.mark.parametrize("style", STYLES)
def test_a_separate_thinking_budget_leaves_every_verdict_room(style: str, caplog):
    caplog.set_level(logging.INFO, logger="llm_feedback.evaluation.judging")
    judge = ThinkingJudge(style)
    with FakeLLMServer(judge) as server:
        judgments = judge_with(server, reasoning_tokens=THOUGHT)
    assert (judgments["parse_status"] == OK).all()
    assert (judgments["score"] == 7).all()  # the verdict after the thought, never its 2
    assert set(judge.budgets) == {MAX_TOKENS + THOUGHT}
    # A reasoning judge is asked for no token probabilities.
    assert not any("logprobs" in body for body in judge.bodies)
    assert "log-probability verdicts off: endpoints.local sets a reasoning budget" in caplog.text


@pytest.mark.parametrize("style", STYLES)
def test_without_it_the_thinkers_verdicts_are_unreadable_rows_and_the_run_goes_on(style, caplog):
    judge = ThinkingJudge(style)
    with FakeLLMServer(judge) as server:
        judgments = judge_with(server)
    assert "4 replies ran out of tokens before any answer" in caplog.text
    statuses = judgments.set_index("instance_id")["parse_status"]
    thinkers = [f"i{item}" for item in range(ITEMS) if item % 2]
    assert (statuses[thinkers] == EMPTY).all()
    assert (statuses.drop(thinkers) == OK).all()
    assert judgments["score"].isna().sum() == len(thinkers)


def test_reasoning_effort_and_the_o_series_body():
    """o-series: `max_completion_tokens` for the verdict and the thinking, no temperature
    (they refuse any but 1), `reasoning_effort` as set; its reasoning tokens are billed."""
    seen: list[dict[str, Any]] = []

    def o_series(body: dict[str, Any], ctx: RequestContext) -> Reply:
        seen.append(body)
        return Reply(content="Rating: [[8]]", reasoning="thought " * 30)

    with FakeLLMServer(o_series) as server:
        config = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": "o3-mini",
                "base_url": server.base_url,
                "reasoning_effort": "low",
                "reasoning_tokens": 500,
            },
            name="o",
        )
        with LLMClient(config, None, progress=False) as client:
            result = client.complete(ChatRequest.from_prompt("Rate it.", max_tokens=64))
    (body,) = seen
    assert body["max_completion_tokens"] == 564 and "max_tokens" not in body
    assert body["reasoning_effort"] == "low"
    assert "temperature" not in body and "top_p" not in body
    assert result.text == "Rating: [[8]]"
    assert result.reasoning_tokens == 30 and result.completion_tokens == 32  # 30 + 2 words
    assert config.reasoning_judge is not None


def test_reasoning_counted_apart_from_completion_tokens_is_billed_too():
    with FakeLLMServer() as server:
        config = EndpointConfig.from_dict(
            {"backend": "openai", "model": "r1", "base_url": server.base_url}, name="r1"
        )
    backend = LeanOpenAIBackend(config)
    usage = {"prompt_tokens": 9, "completion_tokens": 4}
    both = {**usage, "completion_tokens_details": {"reasoning_tokens": 120}}
    for body_usage, billed in ((usage, 4), (both, 124)):
        body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        result = chat_result({**body, "usage": body_usage}, 0.1, backend.model)
        assert result.completion_tokens == billed


@pytest.mark.parametrize(
    ("content", "answer", "thinking"),
    [
        ("<think>a\nb</think>\n\nRating: [[7]]", "Rating: [[7]]", "a\nb"),
        ("a b</think>Rating: [[7]]", "Rating: [[7]]", "a b"),  # the template opened it
        ("<think>still thinking", "", "still thinking"),
        ("Rating: [[7]]", "Rating: [[7]]", None),
    ],
)
def test_the_answer_is_what_follows_the_thinking(content, answer, thinking):
    assert split_thinking(content) == (answer, thinking)


def test_the_card_and_the_log_say_why_logprob_verdicts_are_off(run_kedro, tmp_path: Path):
    path = tmp_path / "pairs.jsonl"
    rows = [
        {"question": f"Question {i}: which?", "response_a": "yes", "response_b": "no", "label": "A"}
        for i in range(4)
    ]
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")

    def reasoning_pairwise(body: dict[str, Any], ctx: RequestContext) -> Reply:
        assert "logprobs" not in body
        return Reply(content="A is right.\nVerdict: [[A]]", reasoning="compare them")

    with FakeLLMServer(reasoning_pairwise) as server:
        params = {
            "endpoints": endpoints_via(server, structured_output=False, reasoning_tokens=256),
            "eval_samples_path": str(path),
            "evaluate": {"mode": "pairwise"},
        }
        card = run_kedro("evaluate", params)["catalog"].load("eval_judge_card")
    assert "Log-probability verdicts: off, because endpoints.local sets a reasoning" in card


def test_the_plan_counts_the_thinking_budget_as_output():
    from llm_feedback.runs.plan import Stage  # noqa: PLC0415

    with FakeLLMServer() as server:
        thinking = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": "r1",
                "base_url": server.base_url,
                "reasoning_tokens": 500,
            },
            name="r1",
        )
    requests = [ChatRequest.from_prompt(f"Question {i}", max_tokens=64) for i in range(3)]
    (row,) = Stage(thinking, requests, None).rows("judge", ["r1"] * 3, "counted")
    assert row["completion_tokens"] == 3 * (64 + 500)
