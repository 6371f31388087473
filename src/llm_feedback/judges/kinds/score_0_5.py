"""The `score_0_5` kind: a 0-5 rating of a prediction against the reference answer.

Template `templates/score_0_5.txt` ("Rating: N" or the JSON {"rating", "explanation"});
fields as `binary`'s: {question}, {reference} (synonym {answer}), {prediction}. A row
without a usable reference is invalid, with no call.
"""

from __future__ import annotations

from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.engine import Reader, Reading
from llm_feedback.judges.kinds.spec import (
    Asking,
    JudgeItem,
    JudgeKind,
    KindOptions,
    scale_labels,
)
from llm_feedback.judges.reading import parse_rating, value_reading
from llm_feedback.judges.requests import (
    JUDGE_SYSTEM_PROMPT,
    REFERENCE_REQUIRED,
    judge_request,
    rating_json_reply,
    rating_reply_schema,
    reference_values,
    render_prompt,
)
from llm_feedback.templates import load_template, render

SCALE = (0, 5)
MAX_TOKENS = 256


def build_score_0_5_request(
    question: str,
    reference: str,
    prediction: str,
    *,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask for a 0-5 rating of `prediction` against `reference` ("Rating: N")."""
    values = reference_values(question, reference, prediction, "score_0_5", "CANDIDATE ANSWER")
    user = render_prompt(
        custom_prompt,
        load_template("score_0_5"),
        values,
        REFERENCE_REQUIRED,
        "0-5 rating",
        reply=rating_json_reply(*SCALE) if structured else render("score_0_5", "reply"),
    )
    schema = rating_reply_schema(*SCALE) if structured else None
    return judge_request(user, system, MAX_TOKENS, schema, sampling)


def read_rating(text: str | None) -> Reading:
    return value_reading(parse_rating(text, *SCALE))


def ask(item: JudgeItem, options: KindOptions, asking: Asking) -> tuple[ChatRequest, Reader]:
    request = build_score_0_5_request(
        item.question,
        item.reference,
        item.response,
        custom_prompt=item.custom_prompt,
        structured=asking.structured,
        **asking.sampling,
    )
    return request, read_rating


KIND = JudgeKind(
    name="score_0_5",
    ask=ask,
    template="score_0_5",
    default_scale=SCALE,
    needs_reference=True,
    recorded_scores=True,
    logprob_labels=scale_labels,
)
