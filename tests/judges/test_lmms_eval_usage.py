"""lmms-eval's judge usage, written as lmms-eval code writes it, against the test server.

The usage below is a code block run as it stands (only the import path is this project's):
the judge comes from the environment (lmms-eval's full chat-completions OPENAI_API_URL, no
MODEL_VERSION: its default judge model), with a system prompt of its own; sync calls,
a context passed positionally, extra template fields as keyword arguments, an async batch
with `images_list` holding raw image bytes, a rubric and a comparison in both orders.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from llm_feedback.core.errors import InputError
from llm_feedback.judges import Judge
from llm_feedback.judges.lmms_eval_compat.inputs import with_template_fields
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.media_files import png_bytes

LMMS_EVAL_USAGE = """
import asyncio
from llm_feedback.judges import Judge
from llm_feedback.judges.lmms_eval_compat.inputs import with_template_fields

judge = Judge(system_prompt="You are a strict grader of answers.")
available = judge.is_available()

binary = judge.evaluate_binary(
    question="What is 2 + 2?", answer="4", prediction="The answer is 4", output_format="0/1"
)

templated = judge.evaluate_binary(
    "What is the capital of France?",
    "Paris",
    "Lyon",
    "0/1",
    "Subject: {subject}\\nQuestion: {question}\\nReference: {answer}\\n"
    "Prediction: {prediction}\\nReply with 1 if correct, else 0.",
    subject="geography",
)

rubric = judge.evaluate_with_rubric(
    question="Explain photosynthesis.",
    prediction="Plants turn light, water and CO2 into sugar and oxygen.",
    rubric={"accuracy": "Is it factually right?", "completeness": "Does it cover the steps?"},
)

comparison = judge.evaluate_comparative(
    "What is in the picture?",
    "A blue circle.",
    "A red square on white.",
    "The picture shows one red square.",
)

async def judge_batch():
    return await judge.evaluate_binary_batch_async(
        questions=["What colour is the square?", "How many squares are there?"],
        answers=["red", "one"],
        predictions=["It is red.", "There are three."],
        images_list=[[image_bytes], [image_bytes, image_bytes]],
    )

batch = asyncio.run(judge_batch())
judge.close()
"""


def _block(text: str, label: str) -> str:
    match = re.search(rf"<<<{label} BEGIN \w+>>>\n(.*?)\n<<<{label} END", text, re.S)
    return match.group(1) if match else ""


def content_judge(body: dict[str, Any], ctx: RequestContext) -> str:
    """Answers each kind of question by its content: correct when the candidate contains
    the reference, the red square wins comparisons, a rubric scores 4 and 3."""
    user = body["messages"][-1]["content"]
    text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)
    if "[Criteria]" in text:
        return json.dumps({"scores": {"accuracy": 4, "completeness": 3}, "justification": "ok"})
    if "Compare two responses" in text:
        red_first = "red square" in _block(text, "RESPONSE A")
        scores = (8, 2) if red_first else (2, 8)
        verdict = "A" if red_first else "B"
        return json.dumps(
            {"score_a": scores[0], "score_b": scores[1], "verdict": verdict, "explanation": "-"}
        )
    reference = _block(text, "REFERENCE ANSWER").lower()
    candidate = _block(text, "CANDIDATE ANSWER") or _block(text, "PREDICTION")
    return json.dumps({"correct": int(bool(reference) and reference in candidate.lower())})


@pytest.fixture
def lmms_eval_environment(monkeypatch):
    with FakeLLMServer(content_judge) as server:
        for name in ("MODEL_VERSION", "OPENAI_BASE_URL", "AZURE_ENDPOINT", "AZURE_OPENAI_ENDPOINT"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("API_TYPE", "openai")
        monkeypatch.setenv("OPENAI_API_URL", f"{server.base_url}/chat/completions")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        yield server


def test_lmms_eval_usage_runs_as_written(lmms_eval_environment):
    server = lmms_eval_environment
    names: dict[str, Any] = {"image_bytes": png_bytes()}
    exec(LMMS_EVAL_USAGE, names)  # noqa: S102 - lmms-eval usage, as written

    assert names["available"] is True
    assert {body["model"] for body in server.requests} == {"gpt-4o-2024-11-20"}
    assert all(
        body["messages"][0] == {"role": "system", "content": "You are a strict grader of answers."}
        for body in server.requests
    )
    binary = names["binary"]
    assert binary["result"] == 1 and binary["success"] and binary["model"] == "gpt-4o-2024-11-20"
    assert {"raw_response", "prompt"} <= binary.keys()

    templated = names["templated"]
    assert templated["result"] == 0
    assert templated["prompt"].startswith("Subject: geography\nQuestion: ")

    assert names["rubric"]["scores"] == {"accuracy": 4, "completeness": 3}

    comparison = names["comparison"]["result"]
    assert comparison["winner"] == "B" and comparison["consistent"] is True
    assert names["comparison"]["scores"] == (2.0, 8.0)
    comparative_prompts = names["comparison"]["prompt"]
    assert all("The picture shows one red square." in prompt for prompt in comparative_prompts)

    assert [judged["result"] for judged in names["batch"]] == [1, 0]
    image_counts = []
    for body in server.requests:
        content = body["messages"][-1]["content"]
        if isinstance(content, list):
            image_counts.append(sum(part["type"] == "image_url" for part in content))
    assert sorted(image_counts) == [1, 2]
    assert server.request_count == 1 + 1 + 1 + 2 + 2  # binary, templated, rubric, 2 orders, batch


def test_sync_forms_work_inside_a_running_event_loop(lmms_eval_environment):
    async def notebook_cell():
        with Judge() as judge:
            return judge.evaluate_binary("What is 2 + 2?", "4", "4, of course")

    assert asyncio.run(notebook_cell())["result"] == 1


def test_lmms_eval_inputs_that_cannot_be_used_fail_before_any_call(lmms_eval_environment):
    server = lmms_eval_environment
    with Judge() as judge:
        with pytest.raises(InputError, match="differ in length"):
            judge.evaluate_comparative_batch(["q", "q"], ["a"], ["b", "c"])
        with pytest.raises(InputError, match="item_images or images_list"):
            judge.evaluate_binary_batch(["q"], ["a"], ["p"], item_images=[None], images_list=[None])
        with pytest.raises(InputError, match="custom_prompt that uses them"):
            judge.evaluate_binary("q", "a", "p", subject="geography")
        with pytest.raises(InputError, match=r"does not use the field \{subjet\}"):
            judge.evaluate_binary(
                "q", "a", "p", "0/1", "{question} {answer} {prediction}", subjet="x"
            )
        with pytest.raises(InputError, match="judge image 0"):
            judge.evaluate_binary("q", "a", "p", images=[b"not an image"])
    assert server.request_count == 0


def test_a_per_call_system_prompt_replaces_the_judges(lmms_eval_environment):
    server = lmms_eval_environment
    with Judge(system_prompt="judge-level") as judge:
        judge.evaluate_binary("q", "a", "a", system_prompt="call-level")
        judge.evaluate_binary("q", "b", "b")
    assert [body["messages"][0]["content"] for body in server.requests] == [
        "call-level",
        "judge-level",
    ]


def test_template_fields_keep_literal_braces_and_format_specs():
    template = 'Grade {level:>4} {{"json": 1}} {question} {answer} {prediction} {note!r}'
    filled = with_template_fields(template, {"level": "A", "note": "x}"})
    assert filled == "Grade    A {{\"json\": 1}} {question} {answer} {prediction} 'x}}'"
    assert filled.format(question="q", answer="a", prediction="p") == (
        "Grade    A {\"json\": 1} q a p 'x}'"
    )


def test_the_seeds_judge_defaults_are_a_switch_and_ours_are_stated(monkeypatch, caplog):
    """Seed 000's judge samples at temperature 0.7, top_p 0.95 with a 60 s timeout; ours
    differ (temperature 0, the endpoint's timeout): a judge from the seed's environment
    says so, and `seed_defaults=True` sends the seed's settings."""
    from llm_feedback.judges.config import JUDGE_PRESETS

    with FakeLLMServer() as server:
        monkeypatch.setenv("OPENAI_API_URL", f"{server.base_url}/chat/completions")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with caplog.at_level("INFO", logger="llm_feedback.judges.judge"), Judge() as ours:
            ours.evaluate_binary("What is 2 + 2?", "4", "4", "0/1")
        assert "our defaults differ from the seed's (temperature 0.7, top_p 0.95, 60 s" in (
            caplog.text
        )
        with Judge(seed_defaults=True) as seeds:
            assert seeds._client.config.timeout_s == JUDGE_PRESETS["lmms_eval"].timeout_s
            seeds.evaluate_binary("What is 3 + 3?", "6", "6", "0/1")
        with Judge(seed_defaults=True, sampling={"temperature": 0.2}) as mixed:
            mixed.evaluate_binary("What is 4 + 4?", "8", "8", "0/1")
    sent = [{key: body.get(key) for key in ("temperature", "top_p")} for body in server.requests]
    assert len(sent) == 3
    assert sent[0] == {"temperature": 0, "top_p": 1}
    assert sent[1] == JUDGE_PRESETS["lmms_eval"].sampling
    assert sent[2] == {"temperature": 0.2, "top_p": 0.95}
