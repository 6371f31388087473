"""The `binary` kind: is a prediction correct, given the reference answer? 1, 0 or None.

Template `templates/binary.txt` ("0/1" or "yes/no" reply) or, with the "graded" reply
format, `templates/reference_grading.txt` (extracted_final_answer / reasoning /
correct yes|no / confidence lines, the details kept in their own columns). A response that
equals the reference after normalisation is a pass without a call; an unknown reference
leaves nothing to judge against. Template fields: {question}, {reference} (synonym
{answer}: the gold answer), {prediction} (the answer being judged).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import pandas as pd

from llm_feedback.backends.contract import ChatRequest
from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Reader
from llm_feedback.judges.kinds.grading import (
    GRADING_DETAILS,
    build_reference_grading_request,
    read_graded,
)
from llm_feedback.judges.kinds.spec import Asking, JudgeItem, JudgeKind, KindOptions
from llm_feedback.judges.reading import (
    EDGE_PUNCTUATION,
    VERDICT_TOKENS,
    ParseResult,
    is_blank,
    judges_own_text,
    lookup,
    strip_emphasis,
    value_reading,
)
from llm_feedback.judges.requests import (
    JUDGE_SYSTEM_PROMPT,
    REFERENCE_REQUIRED,
    json_reply_instruction,
    judge_request,
    object_reply_schema,
    reference_values,
    render_prompt,
)
from llm_feedback.replies.extract import first_json_object
from llm_feedback.replies.status import AMBIGUOUS, EMPTY, NO_MATCH, OK
from llm_feedback.templates import load_template, render

BINARY_OUTPUT_FORMATS = ("0/1", "yes/no")
# "graded" asks for extracted answer / reasoning / correct yes|no / confidence lines.
BINARY_FORMATS = (*BINARY_OUTPUT_FORMATS, "graded")
MAX_TOKENS = 32

_REPLY_PARTS = {"0/1": "0_1", "yes/no": "yes_no"}
_REPLY_SCHEMAS = {
    "0/1": object_reply_schema({"correct": {"type": "integer", "enum": [0, 1]}}),
    "yes/no": object_reply_schema({"correct": {"type": "string", "enum": ["yes", "no"]}}),
}


def build_binary_request(
    question: str,
    reference: str,
    prediction: str,
    *,
    output_format: str = "0/1",
    custom_prompt: str | None = None,
    structured: bool = False,
    system: str | None = JUDGE_SYSTEM_PROMPT,
    **sampling: Any,
) -> ChatRequest:
    """Ask whether `prediction` is correct given `reference`: "0/1" or "yes/no" reply.

    Args:
        question: the question.
        reference: the reference answer.
        prediction: the response judged.
        output_format: "0/1" or "yes/no".
        custom_prompt: a template in place of the built-in one.
        structured: ask for a JSON reply by schema.
        system: the system prompt (None: none).
        **sampling: decoding settings for the request.

    Returns:
        The request.
    """
    if output_format not in BINARY_OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {BINARY_OUTPUT_FORMATS}, got {output_format!r}"
        )
    values = reference_values(question, reference, prediction, "binary", "CANDIDATE ANSWER")
    part = _REPLY_PARTS[output_format]
    reply = (
        json_reply_instruction(render("binary", f"json_fields_{part}"))
        if structured
        else render("binary", f"reply_{part}")
    )
    user = render_prompt(
        custom_prompt, load_template("binary"), values, REFERENCE_REQUIRED, "binary", reply=reply
    )
    schema = _REPLY_SCHEMAS[output_format] if structured else None
    return judge_request(user, system, MAX_TOKENS, schema, sampling)


_TOKEN = r"(?P<token>yes|no|true|false|incorrect|correct|[01])\b(?![.,]?\d)"
_BINARY_LABEL = re.compile(
    r"\b(?:final answer|answer|verdict|judge?ment|decision|output|result|grade|label|score"
    r"|correctness|correct|is (?:the )?(?:prediction|candidate)(?: answer)? correct\??)"
    rf"\s*(?:is|:|=|-)?\s*{_TOKEN}"
)
_LEADING_WORD = re.compile(r"(?P<token>yes|no|incorrect|correct)\b")
# "not correct", "isn't quite right": negations must be read before the plain words.
_NEGATED_CORRECT = re.compile(
    r"\b(?:not|isn't|is not|aren't|wasn't|never)\s+(?:\w+\s+)?(?:correct|right|accurate)\b"
)
_NEGATIVE_WORD = re.compile(r"\b(?:incorrect|wrong|inaccurate)\b")
_POSITIVE_WORD = re.compile(r"\bcorrect\b")  # \b keeps "incorrect" out
_LONE_DIGIT = re.compile(r"(?<![\w.,/])[01](?![\w/]|[.,]\d)")
_LONE_YES_NO = re.compile(r"\b(?:yes|no)\b")


def _binary_from_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str):
        return VERDICT_TOKENS.get(value.strip(EDGE_PUNCTUATION).lower())
    return None


def _single_value(values: Iterable[int]) -> ParseResult[int]:
    distinct = set(values)
    if len(distinct) == 1:
        return ParseResult(distinct.pop(), OK)
    return ParseResult(None, AMBIGUOUS if distinct else NO_MATCH)


def parse_binary(text: str | None, output_format: str = "0/1") -> ParseResult[int]:
    """1 (correct) / 0 (incorrect) from a binary judge reply, in either wording.

    Tried in order: a JSON {"correct": ...}; the whole reply, its first or its last line
    being a lone token ("1", "Yes.", "**No**"); the last labelled verdict ("Answer: yes");
    a leading yes/no word; correctness words ("not correct" and "incorrect" count as 0);
    and finally the lone tokens of `output_format` if they all agree.

    Args:
        text: the judge's reply (None: no reply).
        output_format: the wording asked for.

    Returns:
        1 or 0 and the parse status.
    """
    if output_format not in BINARY_OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {BINARY_OUTPUT_FORMATS}, got {output_format!r}"
        )
    if is_blank(text):
        return ParseResult(None, EMPTY)
    text = judges_own_text(text)
    data = first_json_object(text)
    if data is not None:
        value = _binary_from_value(lookup(data, "correct", "answer", "verdict"))
        if value is not None:
            return ParseResult(value, OK)
    cleaned = unicodedata.normalize("NFKC", strip_emphasis(text)).lower().strip()
    explicit = _explicit_binary(cleaned)
    if explicit is not None:
        return ParseResult(explicit, OK)
    return _implicit_binary(cleaned, output_format)


def _explicit_binary(cleaned: str) -> int | None:
    """A verdict the reply states outright: a lone token, a labelled or a leading one."""
    lines = [line.strip(EDGE_PUNCTUATION) for line in cleaned.splitlines()]
    lines = [line for line in lines if line]
    for candidate in (cleaned.strip(EDGE_PUNCTUATION), *lines[:1], *lines[-1:]):
        if candidate in VERDICT_TOKENS:
            return VERDICT_TOKENS[candidate]
    labelled = list(_BINARY_LABEL.finditer(cleaned))
    if labelled:
        return VERDICT_TOKENS[labelled[-1].group("token")]
    leading = _LEADING_WORD.match(cleaned)
    return VERDICT_TOKENS[leading.group("token")] if leading else None


def _implicit_binary(cleaned: str, output_format: str) -> ParseResult[int]:
    """A verdict read from correctness words in prose, else from agreeing lone tokens."""
    negated = _NEGATED_CORRECT.findall(cleaned) + _NEGATIVE_WORD.findall(cleaned)
    positive = _POSITIVE_WORD.findall(_NEGATED_CORRECT.sub(" ", cleaned))
    if negated or positive:
        return _single_value([0] * bool(negated) + [1] * bool(positive))
    lone = _LONE_DIGIT if output_format == "0/1" else _LONE_YES_NO
    return _single_value(VERDICT_TOKENS[token] for token in lone.findall(cleaned))


def binary_reader(output_format: str) -> Reader:
    """The reader of a binary reply in `output_format`.

    Args:
        output_format: "0/1", "yes/no" or "graded".

    Returns:
        The reader.
    """
    if output_format == "graded":
        return read_graded
    return lambda text: value_reading(parse_binary(text, output_format))


def ask(item: JudgeItem, options: KindOptions, asking: Asking) -> tuple[ChatRequest, Reader]:
    """The request for one item and the reader of its reply (the kind's `ask`).

    Args:
        item: what the judgment is about.
        options: the kind's settings.
        asking: structured replies and sampling overrides.

    Returns:
        (the request, the reader).
    """
    output_format = options.reply_format or "0/1"
    if output_format not in BINARY_FORMATS:
        raise ConfigError(f"output_format must be one of {BINARY_FORMATS}, got {output_format!r}")
    settings = {"custom_prompt": item.custom_prompt, "structured": asking.structured}
    if output_format == "graded":
        request = build_reference_grading_request(
            item.question, item.reference, item.response, **settings, **asking.sampling
        )
    else:
        request = build_binary_request(
            item.question,
            item.reference,
            item.response,
            output_format=output_format,
            **settings,
            **asking.sampling,
        )
    return request, binary_reader(output_format)


def columns(judgment: Any, options: KindOptions) -> list[dict[str, Any]]:
    """The kind's columns of one judgment row: score, correct and the grading details.

    Args:
        judgment: the judgment.
        options: the kind's settings.

    Returns:
        One row's columns.
    """
    value = judgment.value
    details = {name: judgment.details.get(name) for name in GRADING_DETAILS}
    return [{"score": value, "correct": None if value is None else bool(value), **details}]


def panel_columns(panel: pd.DataFrame, judges: list[pd.DataFrame]) -> None:
    """The panel's verdict decides its `correct`.

    Args:
        panel: the panel's combined rows, filled in place.
        judges: each judge's rows.
    """
    panel["correct"] = panel["score"].map(lambda score: None if pd.isna(score) else bool(score))


KIND = JudgeKind(
    name="binary",
    ask=ask,
    template="binary",
    default_scale=(0, 1),
    columns=columns,
    needs_reference=True,
    categorical=True,
    passing_score=1.0,
    recorded_scores=True,
    exact_match=True,
    reply_formats=BINARY_FORMATS,
    judge_own_columns=GRADING_DETAILS,
    panel_columns=panel_columns,
)
