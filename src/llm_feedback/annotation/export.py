"""The UltraFeedback-shaped export: one record per prompt, its completions nested inside.

Field names and value conventions follow the public dataset: ratings are strings ("4" or
"N/A"), truthfulness and helpfulness carry "Type" codes with the type rationale under
"Rationale" and the rating rationale under "Rationale For Rating", and `overall_score` is the
fixed score. We add `prompt_id` so records join back to the long tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.annotation.aspects import ASPECTS, NOT_APPLICABLE, get_aspect
from llm_feedback.annotation.score_fix import require_columns
from llm_feedback.replies.status import READ
from llm_feedback.schema import COMPLETION_KEY, ULTRAFEEDBACK_COLUMN_TYPES

_COMPLETION_COLUMNS = [
    *COMPLETION_KEY,
    "source",
    "instruction",
    "model",
    "principle",
    "system_prompt",
    "response",
]
_ASPECT_COLUMNS = [
    *COMPLETION_KEY,
    "aspect",
    "shuffle_idx",
    "rating",
    "is_na",
    "rationale",
    "types",
    "type_rationale",
    "parse_status",
]


def _scalar(value: Any) -> Any:
    """pandas/numpy missing markers and numpy scalars as plain Python values."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _float(value: Any) -> float | None:
    value = _scalar(value)
    return None if value is None else float(value)


def _string_list(value: Any) -> list[str]:
    # Lists come back from Parquet as numpy arrays; a missing list is an empty one.
    if value is None or value is pd.NA or isinstance(value, float):
        return []
    return [str(item) for item in value]


def _rating_string(row: dict[str, Any] | None) -> str | None:
    if row is None:
        return None
    if bool(row["is_na"]):
        return NOT_APPLICABLE
    rating = _scalar(row["rating"])
    return None if rating is None else str(int(rating))


def _annotation(aspect: str, row: dict[str, Any] | None) -> dict[str, Any]:
    """One aspect's annotation; all fields null when the aspect has no usable rating row."""
    rationale = _scalar(row["rationale"]) if row else None
    if not get_aspect(aspect).has_types:
        return {"Rating": _rating_string(row), "Rationale": rationale}
    return {
        "Rating": _rating_string(row),
        "Rationale": _scalar(row["type_rationale"]) if row else None,
        "Rationale For Rating": rationale,
        "Type": _string_list(row["types"]) if row else [],
    }


def _chosen_aspect_rows(aspect_df: pd.DataFrame) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per (prompt_id, completion_idx, aspect), the earliest shuffle with a usable rating,
    else the earliest shuffle: the public format has room for one rating per aspect."""
    ranked = aspect_df[_ASPECT_COLUMNS].assign(
        unusable=~aspect_df["parse_status"].isin(READ).to_numpy(dtype=bool)
    )
    chosen = ranked.sort_values(["unusable", "shuffle_idx"], kind="stable").drop_duplicates(
        [*COMPLETION_KEY, "aspect"]
    )
    return {
        (row["prompt_id"], int(row["completion_idx"]), row["aspect"]): row
        for row in chosen.to_dict("records")
    }


def to_ultrafeedback_records(
    completions_df: pd.DataFrame,
    aspect_df: pd.DataFrame,
    critiques_df: pd.DataFrame,
    overall_scores_df: pd.DataFrame,
    aspects: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One record per prompt (in first-seen order), completions ordered by completion_idx.

    Every record carries every aspect of `aspects` (default: those present in
    `aspect_df`), with null fields where a completion has no rating for it, so the nested
    schema is the same for all records, also when no call was answered at all.
    """
    require_columns(completions_df, _COMPLETION_COLUMNS, "completions")
    require_columns(aspect_df, _ASPECT_COLUMNS, "aspect_annotations")
    require_columns(critiques_df, [*COMPLETION_KEY, "critique"], "critiques")
    score_columns = [*COMPLETION_KEY, "fine_grained_score", "overall_score_fixed"]
    require_columns(overall_scores_df, score_columns, "overall_scores")
    present = set(aspect_df["aspect"].unique()) | set(aspects or ())
    aspects = [name for name in ASPECTS if name in present]
    for unknown in sorted(present - set(aspects)):
        get_aspect(unknown)  # raises ConfigError naming the unknown aspect

    aspect_rows = _chosen_aspect_rows(aspect_df)
    critiques = {
        (row["prompt_id"], int(row["completion_idx"])): _scalar(row["critique"])
        for row in critiques_df[[*COMPLETION_KEY, "critique"]].to_dict("records")
    }
    overall_scores = {
        (row["prompt_id"], int(row["completion_idx"])): row
        for row in overall_scores_df[score_columns].to_dict("records")
    }

    ordered = completions_df[_COMPLETION_COLUMNS].sort_values("completion_idx", kind="stable")
    records: dict[Any, dict[str, Any]] = {
        prompt_id: {} for prompt_id in completions_df["prompt_id"].unique()
    }
    for row in ordered.to_dict("records"):
        key = (row["prompt_id"], int(row["completion_idx"]))
        record = records[row["prompt_id"]]
        if not record:
            record.update(
                prompt_id=row["prompt_id"],
                source=_scalar(row["source"]),
                instruction=_scalar(row["instruction"]),
                models=[],
                completions=[],
            )
        scores = overall_scores.get(key, {})
        record["models"].append(_scalar(row["model"]))
        record["completions"].append(
            {
                "model": _scalar(row["model"]),
                "principle": _scalar(row["principle"]),
                "custom_system_prompt": _scalar(row["system_prompt"]),
                "response": _scalar(row["response"]),
                "annotations": {
                    aspect: _annotation(aspect, aspect_rows.get((*key, aspect)))
                    for aspect in aspects
                },
                "critique": critiques.get(key),
                "overall_score": _float(scores.get("overall_score_fixed")),
                "fine-grained_score": _float(scores.get("fine_grained_score")),
            }
        )
    return list(records.values())


def ultrafeedback_frame(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The records as a DataFrame that `to_parquet` writes with nested list/struct columns."""
    frame = pd.DataFrame(list(records), columns=list(ULTRAFEEDBACK_COLUMN_TYPES))
    return frame.astype(
        {column: dtype for column, dtype in ULTRAFEEDBACK_COLUMN_TYPES.items() if dtype != "object"}
    )
