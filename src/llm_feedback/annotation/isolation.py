"""Completions suspected of injection are rated apart from their siblings, and twice.

A completion that addresses the evaluator or carries a verdict in any form
(`replies.injection.suspected_injection`) may steer a judge that reads it. Two guarantees:

- *siblings*: each suspected completion is rated in an aspect call of its own and the clean
  completions of the prompt together, so whatever it says reaches no call that rates
  another completion;
- *its own rating* (the differential check): it is rated as written and, in a call of its
  own, with its suspicious spans left out (`replies.injection.without_suspicious_spans`);
  its row keeps the lower of the two ratings (the one read, when the judge gave only one;
  the one as written, rationale included, when the two agree). So what the spans say can
  lower its rating but never raise it above what the judge gives the rest of the text; a
  clean text flagged by mistake loses nothing unless the spans taken out made it better.
  Such mistakes are rare because detection reads each completion in the context of its
  instruction: a rating that answers it ("a sentiment score of 9 / 10" when the
  instruction asks for sentiment scores) is no verdict for the judge.

The price: per aspect and shuffle, one more call for each prompt with a suspected completion
(the clean ones no longer share its call) and one more for each suspected completion (its
second variant); per critique, one more call for each suspected completion. Its rows carry
`suspected_injection`, and preference pairs leave it out by default
(`report.pairs.include_suspected`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from llm_feedback.replies.injection import without_suspicious_spans
from llm_feedback.storage.schema import CACHE_TOKEN_COLUMN_TYPES

# The two variants of a suspected completion that the differential check rates.
AS_WRITTEN = "as_written"
WITHOUT_SPANS = "without_spans"


def judged_together(injection_flags: Sequence[bool]) -> list[list[int]]:
    """Which of a prompt's completions share an aspect call: all of them, unless some are
    suspected injections; then each of those is judged alone and the clean ones together,
    so that a judge obeying a completion's instructions moves no rating but its own (and that
    row carries `suspected_injection`).

    Args:
        injection_flags: each completion's suspected-injection flag.

    Returns:
        Groups of completion indices, one per aspect call.
    """
    flagged = [index for index, flag in enumerate(injection_flags) if flag]
    clean = [index for index, flag in enumerate(injection_flags) if not flag]
    if not flagged:
        return [clean]
    return ([clean] if clean else []) + [[index] for index in flagged]


def variants(text: str, flagged: bool, instruction: str = "") -> list[tuple[str, str]]:
    """The (variant, text) pairs a completion is rated as: itself, or for a suspected one
    the text as written and the text without its suspicious spans.

    Args:
        text: the completion.
        flagged: whether it is a suspected injection.
        instruction: the instruction it answers (the context its spans are found in).

    Returns:
        `[("", text)]` for a clean completion, else both variants of the differential check.
    """
    if not flagged:
        return [("", text)]
    return [(AS_WRITTEN, text), (WITHOUT_SPANS, without_suspicious_spans(text, instruction))]


def written_kept(written: Any, without: Any) -> bool:
    """Whether the differential check keeps the rating of the text as written: it is not
    above the one without the spans (equal: the two agree, and the text as written keeps
    its rating and its rationale, no penalty), or it is the only one read.

    Args:
        written: the rating of the text as written (None or NaN: not read).
        without: the rating of the text without its suspicious spans.

    Returns:
        True to keep the rating as written, False for the one without the spans.
    """
    if pd.isna(written):
        return False
    return pd.isna(without) or float(written) <= float(without)


def kept_row(
    written: Mapping[str, Any], without: Mapping[str, Any], value_column: str
) -> dict[str, Any]:
    """The row the differential check keeps (`written_kept`), with the tokens of both calls.

    Args:
        written: the row of the text as written.
        without: the row of the text without its suspicious spans.
        value_column: the rating's column (`rating`, `overall_score`).

    Returns:
        The kept row, `suspected_injection` set.
    """
    row = dict(
        written if written_kept(written.get(value_column), without.get(value_column)) else without
    )
    for column in ("prompt_tokens", "completion_tokens"):
        if column in row:
            row[column] = (written.get(column) or 0) + (without.get(column) or 0)
    for column in CACHE_TOKEN_COLUMN_TYPES:  # null only where neither call's reply said
        counts = [v for v in (written.get(column), without.get(column)) if not pd.isna(v)]
        if column in row:
            row[column] = sum(counts) if counts else None
    row["suspected_injection"] = True
    return row


class DifferentialRows:
    """Holds the row of one variant of a suspected completion until the other's arrives."""

    def __init__(self, value_column: str) -> None:
        """Start with no pending row.

        Args:
            value_column: the column whose two variants are compared.
        """
        self.value_column = value_column
        self._pending: dict[Any, tuple[str, int, dict[str, Any]]] = {}

    def add(
        self, key: Any, variant: str, index: int, row: dict[str, Any]
    ) -> tuple[int, dict[str, Any]] | None:
        """Record one variant's row; with both in, the kept row and the smaller index.

        Args:
            key: what the two variants share (completion, aspect, shuffle).
            variant: `AS_WRITTEN` or `WITHOUT_SPANS`.
            index: the task index of this variant's call.
            row: its row.

        Returns:
            None while the other variant is out, else (index, kept row).
        """
        if key not in self._pending:
            self._pending[key] = (variant, index, row)
            return None
        other_variant, other_index, other = self._pending.pop(key)
        rows = {variant: row, other_variant: other}
        kept = kept_row(rows[AS_WRITTEN], rows[WITHOUT_SPANS], self.value_column)
        return min(index, other_index), kept
