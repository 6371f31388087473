"""The one JSON extractor for judge replies: bare, fenced in ``` blocks, or inside prose."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

_DECODER = json.JSONDecoder()


def iter_json_objects(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object in `text` that is not nested in another one, in order.

    Where an opening brace does not start valid JSON the search resumes one character
    later, so a reply cut short by max_tokens still yields its first complete inner object.

    Args:
        text: a reply.

    Returns:
        The objects, one at a time.
    """
    index = text.find("{")
    while index != -1:
        try:
            value, end = _DECODER.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            yield value
        index = text.find("{", end)


def json_objects_in(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in `text` (`iter_json_objects`), as a list.

    Args:
        text: a reply.

    Returns:
        The objects.
    """
    return list(iter_json_objects(text))


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first top-level JSON object in `text`.

    Args:
        text: a reply.

    Returns:
        The object, or None.
    """
    return next(iter_json_objects(text), None)
