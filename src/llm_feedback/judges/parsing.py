"""Parsers for judge replies, and the exact-match short-cut that avoids a judge call.

A parser never raises on the reply text: it returns a `ParseResult` whose `value` is the
parsed value (None when nothing usable was found) and whose `status` says why, so that a
malformed reply is stored as null with its status instead of crashing a run or being
counted silently. Every parser also reads the JSON object a structured-output request
(`structured=True` in `prompts`) asks for.

Statuses are those of `llm_feedback.replies.status`: "ok"; "partial" (a record parser
found some fields only); "empty" (no text); "no_match" (no value found); "out_of_range" (a
value outside the scale); "ambiguous" (contradicting values, none chosen).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, TypedDict, TypeVar

import numpy as np
import pandas as pd

from llm_feedback.errors import ConfigError
from llm_feedback.replies.extract import first_json_object
from llm_feedback.replies.fencing import unquoted_lines
from llm_feedback.replies.status import AMBIGUOUS, EMPTY, NO_MATCH, OK, OUT_OF_RANGE, PARTIAL

BINARY_OUTPUT_FORMATS = ("0/1", "yes/no")


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ParseResult(Generic[T]):
    """A parsed value (None when unusable) and the status that explains it."""

    value: T | None
    status: str


class ReferenceGrading(TypedDict):
    extracted_final_answer: str | None
    reasoning: str | None
    correct: bool | None
    confidence: float | None


@dataclass(frozen=True, slots=True)
class PairwiseReply:
    """A pairwise judgment: verdict "A", "B", "tie" or None, and the two scores (or None)."""

    verdict: str | None
    scores: tuple[float | None, float | None]


_NUMBER = r"-?\d+(?:\.\d+)?"


def _judges_own_text(text: str) -> str:
    """The judge's own lines: material it echoed (marker blocks) and quoted lines ("> ")
    dropped, so a score written inside the judged text never counts as the judge's."""
    return "\n".join(unquoted_lines(text))


def _is_blank(text: object) -> bool:
    return not isinstance(text, str) or not text.strip()


def _strip_emphasis(text: str) -> str:
    """Drop markdown emphasis and code marks, which judges sprinkle around their verdicts."""
    return text.replace("*", "").replace("`", "")


def _key(name: str) -> str:
    """Loose key for matching names: case, spaces, dashes and underscores do not matter."""
    return re.sub(r"[\W_]+", "_", str(name).lower()).strip("_")


def _lookup(data: Mapping[str, Any], *names: str) -> Any:
    loose = {_key(key): value for key, value in data.items()}
    for name in names:
        if _key(name) in loose:
            return loose[_key(name)]
    return None


def _as_number(value: Any) -> float | None:
    """A number from a JSON value: int, float or numeric string; bools are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = re.fullmatch(rf"\s*({_NUMBER})\s*(?:/\s*\d+)?\s*", value)
        return float(match.group(1)) if match else None
    return None


def _in_range(value: float, low: float, high: float) -> bool:
    return low <= value <= high


# --- binary -------------------------------------------------------------------------

_BINARY_TOKENS = {
    "1": 1,
    "0": 0,
    "yes": 1,
    "no": 0,
    "true": 1,
    "false": 0,
    "correct": 1,
    "incorrect": 0,
}
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
_EDGE_PUNCTUATION = " \t.!?\"'()[]:;,"


def _binary_from_value(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str):
        return _BINARY_TOKENS.get(value.strip(_EDGE_PUNCTUATION).lower())
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
    """
    if output_format not in BINARY_OUTPUT_FORMATS:
        raise ConfigError(
            f"output_format must be one of {BINARY_OUTPUT_FORMATS}, got {output_format!r}"
        )
    if _is_blank(text):
        return ParseResult(None, EMPTY)
    text = _judges_own_text(text)
    data = first_json_object(text)
    if data is not None:
        value = _binary_from_value(_lookup(data, "correct", "answer", "verdict"))
        if value is not None:
            return ParseResult(value, OK)
    cleaned = unicodedata.normalize("NFKC", _strip_emphasis(text)).lower().strip()
    explicit = _explicit_binary(cleaned)
    if explicit is not None:
        return ParseResult(explicit, OK)
    return _implicit_binary(cleaned, output_format)


def _explicit_binary(cleaned: str) -> int | None:
    """A verdict the reply states outright: a lone token, a labelled or a leading one."""
    lines = [line.strip(_EDGE_PUNCTUATION) for line in cleaned.splitlines()]
    lines = [line for line in lines if line]
    for candidate in (cleaned.strip(_EDGE_PUNCTUATION), *lines[:1], *lines[-1:]):
        if candidate in _BINARY_TOKENS:
            return _BINARY_TOKENS[candidate]
    labelled = list(_BINARY_LABEL.finditer(cleaned))
    if labelled:
        return _BINARY_TOKENS[labelled[-1].group("token")]
    leading = _LEADING_WORD.match(cleaned)
    return _BINARY_TOKENS[leading.group("token")] if leading else None


def _implicit_binary(cleaned: str, output_format: str) -> ParseResult[int]:
    """A verdict read from correctness words in prose, else from agreeing lone tokens."""
    negated = _NEGATED_CORRECT.findall(cleaned) + _NEGATIVE_WORD.findall(cleaned)
    positive = _POSITIVE_WORD.findall(_NEGATED_CORRECT.sub(" ", cleaned))
    if negated or positive:
        return _single_value([0] * bool(negated) + [1] * bool(positive))
    lone = _LONE_DIGIT if output_format == "0/1" else _LONE_YES_NO
    return _single_value(_BINARY_TOKENS[token] for token in lone.findall(cleaned))


# --- reference grading ------------------------------------------------------------------

_GRADING_FIELDS = ("extracted_final_answer", "reasoning", "correct", "confidence")
_GRADING_LABEL = re.compile(
    r"^[ \t>#*_-]*(?P<label>extracted[ _]final[ _]answer|reasoning|correct|confidence)"
    r"[ \t*_]*:[ \t*_]*",
    re.IGNORECASE | re.MULTILINE,
)
_VERDICT_WORD = re.compile(r"(yes|no|true|false|incorrect|correct)\b")
_CONFIDENCE = re.compile(rf"({_NUMBER})\s*(%)?")


def _verdict_from_value(value: Any) -> bool | None:
    if isinstance(value, bool | int | float):
        return bool(value) if value in (0, 1) else None
    if not isinstance(value, str):
        return None
    match = _VERDICT_WORD.match(_strip_emphasis(value).strip(_EDGE_PUNCTUATION).lower())
    return None if match is None else bool(_BINARY_TOKENS[match.group(1)])


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
    return number if _in_range(number, 0, 100) else None


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
    """
    if _is_blank(text):
        return ParseResult(ReferenceGrading(**dict.fromkeys(_GRADING_FIELDS)), EMPTY)
    text = _judges_own_text(text)
    data = first_json_object(text) or {}
    from_json = {name: _lookup(data, name) for name in _GRADING_FIELDS}
    # Each field runs from its label to the next label, so reasoning may span lines.
    from_lines: dict[str, str] = {}
    labels = list(_GRADING_LABEL.finditer(text))
    for index, match in enumerate(labels):
        end = labels[index + 1].start() if index + 1 < len(labels) else len(text)
        from_lines.setdefault(_key(match.group("label")), text[match.end() : end])
    raw = {
        name: from_json[name] if from_json[name] is not None else from_lines.get(name)
        for name in _GRADING_FIELDS
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


# --- ratings ------------------------------------------------------------------------

_DOUBLE_BRACKET = re.compile(rf"\[\[\s*({_NUMBER})\s*\]\]")
# A label, a short gap without digits, the number, and an optional "/ M" or "out of M";
# a number followed by "to 5" or "- 5" describes the scale, not a rating.
_LABELLED_RATING = re.compile(
    rf"\b(?:rat(?:ing|ed|e)|score[ds]?|grade[ds]?|mark)\b[^\d\n]{{0,20}}?(?<![\w.])({_NUMBER})"
    rf"(?!\s*(?:-|–|to)\s*\d)(?:\s*(?:/|out of)\s*(\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)
_FRACTION = re.compile(rf"(?<![\w.])({_NUMBER})\s*(?:/|out of)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
# MT-Bench: the first [[N]], and only when there is none the first [N].
_MT_BENCH_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
_MT_BENCH_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")


def _check_range(low: float, high: float) -> None:
    if not low < high:
        raise ConfigError(f"a score range needs low < high, got ({low}, {high})")


def _rating_result(value: float, low: float, high: float) -> ParseResult[float]:
    if _in_range(value, low, high):
        return ParseResult(value, OK)
    return ParseResult(None, OUT_OF_RANGE)


def parse_rating(text: str | None, low: float, high: float) -> ParseResult[float]:
    """A rating on the scale low..high from a free-text or JSON judge reply.

    Tried in order (the last occurrence wins, as judges state their rating at the end):
    a JSON "rating"/"score"; "[[N]]"; a labelled rating ("Rating: 4", "Score: 3 out of 5",
    "overall score is 4/5"); a bare fraction "4/5" over `high`; a reply that is just a
    number. A labelled fraction over another denominator ("Score: 8/10" on 0-5) or a value
    outside the scale gives "out_of_range".
    """
    _check_range(low, high)
    if _is_blank(text):
        return ParseResult(None, EMPTY)
    text = _judges_own_text(text)
    data = first_json_object(text)
    if data is not None:
        value = _as_number(_lookup(data, "rating", "score"))
        if value is not None:
            return _rating_result(value, low, high)
    found = _stated_rating(_strip_emphasis(text), high)
    if found is None:
        return ParseResult(None, NO_MATCH)
    rating, on_scale = found
    return _rating_result(rating, low, high) if on_scale else ParseResult(None, OUT_OF_RANGE)


def _stated_rating(cleaned: str, high: float) -> tuple[float, bool] | None:
    """The rating a free-text reply states, and whether it is given on the 0..`high` scale
    (False for "8/10" when `high` is 5)."""
    bracketed = _DOUBLE_BRACKET.findall(cleaned)
    if bracketed:
        return float(bracketed[-1]), True
    labelled = _LABELLED_RATING.findall(cleaned)
    fractions = [found for found in _FRACTION.findall(cleaned) if float(found[1]) == high]
    if labelled or fractions:
        number, denominator = (labelled or fractions)[-1]
        return float(number), not denominator or float(denominator) == high
    whole = cleaned.strip(_EDGE_PUNCTUATION)
    return (float(whole), True) if re.fullmatch(_NUMBER, whole) else None


def parse_bracket_rating(
    text: str | None, score_range: tuple[float, float] | None = None
) -> ParseResult[float]:
    """MT-Bench-compatible rating: the first `[[N]]`, else the first `[N]` (N may be decimal).

    Reproduces FastChat's parsed scores; where FastChat records -1 (no rating found, or the
    `$ERROR$` marker of a failed call) this returns None with "no_match". Out-of-scale
    values are only rejected when `score_range` is given, as FastChat does not check them.
    """
    if _is_blank(text):
        return ParseResult(None, EMPTY)
    text = _judges_own_text(text)
    match = _MT_BENCH_SCORE.search(text) or _MT_BENCH_BACKUP.search(text)
    if match is None:
        return ParseResult(None, NO_MATCH)
    value = float(match.group(1))
    if score_range is None:
        return ParseResult(value, OK)
    _check_range(*score_range)
    return _rating_result(value, *score_range)


# --- rubric -------------------------------------------------------------------------------


def _integer_score(value: Any) -> int | None:
    if isinstance(value, Mapping):  # {"clarity": {"score": 4, "reason": "..."}}
        value = _lookup(value, "score", "rating")
    number = _as_number(value)
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
    """
    low, high = score_range
    _check_range(low, high)
    names = list(criteria)
    scores: dict[str, int | None] = dict.fromkeys(names)
    if _is_blank(text):
        return ParseResult(scores, EMPTY)
    text = _judges_own_text(text)
    data = first_json_object(text) or {}
    nested = _lookup(data, "scores")
    found = nested if isinstance(nested, Mapping) else data
    saw_out_of_range = False
    for name in names:
        raw = _lookup(found, name)
        if raw is None:
            pattern = rf"[\"']?{re.escape(name)}[\"']?\s*[:=]\s*[\"']?({_NUMBER})(?![\d.])"
            match = re.search(pattern, _strip_emphasis(text), re.IGNORECASE)
            raw = match.group(1) if match else None
        score = _integer_score(raw)
        if score is not None and not _in_range(score, low, high):
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


# --- pairwise -------------------------------------------------------------------------

_VERDICT_MARK = re.compile(r"\[\[\s*(a|b|c|tie)\s*\]\]", re.IGNORECASE)
_VERDICTS = {"a": "A", "b": "B", "c": "tie", "tie": "tie"}
_SCORE_PAIR = re.compile(rf"\[\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]\]")


def _side_score_pattern(side: str) -> re.Pattern[str]:
    """Matches "Score A: 7", "Rating for Response A = 7", "Assistant A's score: 7/10"."""
    return re.compile(
        rf"(?:(?:score|rating)\s*(?:for\s+)?(?:(?:response|assistant|answer)\s*)?{side}\b"
        rf"|(?:response|assistant|answer)\s*{side}\b(?:'s)?\s*(?:score|rating)?)"
        rf"\s*[:=]?\s*({_NUMBER})",
        re.IGNORECASE,
    )


_SIDE_SCORES = (_side_score_pattern("A"), _side_score_pattern("B"))


def _verdict_from_json(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    return _VERDICTS.get(value.strip(" []").lower())


def parse_pairwise(
    text: str | None, score_range: tuple[float, float] = (1, 10)
) -> ParseResult[PairwiseReply]:
    """Verdict ("A", "B", "tie") and the scores of both responses from a pairwise reply.

    An explicit verdict (`[[A]]`, `[[B]]`, `[[C]]` for a tie, or JSON "verdict") wins;
    without one, two valid scores decide it. Contradicting verdict marks give "ambiguous".
    The value is always a `PairwiseReply`; status "ok" means a verdict was found.
    """
    low, high = score_range
    _check_range(low, high)
    if _is_blank(text):
        return ParseResult(PairwiseReply(None, (None, None)), EMPTY)
    text = _judges_own_text(text)
    raw_scores: list[float | None] = [None, None]
    verdicts: set[str] = set()
    data = first_json_object(text)
    if data is not None:
        raw_scores = [_as_number(_lookup(data, "score_a")), _as_number(_lookup(data, "score_b"))]
        json_verdict = _verdict_from_json(_lookup(data, "verdict", "winner"))
        if json_verdict is not None:
            verdicts.add(json_verdict)
    cleaned = _strip_emphasis(text)
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
        score if score is not None and _in_range(score, low, high) else None for score in raw_scores
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


# --- exact match and unknown references -------------------------------------------------

# Thousands separators only in groups of three, so that "1,2,3" stays a list.
_NUMBER_TOKEN = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
# Punctuation goes, except a decimal point between digits and a leading minus sign.
_PUNCTUATION = re.compile(r"(?P<keep>(?<=\d)\.(?=\d)|(?<![\w.])-(?=\d))|[^\w\s]|_")
# Only a leading article goes: inside an answer it may matter ("vitamin a" is not "vitamin").
_LEADING_ARTICLE = re.compile(r"^(?:a|an|the)\s+")
_UNKNOWN_REFERENCES = frozenset(
    # "none" and "nan" are what str() makes of a missing value in a text column.
    {
        "",
        "unknown",
        "n/a",
        "na",
        "none",
        "null",
        "nan",
        "?",
        "-",
        "--",
        "tbd",
        "not available",
        "no answer",
        "no reference",
    }
)


def _canonical_number(match: re.Match[str]) -> str:
    try:
        number = Decimal(match.group(0).replace(",", ""))
    except InvalidOperation:
        return match.group(0)
    if number == 0:
        return "0"  # also "-0" and "0.00"
    return format(number.normalize(), "f")


def _is_missing_scalar(value: object) -> bool:
    """None, NaN, pd.NA or NaT (pd.isna answers with an array for array-likes: not missing)."""
    missing = pd.isna(value)
    return isinstance(missing, bool | np.bool_) and bool(missing)


def _is_answer_list(value: object) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping)


def normalize_answer(text: object) -> str:
    """A comparable form of a short answer: case, punctuation, a leading article, spacing
    and number notation do not matter ("The 1,000.0 km!" -> "1000 km").

    It errs towards keeping differences, since a match skips the judge call.
    """
    if not isinstance(text, str) and _is_missing_scalar(text):
        return ""
    normalized = unicodedata.normalize("NFKC", str(text)).lower()
    normalized = _NUMBER_TOKEN.sub(_canonical_number, normalized)
    normalized = _PUNCTUATION.sub(lambda match: match.group("keep") or " ", normalized)
    return _LEADING_ARTICLE.sub("", " ".join(normalized.split()))


def is_unknown_reference(reference: object) -> bool:
    """True for a reference that cannot be judged against: None, NaN / NA, blank, a
    placeholder such as "unknown" or "n/a", or a list holding only such values."""
    if isinstance(reference, str):
        return reference.strip().lower() in _UNKNOWN_REFERENCES
    if _is_answer_list(reference):
        return all(is_unknown_reference(item) for item in reference)
    return _is_missing_scalar(reference)


def exact_match(prediction: object, reference: object) -> bool:
    """Whether the normalised prediction equals the normalised reference, or one of them
    when `reference` is a list of acceptable answers. Blank predictions and unknown
    references never match."""
    predicted = normalize_answer(prediction)
    if not predicted:
        return False
    references = reference if _is_answer_list(reference) else [reference]
    return any(
        not is_unknown_reference(item) and predicted == normalize_answer(item)
        for item in references
    )
