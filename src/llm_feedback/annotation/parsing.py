"""Reading a judge's aspect reply back into one rating per shown position.

The parsers never raise on malformed replies and never invent a rating: anything that cannot be
read with confidence gets an unreadable status (`llm_feedback.replies.status`) for that
position, with the reason attached.
Ratings come only from the labelled rating line inside the section headed by the position's
text number; quoted lines (">") and echoed material blocks are ignored, and a section with
two different rating lines is an error rather than a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.annotation.aspects import AspectSpec, get_aspect
from llm_feedback.replies.extract import json_objects_in
from llm_feedback.replies.fencing import (
    BARE_RATING,
    FIELD_NAMES,
    LABELLED_FIELD,
    SECTION_HEADER,
    unquoted_lines,
)
from llm_feedback.replies.status import (
    AMBIGUOUS,
    EMPTY,
    NO_MATCH,
    NOT_APPLICABLE,
    OK,
    OUT_OF_RANGE,
)

_RATING_VALUE = re.compile(
    r"^[\s*_\[(\"']*(?:"
    r"(?P<na>n\s*/\s*a|na|not\s+applicable)\b"
    r"|(?P<number>\d+(?:\.\d+)?)(?P<range>\s*[-–]\s*\d)?"
    r"\s*(?:(?:/|out\s+of)\s*(?P<scale>\d+))?"
    r")",
    re.IGNORECASE,
)
_NONE_OF_THE_TYPES = re.compile(r"^[\s*_\[(\"']*(?:none|n\s*/\s*a|no\b)", re.IGNORECASE)
_TYPE_CODE = re.compile(r"\b\d+\b")
# "Text 2: 4/5" - a header whose remainder is nothing but a rating.
_RATING_ONLY = re.compile(
    r"[\s*_]*(?:\d+(?:\.\d+)?(?:\s*(?:/|out\s+of)\s*\d+)?|n\s*/\s*a)[\s*_.]*", re.IGNORECASE
)


@dataclass
class AspectRating:
    """The judge's verdict on the text shown at `position` (0-based)."""

    position: int
    rating: int | None = None
    is_na: bool = False
    rationale: str = ""
    types: list[str] = field(default_factory=list)
    type_rationale: str = ""
    status: str = NO_MATCH  # a word of `llm_feedback.replies.status`
    error: str | None = None
    reply: str | None = None  # the reply this rating was read from (a re-ask may fix one)


def _failed(position: int, reason: str, status: str = NO_MATCH) -> AspectRating:
    return AspectRating(position=position, status=status, error=reason)


class _UnreadableRating(ValueError):
    def __init__(self, reason: str, status: str = NO_MATCH) -> None:
        super().__init__(reason)
        self.status = status


def _read_rating(spec: AspectSpec, value: Any) -> int | None:
    """The 1-5 rating written as `value`, or None for N/A; raises `_UnreadableRating`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise _UnreadableRating(f"rating {value!r} is not a number")
    shown = repr(value.strip()[:40])
    match = _RATING_VALUE.match(value)
    if match is None:
        raise _UnreadableRating(f"unreadable rating {shown}")
    if match["na"]:
        if not spec.allows_na:
            raise _UnreadableRating(f"N/A is not an allowed {spec.name} rating", OUT_OF_RANGE)
        return None
    if match["range"]:
        raise _UnreadableRating(f"rating {shown} is a range, not one value", AMBIGUOUS)
    if match["scale"] and match["scale"] != "5":
        raise _UnreadableRating(f"rating {shown} is not on the 1-5 scale", OUT_OF_RANGE)
    number = float(match["number"])
    if not number.is_integer() or not 1 <= number <= 5:
        raise _UnreadableRating(
            f"rating {match['number']} is outside the whole numbers 1-5", OUT_OF_RANGE
        )
    return int(number)


def _rating_from_value(spec: AspectSpec, value: Any) -> tuple[int | None, bool, str | None, str]:
    """(rating, is_na, error, status) from a rating as written in free text or JSON."""
    try:
        rating = _read_rating(spec, value)
    except _UnreadableRating as error:
        return None, False, str(error), error.status
    return rating, rating is None, None, NOT_APPLICABLE if rating is None else OK


def _types_from_value(spec: AspectSpec, value: Any) -> tuple[list[str], str | None]:
    """(valid type codes, note about anything dropped) from a Type field."""
    codes = spec.type_codes or {}
    if value is None:
        return [], None
    if isinstance(value, str):
        if not value.strip(" -[]"):
            return [], None
        if _NONE_OF_THE_TYPES.match(value):
            return ([spec.none_type_code] if spec.none_type_code else []), None
        written = _TYPE_CODE.findall(value)
    elif isinstance(value, list | tuple):
        written = [str(item).strip() for item in value]
    else:
        return [], f"unreadable type list {value!r}"
    kept = list(dict.fromkeys(code for code in written if code in codes))
    dropped = [code for code in written if code not in codes]
    return kept, (f"ignored unknown type codes {dropped}" if dropped else None)


def _rating_record(
    spec: AspectSpec,
    position: int,
    *,
    rating_value: Any,
    rationale: Any,
    types_value: Any,
    type_rationale: Any,
) -> AspectRating:
    rating, is_na, error, status = _rating_from_value(spec, rating_value)
    types, types_note = _types_from_value(spec, types_value) if spec.has_types else ([], None)
    if error is None:
        error = types_note
    return AspectRating(
        position=position,
        rating=rating,
        is_na=is_na,
        rationale=str(rationale or "").strip(),
        types=types,
        type_rationale=str(type_rationale or "").strip(),
        status=status,
        error=error,
    )


# --- free text -----------------------------------------------------------------------------


def _split_sections(lines: Sequence[str], n_completions: int) -> dict[int, list[list[str]]]:
    """Section bodies by 1-based text number; a number may head several sections."""
    sections: dict[int, list[list[str]]] = {}
    current: list[str] | None = None
    for line in lines:
        header = SECTION_HEADER.match(line)
        if header is None:
            if current is not None:
                current.append(line)
            continue
        number = int(header["number"])
        # A header for a text that was never shown still ends the previous section.
        current = [] if 1 <= number <= n_completions else None
        if current is not None:
            sections.setdefault(number, []).append(current)
            rest = header["rest"]
            if rest:
                current.append(f"Rating: {rest}" if _RATING_ONLY.fullmatch(rest) else rest)
    return sections


def _read_fields(body: Sequence[str]) -> dict[str, list[str]]:
    """Labelled field values in order of appearance; a value runs on until the next label."""
    fields: dict[str, list[str]] = {}
    values: list[str] | None = None
    for line in body:
        labelled = LABELLED_FIELD.match(line)
        bare = None if labelled else BARE_RATING.match(line)
        if labelled is None and bare is None:
            if values is not None:
                values[-1] = f"{values[-1]}\n{line}" if values[-1] else line
            continue
        name = next(name for name in FIELD_NAMES if labelled[name]) if labelled else "rating"
        values = fields.setdefault(name, [])
        values.append((labelled or bare)["value"])
    return {name: [value.strip() for value in found] for name, found in fields.items()}


def _has_rating(fields: dict[str, list[str]]) -> bool:
    return any(_RATING_VALUE.match(value) for value in fields.get("rating", []))


def _parse_section(spec: AspectSpec, position: int, bodies: list[list[str]]) -> AspectRating:
    # A header line followed at once by another ("### Text 1" then "Text 1: 4") is one section.
    bodies = [body for body in bodies if any(line.strip() for line in body)] or bodies[:1]
    readings = [_read_fields(body) for body in bodies]
    if len(readings) > 1 and not _has_rating(readings[0]) and any(map(_has_rating, readings)):
        # The judge's own section for this text carries no rating, a later one does: that
        # later section is text it copied (a completion imitating the answer format).
        return _failed(
            position, f"Text {position + 1} is rated only in a repeated section", AMBIGUOUS
        )
    fields: dict[str, list[str]] = {}
    for found in readings:
        for name, values in found.items():
            fields.setdefault(name, []).extend(values)
    # A "Score: the text ..." line in prose carries no value; only lines that start with a
    # number or N/A compete (and must agree) for the rating.
    rating_lines = [
        value for value in fields.get("rating", []) if _RATING_VALUE.match(value)
    ] or fields.get("rating", [])
    if not rating_lines:
        return _failed(position, f"no rating line for Text {position + 1}")
    readings = {_rating_from_value(spec, value)[:2] for value in rating_lines}
    if len(readings) > 1:
        return _failed(
            position, f"Text {position + 1} has conflicting rating lines {rating_lines}", AMBIGUOUS
        )
    rationale = fields.get("rating_rationale") or fields.get("rationale") or [""]
    type_rationale = fields.get("type_rationale", [""])
    if spec.has_types and "type_rationale" not in fields and len(fields.get("rationale", [])) > 1:
        # The "Rationale / Rating / Rationale" layout: the first one explains the types.
        type_rationale, rationale = fields["rationale"][:1], fields["rationale"][1:]
    return _rating_record(
        spec,
        position,
        rating_value=rating_lines[0],
        rationale="\n".join(rationale),
        types_value=(fields.get("type") or [None])[0],
        type_rationale=type_rationale[0],
    )


def _parse_free_text(spec: AspectSpec, reply: str, n_completions: int) -> list[AspectRating] | None:
    """None when the reply has no section for any shown text."""
    lines = unquoted_lines(reply)
    sections = _split_sections(lines, n_completions)
    if (
        not sections
        and n_completions == 1
        and any(LABELLED_FIELD.match(line) or BARE_RATING.match(line) for line in lines)
    ):
        sections = {1: [lines]}  # a lone text is often rated without a header
    if not sections:
        return None
    return [
        _parse_section(spec, position, sections[position + 1])
        if position + 1 in sections
        else _failed(position, f"no section for Text {position + 1}")
        for position in range(n_completions)
    ]


# --- JSON ----------------------------------------------------------------------------------


def _item_number(item: Mapping[str, Any], n_completions: int) -> int | None:
    number = item.get("text")
    if isinstance(number, str) and number.strip().isdigit():
        number = int(number.strip())
    if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= n_completions:
        return number
    return None


def _rating_items(ratings: list[Any] | dict[str, Any]) -> list[Mapping[str, Any]]:
    """The schema's {"text_k": {...}} form, or a free judge's list of numbered items."""
    if isinstance(ratings, list):
        return [item for item in ratings if isinstance(item, dict)]
    items = []
    for key, item in ratings.items():
        number = key.removeprefix("text_").strip() if isinstance(key, str) else ""
        if isinstance(item, dict):
            items.append({**item, "text": number} if number.isdigit() else dict(item))
    return items


def _parse_json(spec: AspectSpec, reply: str, n_completions: int) -> list[AspectRating] | None:
    """None when the reply holds no JSON answer at all."""
    candidates = json_objects_in("\n".join(unquoted_lines(reply)))
    answers = [obj for obj in candidates if isinstance(obj.get("ratings"), (list, dict))]
    if not answers:
        return None
    distinct = {json.dumps(answer, sort_keys=True) for answer in answers}
    if len(distinct) > 1:
        # Two different answers: one may be echoed from a completion, so trust neither.
        return [
            _failed(position, "the reply holds several different JSON answers", AMBIGUOUS)
            for position in range(n_completions)
        ]
    items = _rating_items(answers[0]["ratings"])
    count_note = (
        f"the reply rates {len(items)} text(s), {n_completions} were shown"
        if len(items) != n_completions
        else None
    )
    by_number: dict[int, list[Mapping[str, Any]]] = {}
    for index, item in enumerate(items):
        number = _item_number(item, n_completions)
        if number is None and "text" not in item and count_note is None:
            number = index + 1  # no text numbers at all: fall back on list order
        if number is not None:
            by_number.setdefault(number, []).append(item)

    results = []
    for position in range(n_completions):
        matches = by_number.get(position + 1, [])
        if len(matches) != 1:
            reason = (
                f"no item for Text {position + 1}"
                if not matches
                else f"{len(matches)} items for Text {position + 1}"
            )
            results.append(
                _failed(
                    position,
                    f"{reason}; {count_note}" if count_note else reason,
                    AMBIGUOUS if matches else NO_MATCH,
                )
            )
            continue
        item = matches[0]
        if "rating" not in item:
            results.append(_failed(position, f"the item for Text {position + 1} has no rating"))
            continue
        results.append(
            _rating_record(
                spec,
                position,
                rating_value=item["rating"],
                rationale=item.get("rationale"),
                types_value=item.get("types"),
                type_rationale=item.get("type_rationale"),
            )
        )
    return results


def parse_aspect_reply(
    aspect: str, reply_text: str | None, n_completions: int, structured: bool
) -> list[AspectRating]:
    """One `AspectRating` per shown position (0-based), whatever the judge wrote.

    `structured` says which format was asked for; a reply in the other format is still read
    when the expected one is absent (weak judges mix them up).

    Args:
        aspect: the aspect rated.
        reply_text: the judge's reply (None: no reply).
        n_completions: how many texts were shown.
        structured: whether JSON was asked for.

    Returns:
        The ratings, by shown position.
    """
    spec = get_aspect(aspect)
    if not reply_text or not reply_text.strip():
        return [_failed(position, "empty reply", EMPTY) for position in range(n_completions)]

    if structured:
        parsed = _parse_json(spec, reply_text, n_completions)
        if parsed is None:
            parsed = _parse_free_text(spec, reply_text, n_completions)
    else:
        parsed = _parse_free_text(spec, reply_text, n_completions)
        if parsed is None:
            parsed = _parse_json(spec, reply_text, n_completions)
    if parsed is None:
        expected = "JSON object with a ratings list" if structured else "section per text"
        return [
            _failed(position, f"no {expected} in the reply") for position in range(n_completions)
        ]
    return parsed
