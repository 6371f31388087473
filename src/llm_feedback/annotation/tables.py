"""Turning parsed judge replies into the long-format `aspect_annotations` and `critiques` tables.

One row per natural unit with the explicit dtypes of `llm_feedback.storage.schema`, so the Parquet
schema does not depend on which values happened to occur. The `types` column holds Python
lists of strings (Parquet list<string>); read back, each cell is a sequence of strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llm_feedback.annotation.critique import CritiqueParse
from llm_feedback.annotation.parsing import AspectRating
from llm_feedback.core.errors import InputError
from llm_feedback.replies.status import status_of_failure
from llm_feedback.storage.schema import ASPECT_ANNOTATIONS_COLUMN_TYPES, CRITIQUES_COLUMN_TYPES
from llm_feedback.storage.spool import TableBuilder


@dataclass(frozen=True)
class AspectJudgement:
    """The outcome of one (prompt, aspect, shuffle) judge call.

    `order[i]` indexes `completion_ids` (default: 0..n-1), the completion_idx values of the
    completions passed to `build_aspect_request`, so that a prompt whose failed generations
    were left out still maps back to the right completions. `ratings` is empty when the call
    itself failed, which `call_error` then explains.
    """

    prompt_id: str
    aspect: str
    shuffle_idx: int
    order: Sequence[int]
    ratings: Sequence[AspectRating]
    judge_model: str = ""
    raw_reply: str | None = None
    reasks: int = 0
    call_error: str | None = None
    completion_ids: Sequence[int] | None = None
    judge_endpoint: str = ""
    judge_backend: str = ""
    judge_via_batch: bool = False
    # Per completion (indexed like `completion_ids`): is it a suspected injection?
    injection_flags: Sequence[bool] | None = None
    # Per shown position, the reply its rating was read from (a re-ask may have fixed one).
    raw_replies: Sequence[str | None] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass(frozen=True)
class CritiqueJudgement:
    """The outcome of one critique call; `parsed` is None when the call failed."""

    prompt_id: str
    completion_idx: int
    parsed: CritiqueParse | None
    judge_model: str = ""
    raw_reply: str | None = None
    reasks: int = 0
    call_error: str | None = None
    judge_endpoint: str = ""
    judge_backend: str = ""
    judge_via_batch: bool = False
    suspected_injection: bool = False


def _typed_frame(rows: Iterable[Mapping[str, Any]], dtypes: Mapping[str, Any]) -> pd.DataFrame:
    builder = TableBuilder(dtypes)
    for key, row in enumerate(rows):
        builder.add(key, row)
    return builder.frame()


def aspect_rows(judgement: AspectJudgement) -> list[dict[str, Any]]:
    """The `aspect_annotations` rows of one aspect call, one per completion shown.

    Args:
        judgement: the call's judgement.

    Returns:
        The rows.
    """
    completion_ids = list(
        range(len(judgement.order))
        if judgement.completion_ids is None
        else judgement.completion_ids
    )
    if sorted(judgement.order) != list(range(len(completion_ids))):
        raise InputError(
            f"prompt {judgement.prompt_id!r}, {judgement.aspect}: order {list(judgement.order)} "
            f"does not match its {len(completion_ids)} completion(s)"
        )
    failed_call = judgement.call_error is not None or not judgement.ratings
    if not failed_call and len(judgement.ratings) != len(judgement.order):
        raise InputError(
            f"prompt {judgement.prompt_id!r}, {judgement.aspect}: {len(judgement.ratings)} "
            f"rating(s) for {len(judgement.order)} shown completion(s)"
        )
    rows = []
    for position, shown in enumerate(judgement.order):
        rating = None if failed_call else judgement.ratings[position]
        rows.append(
            {
                "prompt_id": judgement.prompt_id,
                "completion_idx": completion_ids[shown],
                "aspect": judgement.aspect,
                "shuffle_idx": judgement.shuffle_idx,
                "position": position,
                "rating": rating.rating if rating else None,
                "is_na": bool(rating and rating.is_na),
                "rationale": rating.rationale if rating else None,
                "types": list(rating.types) if rating else [],
                "type_rationale": rating.type_rationale if rating else None,
                "parse_status": rating.status
                if rating
                else status_of_failure(judgement.call_error),
                "parse_error": rating.error
                if rating
                else (judgement.call_error or "no ratings returned"),
                "reasks": judgement.reasks,
                "judge_model": judgement.judge_model,
                "judge_endpoint": judgement.judge_endpoint,
                "judge_backend": judgement.judge_backend,
                "judge_via_batch": judgement.judge_via_batch,
                "suspected_injection": bool(
                    judgement.injection_flags and judgement.injection_flags[shown]
                ),
                "raw_reply": judgement.raw_replies[position]
                if judgement.raw_replies
                else judgement.raw_reply,
                # A call rates every shown completion; each row carries its share.
                "prompt_tokens": judgement.prompt_tokens / len(judgement.order),
                "completion_tokens": judgement.completion_tokens / len(judgement.order),
                **{
                    name: None if count is None else count / len(judgement.order)
                    for name, count in (
                        ("cached_prompt_tokens", judgement.cached_prompt_tokens),
                        ("cache_write_tokens", judgement.cache_write_tokens),
                    )
                },
            }
        )
    return rows


def aspect_annotations_frame(judgements: Iterable[AspectJudgement]) -> pd.DataFrame:
    """`aspect_annotations` rows: one per (prompt_id, completion_idx, aspect, shuffle_idx).

    Args:
        judgements: the aspect calls' judgements.

    Returns:
        The table.
    """
    rows = (row for judgement in judgements for row in aspect_rows(judgement))
    return _typed_frame(rows, ASPECT_ANNOTATIONS_COLUMN_TYPES)


def critique_row(judgement: CritiqueJudgement) -> dict[str, Any]:
    """The `critiques` row of one critique call.

    Args:
        judgement: one critique call's judgement.

    Returns:
        The row.
    """
    parsed = judgement.parsed
    failed_call = judgement.call_error is not None or parsed is None
    return {
        "prompt_id": judgement.prompt_id,
        "completion_idx": judgement.completion_idx,
        "critique": None if failed_call else parsed.feedback,
        "overall_score": None if failed_call else parsed.overall_score,
        "parse_status": status_of_failure(judgement.call_error) if failed_call else parsed.status,
        "parse_error": (judgement.call_error or "no reply") if failed_call else parsed.error,
        "reasks": judgement.reasks,
        "judge_model": judgement.judge_model,
        "judge_endpoint": judgement.judge_endpoint,
        "judge_backend": judgement.judge_backend,
        "judge_via_batch": judgement.judge_via_batch,
        "suspected_injection": judgement.suspected_injection,
        "raw_reply": judgement.raw_reply,
    }


def critiques_frame(judgements: Iterable[CritiqueJudgement]) -> pd.DataFrame:
    """`critiques` rows: one per (prompt_id, completion_idx).

    Args:
        judgements: the critique calls' judgements.

    Returns:
        The table.
    """
    return _typed_frame(map(critique_row, judgements), CRITIQUES_COLUMN_TYPES)
