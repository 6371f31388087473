"""What every judge kind's reply reader shares: the `ParseResult`, the judge's own lines,
loose JSON lookups, numbers and the rating parser that several kinds read with.

A reader never raises on the reply text: it returns a `ParseResult` whose `value` is the
parsed value (None when nothing usable was found) and whose `status` says why, so that a
malformed reply is stored as null with its status instead of crashing a run or being
counted silently. Every reader also reads the JSON object a structured-output request asks
for. Statuses are those of `llm_feedback.replies.status`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Reading
from llm_feedback.replies.extract import first_json_object
from llm_feedback.replies.fencing import unquoted_lines
from llm_feedback.replies.status import EMPTY, NO_MATCH, OK, OUT_OF_RANGE

T = TypeVar("T")

NUMBER = r"-?\d+(?:\.\d+)?"
EDGE_PUNCTUATION = " \t.!?\"'()[]:;,"
# Words a judge says a verdict with, and what they mean (1: correct).
VERDICT_TOKENS = {
    "1": 1,
    "0": 0,
    "yes": 1,
    "no": 0,
    "true": 1,
    "false": 0,
    "correct": 1,
    "incorrect": 0,
}


@dataclass(frozen=True, slots=True)
class ParseResult(Generic[T]):
    """A parsed value (None when unusable) and the status that explains it."""

    value: T | None
    status: str


def value_reading(parsed: ParseResult[Any]) -> Reading:
    """The engine's reading of a parse: usable when a value was found.

    Args:
        parsed: the parse result.

    Returns:
        The reading.
    """
    return Reading(parsed.value, parsed.status, parsed.value is not None)


def judges_own_text(text: str) -> str:
    """The judge's own lines: material it echoed (marker blocks) and quoted lines ("> ")
    dropped, so a score written inside the judged text never counts as the judge's.

    Args:
        text: the judge's reply.

    Returns:
        The reply without echoed material.
    """
    return "\n".join(unquoted_lines(text))


def is_blank(text: object) -> bool:
    """Whether a reply holds no text (not a string, or only whitespace).

    Args:
        text: the reply.

    Returns:
        True when blank.
    """
    return not isinstance(text, str) or not text.strip()


def strip_emphasis(text: str) -> str:
    """Drop markdown emphasis and code marks, which judges sprinkle around their verdicts.

    Args:
        text: the text.

    Returns:
        The text without `*` and backquotes.
    """
    return text.replace("*", "").replace("`", "")


def loose_key(name: str) -> str:
    """Loose key for matching names: case, spaces, dashes and underscores do not matter.

    Args:
        name: a name.

    Returns:
        Its key.
    """
    return re.sub(r"[\W_]+", "_", str(name).lower()).strip("_")


def lookup(data: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of `names` in `data`, keys matched loosely; None if none.

    Args:
        data: a JSON object.
        *names: the names tried, in order.

    Returns:
        The value, or None.
    """
    loose = {loose_key(key): value for key, value in data.items()}
    for name in names:
        if loose_key(name) in loose:
            return loose[loose_key(name)]
    return None


def as_number(value: Any) -> float | None:
    """A number from a JSON value: int, float or numeric string; bools are not numbers.

    Args:
        value: a JSON value.

    Returns:
        The number, or None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = re.fullmatch(rf"\s*({NUMBER})\s*(?:/\s*\d+)?\s*", value)
        return float(match.group(1)) if match else None
    return None


def in_range(value: float, low: float, high: float) -> bool:
    """Whether `value` lies on the scale, bounds included.

    Args:
        value: a rating.
        low: the scale's minimum.
        high: the scale's maximum.

    Returns:
        True when it does.
    """
    return low <= value <= high


def check_range(low: float, high: float) -> None:
    """Raise ConfigError unless low < high.

    Args:
        low: the scale's minimum.
        high: the scale's maximum.
    """
    if not low < high:
        raise ConfigError(f"a score range needs low < high, got ({low}, {high})")


def rating_result(value: float, low: float, high: float) -> ParseResult[float]:
    """A found rating as a parse result: ok on the scale, else out of range.

    Args:
        value: the rating found.
        low: the scale's minimum.
        high: the scale's maximum.

    Returns:
        The parse result.
    """
    if in_range(value, low, high):
        return ParseResult(value, OK)
    return ParseResult(None, OUT_OF_RANGE)


_DOUBLE_BRACKET = re.compile(rf"\[\[\s*({NUMBER})\s*\]\]")
# A label, a short gap without digits, the number, and an optional "/ M" or "out of M";
# a number followed by "to 5" or "- 5" describes the scale, not a rating.
_LABELLED_RATING = re.compile(
    rf"\b(?:rat(?:ing|ed|e)|score[ds]?|grade[ds]?|mark)\b[^\d\n]{{0,20}}?(?<![\w.])({NUMBER})"
    rf"(?!\s*(?:-|–|to)\s*\d)(?:\s*(?:/|out of)\s*(\d+(?:\.\d+)?))?",
    re.IGNORECASE,
)
_FRACTION = re.compile(rf"(?<![\w.])({NUMBER})\s*(?:/|out of)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_rating(text: str | None, low: float, high: float) -> ParseResult[float]:
    """A rating on the scale low..high from a free-text or JSON judge reply.

    Tried in order (the last occurrence wins, as judges state their rating at the end):
    a JSON "rating"/"score"; "[[N]]"; a labelled rating ("Rating: 4", "Score: 3 out of 5",
    "overall score is 4/5"); a bare fraction "4/5" over `high`; a reply that is just a
    number. A labelled fraction over another denominator ("Score: 8/10" on 0-5) or a value
    outside the scale gives "out_of_range".

    Args:
        text: the judge's reply (None: no reply).
        low: the scale's minimum.
        high: the scale's maximum.

    Returns:
        The rating and the parse status.
    """
    check_range(low, high)
    if is_blank(text):
        return ParseResult(None, EMPTY)
    text = judges_own_text(text)
    data = first_json_object(text)
    if data is not None:
        value = as_number(lookup(data, "rating", "score"))
        if value is not None:
            return rating_result(value, low, high)
    found = _stated_rating(strip_emphasis(text), high)
    if found is None:
        return ParseResult(None, NO_MATCH)
    rating, on_scale = found
    return rating_result(rating, low, high) if on_scale else ParseResult(None, OUT_OF_RANGE)


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
    whole = cleaned.strip(EDGE_PUNCTUATION)
    return (float(whole), True) if re.fullmatch(NUMBER, whole) else None
