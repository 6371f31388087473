"""The exact-match short-cut that avoids a judge call, and references that cannot be judged
against: answer normalisation shared by the `binary` kind and the evaluators."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

import numpy as np
import pandas as pd

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

    Args:
        text: a short answer.

    Returns:
        Its comparable form.
    """
    if not isinstance(text, str) and _is_missing_scalar(text):
        return ""
    normalized = unicodedata.normalize("NFKC", str(text)).lower()
    normalized = _NUMBER_TOKEN.sub(_canonical_number, normalized)
    normalized = _PUNCTUATION.sub(lambda match: match.group("keep") or " ", normalized)
    return _LEADING_ARTICLE.sub("", " ".join(normalized.split()))


def is_unknown_reference(reference: object) -> bool:
    """True for a reference that cannot be judged against: None, NaN / NA, blank, a
    placeholder such as "unknown" or "n/a", or a list holding only such values.

    Args:
        reference: a reference answer, or a list of them.

    Returns:
        True when it cannot be judged against.
    """
    if isinstance(reference, str):
        return reference.strip().lower() in _UNKNOWN_REFERENCES
    if _is_answer_list(reference):
        return all(is_unknown_reference(item) for item in reference)
    return _is_missing_scalar(reference)


def exact_match(prediction: object, reference: object) -> bool:
    """Whether the normalised prediction equals the normalised reference, or one of them
    when `reference` is a list of acceptable answers. Blank predictions and unknown
    references never match.

    Args:
        prediction: the response's answer.
        reference: the reference, or a list of acceptable answers.

    Returns:
        True on a match.
    """
    predicted = normalize_answer(prediction)
    if not predicted:
        return False
    references = reference if _is_answer_list(reference) else [reference]
    return any(
        not is_unknown_reference(item) and predicted == normalize_answer(item)
        for item in references
    )
