"""The `pairwise` kind: which of two responses is better, judged in both orders (orders that
disagree make a tie), with a score for each; `eval_judgments` has one row per two models'
responses to the same instance and replicate.

Template `templates/pairwise.txt`: scores "Score A/B: N" and/or the verdict `[[A|B|C]]`
(C: tie), or their JSON. Fields: {question}, {response1}, {response2}, {reference} (the
reference answer, a block of its own) and {context} when given; {low}, {high}.

A second turn (an item with `prior_question`: MT-Bench's turn 2) is asked with
`templates/pairwise_multi_turn.txt`: both assistants' whole two-turn conversations, the
question naming the second answers as the ones judged. Fields: {question_1},
{answer_a_1}, {answer_b_1}, {question_2}, {answer_a_2}, {answer_b_2}, and {reference}
(the second turn's) when given; the reply formats are `pairwise.txt`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Reader, Reading
from llm_feedback.judges.kinds.spec import PAIRWISE, Asking, JudgeItem, JudgeKind, KindOptions
from llm_feedback.judges.reading import (
    NUMBER,
    ParseResult,
    as_number,
    check_range,
    in_range,
    is_blank,
    judges_own_text,
    lookup,
    strip_emphasis,
)
from llm_feedback.judges.requests import (
    JUDGE_SYSTEM_PROMPT,
    add_optional_blocks,
    check_score_range,
    check_text,
    fenced_values,
    json_reply_instruction,
    judge_request,
    object_reply_schema,
    render_prompt,
    with_optional_sections,
)
from llm_feedback.replies.extract import first_json_object
from llm_feedback.replies.status import AMBIGUOUS, EMPTY, NO_MATCH, OK, OUT_OF_RANGE, PARTIAL
from llm_feedback.templates import render

PAIRWISE_OUTPUTS = ("both", "scores", "verdict")
DEFAULT_SCALE = (1, 10)
MAX_TOKENS = 1024


def pairwise_reply_schema(score_range: tuple[int, int], output: str = "both") -> dict:
    """JSON schema for a pairwise reply; the verdict is "A", "B" or "C" (tie).

    Args:
        score_range: (low, high) of the scores.
        output: what the reply holds: "both", "scores" or "verdict".

    Returns:
        The schema.
    """
    if output not in PAIRWISE_OUTPUTS:
        raise ConfigError(f"output must be one of {PAIRWISE_OUTPUTS}, got {output!r}")
    low, high = check_score_range(score_range)
    score = {"type": "integer", "minimum": low, "maximum": high}
    properties: dict[str, Any] = {}
    if output in ("both", "scores"):
        properties |= {"score_a": dict(score), "score_b": dict(score)}
    if output in ("both", "verdict"):
        properties["verdict"] = {"type": "string", "enum": ["A", "B", "C"]}
    properties["explanation"] = {"type": "string"}
    return object_reply_schema(properties)


def build_pairwise_request(
    question: str,
    response_a: str,
    response_b: str,
    *,
    context: str | None = None,
    reference: str | None = None,
    score_range: tuple[int, int] = DEFAULT_SCALE,
    output: str = "both",
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    prior_question: str | None = None,
    prior_responses: tuple[str, str] | None = None,
    **sampling: Any,
) -> ChatRequest:
    """Ask which of two responses is better: scores "Score A/B: N" and/or `[[A|B|C]]`.

    Given `prior_question` and `prior_responses` (the first answers of A and B), the
    responses are the second turn of two conversations, shown whole.

    Args:
        question: the question.
        response_a: the response shown first.
        response_b: the response shown second.
        context: extra context for the judge (None: none).
        reference: a reference answer (None: none).
        score_range: (low, high) of the scores.
        output: "both", "scores" or "verdict".
        custom_prompt: a template in place of the built-in one.
        structured: ask for a JSON reply by schema.
        system: the system prompt (None: none).
        prior_question: the first turn's question (a second-turn comparison).
        prior_responses: the first answers of A and B.
        **sampling: decoding settings for the request.

    Returns:
        The request.
    """
    schema = pairwise_reply_schema(score_range, output)  # validates output and score_range
    low, high = check_score_range(score_range)
    check_text(question=question, response_a=response_a, response_b=response_b)
    if (prior_question is None) != (prior_responses is None):
        raise ConfigError("a second-turn comparison needs prior_question and prior_responses")
    if prior_question is not None:
        template = "pairwise_multi_turn"
        check_text(
            prior_question=prior_question,
            prior_response_a=prior_responses[0],
            prior_response_b=prior_responses[1],
        )
        values = {
            "question_1": prior_question,
            "answer_a_1": prior_responses[0],
            "answer_b_1": prior_responses[1],
            "question_2": question,
            "answer_a_2": response_a,
            "answer_b_2": response_b,
        }
        labels = {name: name.upper().replace("_", " ") for name in values}
    else:
        template = "pairwise"
        values = {"question": question, "response1": response_a, "response2": response_b}
        labels = {"question": "QUESTION", "response1": "RESPONSE A", "response2": "RESPONSE B"}
    if template == "pairwise_multi_turn" and context is not None:
        raise ConfigError("a second-turn comparison takes no context")
    given = add_optional_blocks(
        values,
        labels,
        (("reference", reference, "REFERENCE ANSWER"), ("context", context, "CONTEXT")),
    )
    required = tuple((name,) for name in values)
    fenced = {**fenced_values(values, labels, template), "low": str(low), "high": str(high)}
    if structured:
        reply = json_reply_instruction(
            render("pairwise", f"json_fields_{output}", low=low, high=high)
        )
    else:
        reply = render("pairwise", f"reply_{output}", low=low, high=high)
    user = render_prompt(
        custom_prompt,
        with_optional_sections(template, given),
        fenced,
        required,
        template,
        reply=reply,
    )
    return judge_request(user, system, MAX_TOKENS, schema if structured else None, sampling)


def build_pairwise_requests_both_orders(
    question: str, response_a: str, response_b: str, **options: Any
) -> tuple[ChatRequest, ChatRequest]:
    """The comparison in both positions (A first, then B first), to cancel position bias
    (the orders of `JudgeItem.both_orders`, as the `Judge` and the pipeline ask them).

    Combine the two parsed verdicts with `metrics.pairwise_outcome`.

    Args:
        question: the question.
        response_a: one response.
        response_b: the other.
        **options: `build_pairwise_request`'s keyword arguments.

    Returns:
        (A shown first, B shown first).
    """
    item = JudgeItem(question, response_a, other_response=response_b)
    first, second = (
        build_pairwise_request(question, order.response, order.other_response, **options)
        for order in item.both_orders()
    )
    return first, second


_VERDICT_MARK = re.compile(r"\[\[\s*(a|b|c|tie)\s*\]\]", re.IGNORECASE)
_VERDICTS = {"a": "A", "b": "B", "c": "tie", "tie": "tie"}
_SCORE_PAIR = re.compile(rf"\[\[\s*({NUMBER})\s*,\s*({NUMBER})\s*\]\]")


def _side_score_pattern(side: str) -> re.Pattern[str]:
    """Matches "Score A: 7", "Rating for Response A = 7", "Assistant A's score: 7/10"."""
    return re.compile(
        rf"(?:(?:score|rating)\s*(?:for\s+)?(?:(?:response|assistant|answer)\s*)?{side}\b"
        rf"|(?:response|assistant|answer)\s*{side}\b(?:'s)?\s*(?:score|rating)?)"
        rf"\s*[:=]?\s*({NUMBER})",
        re.IGNORECASE,
    )


_SIDE_SCORES = (_side_score_pattern("A"), _side_score_pattern("B"))


@dataclass(frozen=True, slots=True)
class PairwiseReply:
    """A pairwise judgment: verdict "A", "B", "tie" or None, and the two scores (or None)."""

    verdict: str | None
    scores: tuple[float | None, float | None]


def _verdict_from_json(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return _VERDICTS.get(value.strip(" []").lower())


def parse_pairwise(
    text: str | None, score_range: tuple[float, float] = DEFAULT_SCALE
) -> ParseResult[PairwiseReply]:
    """Verdict ("A", "B", "tie") and the scores of both responses from a pairwise reply.

    An explicit verdict (`[[A]]`, `[[B]]`, `[[C]]` for a tie, or JSON "verdict") wins;
    without one, two valid scores decide it. Contradicting verdict marks give "ambiguous".
    The value is always a `PairwiseReply`; status "ok" means a verdict was found.

    Args:
        text: the judge's reply (None: no reply).
        score_range: (low, high) of valid scores.

    Returns:
        The reply's verdict and scores, and the parse status.
    """
    low, high = score_range
    check_range(low, high)
    if is_blank(text):
        return ParseResult(PairwiseReply(None, (None, None)), EMPTY)
    text = judges_own_text(text)
    raw_scores: list[float | None] = [None, None]
    verdicts: set[str] = set()
    data = first_json_object(text)
    if data is not None:
        raw_scores = [as_number(lookup(data, "score_a")), as_number(lookup(data, "score_b"))]
        json_verdict = _verdict_from_json(lookup(data, "verdict", "winner"))
        if json_verdict is not None:
            verdicts.add(json_verdict)
    cleaned = strip_emphasis(text)
    if not verdicts:
        verdicts = {_VERDICTS[mark.lower()] for mark in _VERDICT_MARK.findall(cleaned)}
    pair = _SCORE_PAIR.findall(cleaned)
    for side, pattern in enumerate(_SIDE_SCORES):
        if raw_scores[side] is None:
            found = pattern.findall(cleaned)
            if found:
                raw_scores[side] = float(found[-1])
            elif pair:
                raw_scores[side] = float(pair[-1][side])
    scores = tuple(
        score if score is not None and in_range(score, low, high) else None for score in raw_scores
    )
    out_of_range = any(
        raw is not None and kept is None for raw, kept in zip(raw_scores, scores, strict=True)
    )
    if len(verdicts) > 1:
        return ParseResult(PairwiseReply(None, scores), AMBIGUOUS)
    verdict = verdicts.pop() if verdicts else None
    if verdict is None and None not in scores:
        verdict = "A" if scores[0] > scores[1] else "B" if scores[1] > scores[0] else "tie"
    if verdict is not None:
        status = OK
    elif out_of_range:
        status = OUT_OF_RANGE
    else:
        status = PARTIAL if any(score is not None for score in scores) else NO_MATCH
    return ParseResult(PairwiseReply(verdict, scores), status)


def pairwise_reader(scale: tuple[int, int]) -> Reader:
    """{"verdict", "scores": [first shown, second shown]}; usable with a verdict.

    Args:
        scale: (low, high) of the scores.

    Returns:
        The reader.
    """

    def read(text: str | None) -> Reading:
        parsed = parse_pairwise(text, scale)
        reply = parsed.value
        value = {"verdict": reply.verdict, "scores": list(reply.scores)}
        return Reading(value, parsed.status, reply.verdict is not None)

    return read


def _options(item: JudgeItem, options: KindOptions, asking: Asking) -> dict[str, Any]:
    second_turn = item.is_second_turn
    return {
        "prior_question": item.prior_question,
        "prior_responses": (item.prior_response, item.other_prior_response)
        if second_turn
        else None,
        "context": item.context,
        "reference": item.reference,
        "score_range": options.scale,
        "custom_prompt": item.custom_prompt,
        "structured": asking.structured,
        **asking.sampling,
    }


def ask(item: JudgeItem, options: KindOptions, asking: Asking) -> tuple[ChatRequest, Reader]:
    """One order: `item.response` shown first, `item.other_response` second.

    Args:
        item: what the judgment is about.
        options: the kind's settings.
        asking: structured replies and sampling overrides.

    Returns:
        (the request, the reader).
    """
    request = build_pairwise_request(
        item.question, item.response, item.other_response, **_options(item, options, asking)
    )
    return request, pairwise_reader(options.scale)


def columns(judgment: Any, options: KindOptions) -> list[dict[str, Any]]:
    """A comparison's columns (a `PairJudgment`; None: no comparison was made).

    Args:
        judgment: the comparison, or None.
        options: the kind's settings.

    Returns:
        One row's columns.
    """
    if judgment is None:
        return [{}]
    return [
        {
            "verdict_a_first": judgment.verdicts[0],
            "verdict_b_first": judgment.verdicts[1] if len(judgment.verdicts) > 1 else None,
            "outcome": judgment.winner,
            "consistent": judgment.consistent,
            "score_a": judgment.scores[0],
            "score_b": judgment.scores[1],
        }
    ]


def panel_columns(panel: pd.DataFrame, judges: list[pd.DataFrame]) -> None:
    """Scores are averaged over the judges; the panel is position-inconsistent if one judge
    was, consistent if all were, else unknown.

    Args:
        panel: the panel's combined rows, filled in place.
        judges: each judge's rows.
    """
    for column in ("score_a", "score_b"):
        panel[column] = pd.concat([frame[column] for frame in judges], axis=1).mean(axis=1)
    known = [frame["consistent"].astype(object) for frame in judges]
    rows = zip(*(series.where(series.notna(), None).tolist() for series in known), strict=True)
    panel["consistent"] = [False if False in row else True if all(row) else None for row in rows]


KIND = JudgeKind(
    name="pairwise",
    ask=ask,
    template="pairwise",
    default_scale=DEFAULT_SCALE,
    columns=columns,
    fixed_scale=False,
    categorical=True,
    family=PAIRWISE,
    two_turn=True,
    judge_own_columns=("verdict_a_first", "verdict_b_first"),
    panel_columns=panel_columns,
    logprob_labels=lambda options: ("A", "B", "C"),
)
