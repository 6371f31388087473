"""What a reply keeps of its top log-probabilities: the alternatives at the label tokens.

A request may ask for token probabilities (`ChatRequest.top_logprobs` > 0) and name the
labels whose probabilities matter (`logprob_labels`: "A", "B", "C" for a comparison, the
scale's numbers for a rating). The endpoint returns the top log-probabilities of every
generated token (OpenAI's chat format, also llama.cpp's and vLLM's servers:
`choices[0].logprobs.content[i]` = {`token`, `logprob`, `top_logprobs`: [...]}); the reply
keeps only the positions whose token is one of the labels, once whitespace, brackets,
quotes, asterisks and trailing punctuation are stripped ("[[A]]" -> "A"), each with its
character offset in the reply (the tokens' texts joined), its own log-probability and its
top alternatives. A numeric label followed directly by a digit token is not one ("1" then
"0" is 10). The reader (`validation.logprobs`) picks the verdict's position among them.

`label_entries` returns None when the endpoint returned no token probabilities at all, and
a list (maybe empty) when it did: the two cases the card tells apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

_STRIP = " \t\n[]()*\"'`"
_TRAILING = ".:,;!"

#: The most alternatives an OpenAI-compatible endpoint returns per token.
MAX_TOP_LOGPROBS = 20


def normalise(token: str) -> str:
    """A token as a label: without surrounding whitespace, brackets, quotes, asterisks and
    trailing punctuation.

    Args:
        token: A generated token.

    Returns:
        The token as a label.
    """
    return token.strip(_STRIP).rstrip(_TRAILING).strip(_STRIP)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _alternatives(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = []
    for alternative in entry.get("top_logprobs") or ():
        if isinstance(alternative, Mapping) and _finite(alternative.get("logprob")):
            found.append(
                {"token": str(alternative.get("token", "")), "logprob": alternative["logprob"]}
            )
    return found


def label_entries(logprobs: Any, labels: Sequence[str]) -> list[dict[str, Any]] | None:
    """The label positions of a choice's `logprobs` object (see the module docstring):
    [{"offset", "token", "logprob", "top_logprobs"}], None when it holds no tokens.

    Args:
        logprobs: A choice's `logprobs` object (OpenAI's shape: its `content` list).
        labels: The labels whose tokens are kept.

    Returns:
        One entry per token that reads as a label (a digit before another digit is not
        one), with its character offset; None when there are no tokens or they are
        malformed.
    """
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content:
        return None
    wanted = set(labels)
    entries: list[dict[str, Any]] = []
    offset = 0
    for position, entry in enumerate(content):
        if not isinstance(entry, Mapping):
            return None
        token = str(entry.get("token", ""))
        label = normalise(token)
        if label in wanted:
            following = content[position + 1] if position + 1 < len(content) else {}
            next_token = str(following.get("token", "")) if isinstance(following, Mapping) else ""
            if not (label.isdigit() and next_token[:1].isdigit()):  # "1" of "10" is not one
                entries.append(
                    {
                        "offset": offset,
                        "token": token,
                        "logprob": entry.get("logprob") if _finite(entry.get("logprob")) else None,
                        "top_logprobs": _alternatives(entry),
                    }
                )
        offset += len(token)
    return entries
