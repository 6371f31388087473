"""The `rubric` kind: an integer score per criterion of a rubric ({name: description}), as
JSON with a short justification; one row of `eval_judgments` per criterion.

Template `templates/rubric.txt`. Fields: {question}, {response} (synonym {prediction}),
{criteria} (rendered as "- name: description" lines), {reference} and {context} when
given; {low}, {high}. Any other scale of a single grade is asked as a one-criterion rubric
(`overall_ask`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Reader, Reading
from llm_feedback.judges.kinds.spec import Asking, JudgeItem, JudgeKind, KindOptions
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
from llm_feedback.replies.status import EMPTY, NO_MATCH, OK, OUT_OF_RANGE, PARTIAL
from llm_feedback.templates import render

DEFAULT_SCALE = (1, 5)
MAX_TOKENS = 512
OVERALL_CRITERION = "overall"
_OVERALL = "how well the response answers the question: correct, helpful, relevant, complete"
_OVERALL_WITH_REFERENCE = (
    "how well the response answers the question, judged above all by its agreement with the "
    "reference answer"
)


def check_criteria(criteria: Mapping[str, str]) -> None:
    """Raise ConfigError unless `criteria` maps non-empty names to text descriptions.

    Args:
        criteria: criterion name -> description.
    """
    if not isinstance(criteria, Mapping) or not criteria:
        raise ConfigError("criteria must be a non-empty mapping {name: description}")
    for name, description in criteria.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"criterion names must be non-empty strings, got {name!r}")
        if not isinstance(description, str):
            raise ConfigError(f"criterion {name!r} needs a string description")


def rubric_reply_schema(criteria: Mapping[str, str], score_range: tuple[int, int]) -> dict:
    """JSON schema for a rubric reply: {"scores": {criterion: int}, "justification": str}.

    Scores come before the justification so that a reply cut short still has them.

    Args:
        criteria: criterion name -> description.
        score_range: (low, high) of the scores.

    Returns:
        The schema.
    """
    check_criteria(criteria)
    low, high = check_score_range(score_range)
    score = {"type": "integer", "minimum": low, "maximum": high}
    return object_reply_schema(
        {
            "scores": object_reply_schema({name: dict(score) for name in criteria}),
            "justification": {"type": "string"},
        }
    )


def build_rubric_request(
    question: str,
    response: str,
    criteria: Mapping[str, str],
    *,
    score_range: tuple[int, int] = DEFAULT_SCALE,
    reference: str | None = None,
    context: str | None = None,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask for an integer score per criterion as JSON, plus a short justification.

    Args:
        question: the question.
        response: the response graded.
        criteria: criterion name -> description.
        score_range: (low, high) of the scores.
        reference: a reference answer (None: none).
        context: extra context for the judge (None: none).
        custom_prompt: a template in place of the built-in one.
        structured: ask for a JSON reply by schema.
        system: the system prompt (None: none).
        **sampling: decoding settings for the request.

    Returns:
        The request.
    """
    check_criteria(criteria)
    low, high = check_score_range(score_range)
    check_text(question=question, response=response)
    values = {"question": question, "response": response, "prediction": response}
    labels = {"question": "QUESTION", "response": "RESPONSE", "prediction": "RESPONSE"}
    required: tuple[tuple[str, ...], ...] = (
        ("question",),
        ("response", "prediction"),
        ("criteria",),
    )
    given = add_optional_blocks(
        values,
        labels,
        (("context", context, "CONTEXT"), ("reference", reference, "REFERENCE ANSWER")),
    )
    required += tuple((name,) for name in given)
    criteria_text = "\n".join(
        render("rubric", "criterion", name=name, description=description)
        for name, description in criteria.items()
    )
    fenced = {
        **fenced_values(values, labels, "rubric"),
        "criteria": criteria_text,
        "low": str(low),
        "high": str(high),
    }
    scores = ", ".join(render("rubric", "json_score", name=json.dumps(name)) for name in criteria)
    user = render_prompt(
        custom_prompt,
        with_optional_sections("rubric", given),
        fenced,
        required,
        "rubric",
        reply=json_reply_instruction(render("rubric", "json_fields", scores=scores)),
    )
    schema = rubric_reply_schema(criteria, (low, high)) if structured else None
    return judge_request(user, system, MAX_TOKENS, schema, sampling)


def _integer_score(value: Any) -> int | None:
    if isinstance(value, Mapping):  # {"clarity": {"score": 4, "reason": "..."}}
        value = lookup(value, "score", "rating")
    number = as_number(value)
    if number is None or not number.is_integer():
        return None
    return int(number)


def parse_rubric_scores(
    text: str | None,
    criteria: Mapping[str, str] | Sequence[str],
    score_range: tuple[int, int],
) -> ParseResult[dict[str, int | None]]:
    """Integer scores per criterion from a JSON reply (fenced, in prose or cut short).

    Criteria missing from the JSON are looked for as "name: N" in the text. The value
    always has every criterion, None where missing, non-integer or out of range. Status:
    "ok" (all scored), "partial", "out_of_range" (none valid, some out of range), "no_match".

    Args:
        text: the judge's reply (None: no reply).
        criteria: the criteria (names, or name -> description).
        score_range: (low, high) of valid scores.

    Returns:
        The scores and the parse status.
    """
    low, high = score_range
    check_range(low, high)
    names = list(criteria)
    scores: dict[str, int | None] = dict.fromkeys(names)
    if is_blank(text):
        return ParseResult(scores, EMPTY)
    text = judges_own_text(text)
    data = first_json_object(text) or {}
    nested = lookup(data, "scores")
    found = nested if isinstance(nested, Mapping) else data
    saw_out_of_range = False
    for name in names:
        raw = lookup(found, name)
        if raw is None:
            pattern = rf"[\"']?{re.escape(name)}[\"']?\s*[:=]\s*[\"']?({NUMBER})(?![\d.])"
            match = re.search(pattern, strip_emphasis(text), re.IGNORECASE)
            raw = match.group(1) if match else None
        score = _integer_score(raw)
        if score is not None and not in_range(score, low, high):
            saw_out_of_range, score = True, None
        scores[name] = score
    valid = sum(score is not None for score in scores.values())
    if valid == len(names):
        status = OK
    elif valid:
        status = PARTIAL
    else:
        status = OUT_OF_RANGE if saw_out_of_range else NO_MATCH
    return ParseResult(scores, status)


def rubric_reader(criteria: Mapping[str, str], scale: tuple[int, int]) -> Reader:
    """The reader of a rubric reply.

    Args:
        criteria: criterion name -> description.
        scale: (low, high) of the scores.

    Returns:
        The reader.
    """

    def read(text: str | None) -> Reading:
        parsed = parse_rubric_scores(text, criteria, scale)
        return Reading(parsed.value, parsed.status, parsed.status == OK)

    return read


def ask(item: JudgeItem, options: KindOptions, asking: Asking) -> tuple[ChatRequest, Reader]:
    """The request for one item and the reader of its reply (the kind's `ask`).

    Args:
        item: what the judgment is about.
        options: the kind's settings.
        asking: structured replies and sampling overrides.

    Returns:
        (the request, the reader).
    """
    request = build_rubric_request(
        item.question,
        item.response,
        options.criteria,
        score_range=options.scale,
        reference=item.reference,
        context=item.context,
        custom_prompt=item.custom_prompt,
        structured=asking.structured,
        **asking.sampling,
    )
    return request, rubric_reader(options.criteria, options.scale)


def overall_ask(
    item: JudgeItem, options: KindOptions, asking: Asking
) -> tuple[ChatRequest, Reader]:
    """One grade on any scale, asked as the rubric of one criterion ("overall").

    Args:
        item: what the judgment is about.
        options: the kind's settings.
        asking: structured replies and sampling overrides.

    Returns:
        (the request, the reader).
    """
    description = _OVERALL if item.reference is None else _OVERALL_WITH_REFERENCE
    criteria = {OVERALL_CRITERION: description}
    request, read_scores = ask(item, KindOptions(options.scale, criteria), asking)

    def read(text: str | None) -> Reading:
        reading = read_scores(text)
        return Reading(reading.value[OVERALL_CRITERION], reading.status, reading.ok)

    return request, read


def columns(judgment: Any, options: KindOptions) -> list[dict[str, Any]]:
    """One row per criterion; a call that read some criteria only succeeds on those.

    Args:
        judgment: the judgment.
        options: the kind's settings.

    Returns:
        One row per criterion.
    """
    scores = judgment.value or dict.fromkeys(options.criteria)
    if judgment.value is None:
        return [{"criterion": name, "score": None} for name in scores]
    return [
        {"criterion": name, "score": score, "success": score is not None}
        for name, score in scores.items()
    ]


KIND = JudgeKind(
    name="rubric",
    ask=ask,
    template="rubric",
    default_scale=DEFAULT_SCALE,
    columns=columns,
    fixed_scale=False,
    uses_criteria=True,
)
