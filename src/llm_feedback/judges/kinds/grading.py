"""Reference grading, the "graded" reply format of the `binary` kind: the judge writes the
response's extracted final answer, its reasoning, `correct: yes|no` and the confidence the
response states (100% when it states none), which calibration metrics need.

Template `templates/reference_grading.txt`, with the fields of `binary`.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.engine import Reading
from llm_feedback.judges.reading import (
    EDGE_PUNCTUATION,
    NUMBER,
    VERDICT_TOKENS,
    ParseResult,
    in_range,
    is_blank,
    judges_own_text,
    lookup,
    loose_key,
    strip_emphasis,
)
from llm_feedback.judges.requests import (
    JUDGE_SYSTEM_PROMPT,
    REFERENCE_REQUIRED,
    judge_request,
    object_reply_schema,
    reference_values,
    render_prompt,
)
from llm_feedback.replies.extract import first_json_object
from llm_feedback.replies.status import EMPTY, NO_MATCH, OK, PARTIAL
from llm_feedback.templates import load_template, render

MAX_TOKENS = 512
# What a graded reply says besides its verdict: columns of eval_judgments.
GRADING_DETAILS = ("extracted_final_answer", "reasoning", "confidence")
_FIELDS = ("extracted_final_answer", "reasoning", "correct", "confidence")

REFERENCE_GRADING_REPLY_SCHEMA = object_reply_schema(
    {
        "extracted_final_answer": {"type": "string"},
        "reasoning": {"type": "string"},
        "correct": {"type": "string", "enum": ["yes", "no"]},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    }
)


class ReferenceGrading(TypedDict):
    extracted_final_answer: str | None
    reasoning: str | None
    correct: bool | None
    confidence: float | None


def build_reference_grading_request(
    question: str,
    reference: str,
    prediction: str,
    *,
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask for `extracted_final_answer`, `reasoning`, `correct: yes|no`, `confidence: N%`.

    Args:
        question: the question.
        reference: the reference answer.
        prediction: the response graded.
        custom_prompt: a template in place of the built-in one.
        structured: ask for a JSON reply by schema.
        system: the system prompt (None: none).
        **sampling: decoding settings for the request.

    Returns:
        The request.
    """
    values = reference_values(question, reference, prediction, "reference_grading", "RESPONSE")
    user = render_prompt(
        custom_prompt,
        load_template("reference_grading"),
        values,
        REFERENCE_REQUIRED,
        "reference grading",
        reply_lead=render("reference_grading", "json_reply_lead" if structured else "reply_lead"),
    )
    schema = REFERENCE_GRADING_REPLY_SCHEMA if structured else None
    return judge_request(user, system, MAX_TOKENS, schema, sampling)


_LABEL = re.compile(
    r"^[ \t>#*_-]*(?P<label>extracted[ _]final[ _]answer|reasoning|correct|confidence)"
    r"[ \t*_]*:[ \t*_]*",
    re.IGNORECASE | re.MULTILINE,
)
_VERDICT_WORD = re.compile(r"(yes|no|true|false|incorrect|correct)\b")
_CONFIDENCE = re.compile(rf"({NUMBER})\s*(%)?")


def _verdict_from_value(value: Any) -> bool | None:
    if isinstance(value, bool | int | float):
        return bool(value) if value in (0, 1) else None
    if not isinstance(value, str):
        return None
    match = _VERDICT_WORD.match(strip_emphasis(value).strip(EDGE_PUNCTUATION).lower())
    return None if match is None else bool(VERDICT_TOKENS[match.group(1)])


def _confidence_from_value(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number, has_percent = float(value), True
    elif isinstance(value, str):
        match = _CONFIDENCE.search(value)
        if match is None:
            return None
        number, has_percent = float(match.group(1)), match.group(2) is not None
    else:
        return None
    # "0.85" without a percent sign is a fraction; "85" and "1%" are percentages.
    if not has_percent and 0 < number < 1:
        number *= 100
    return number if in_range(number, 0, 100) else None


def _text_field(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    cleaned = value.strip().strip("*_").strip()
    # The prompt asks for "None" when the response gives no final answer.
    return None if not cleaned or cleaned.lower() == "none" else cleaned


def parse_reference_grading(text: str | None) -> ParseResult[ReferenceGrading]:
    """The `extracted_final_answer / reasoning / correct / confidence` lines of a reply.

    The value is always a full record (missing fields are None). Status: "ok" with all four
    fields, "partial" when `correct` was read but another field was not, "no_match" when
    `correct` could not be read (the record may still hold the other fields).

    Args:
        text: the judge's reply (None: no reply).

    Returns:
        The record and its parse status.
    """
    if is_blank(text):
        return ParseResult(ReferenceGrading(**dict.fromkeys(_FIELDS)), EMPTY)
    text = judges_own_text(text)
    data = first_json_object(text) or {}
    from_json = {name: lookup(data, name) for name in _FIELDS}
    # Each field runs from its label to the next label, so reasoning may span lines.
    from_lines: dict[str, str] = {}
    labels = list(_LABEL.finditer(text))
    for index, match in enumerate(labels):
        end = labels[index + 1].start() if index + 1 < len(labels) else len(text)
        from_lines.setdefault(loose_key(match.group("label")), text[match.end() : end])
    raw = {
        name: from_json[name] if from_json[name] is not None else from_lines.get(name)
        for name in _FIELDS
    }
    record = ReferenceGrading(
        extracted_final_answer=_text_field(raw["extracted_final_answer"]),
        reasoning=_text_field(raw["reasoning"]),
        correct=_verdict_from_value(raw["correct"]),
        confidence=_confidence_from_value(raw["confidence"]),
    )
    if record["correct"] is None:
        status = NO_MATCH
    elif all(value is not None for value in record.values()):
        status = OK
    else:
        status = PARTIAL
    return ParseResult(record, status)


def read_graded(text: str | None) -> Reading:
    """The verdict (1/0) as the value; the other fields as the reading's details.

    Args:
        text: the judge's reply (None: no reply).

    Returns:
        The reading.
    """
    parsed = parse_reference_grading(text)
    record = parsed.value
    correct = None if record["correct"] is None else int(record["correct"])
    details = {name: record[name] for name in GRADING_DETAILS}
    return Reading(correct, parsed.status, correct is not None, details=details)
