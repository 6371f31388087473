"""Position effects in the annotate report: how ratings move with the shown order.

position_consistency and shuffle_agreement compare the shuffles of a completion (two or
more shuffles needed); rating_by_position works from one shuffle, shown positions being
random. Every figure has an interval bootstrapped over prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.agreement import RATERS_SEPARATOR, SPEARMAN, agreement_rows
from llm_feedback.parquet_source import ParquetSource, table_batches
from llm_feedback.reporting._frames import (
    as_float,
    ordered_aspects,
    require_columns,
    typed_frame,
)
from llm_feedback.reporting.uncertainty import DEFAULT_BOOTSTRAP, Bootstrap, mean_intervals
from llm_feedback.schema import (
    COMPLETION_KEY,
    POSITION_CONSISTENCY_COLUMN_TYPES,
    RATING_BY_POSITION_COLUMN_TYPES,
    SHUFFLE_AGREEMENT_COLUMN_TYPES,
)
from llm_feedback.stats.intervals import (
    GroupedMeans,
    bootstrap_method,
    correlation_interval,
    grouped_mean_intervals,
)

ANNOTATION_COLUMNS = (*COMPLETION_KEY, "aspect", "shuffle_idx", "position", "rating", "is_na")


def position_consistency(
    aspect_annotations: pd.DataFrame | ParquetSource, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
) -> pd.DataFrame:
    """Per aspect, how often re-shuffling the completions changed the judge's rating.

    Compares the ratings a (completion, aspect) got in different shuffles, over those with
    at least two non-null ratings (`n_compared`). share_changed: share whose ratings are
    not all equal; mean_abs_change: mean over them of the mean absolute difference between
    any two of its shuffles' ratings (for two shuffles simply |r1 - r0|). A rating vs N/A
    disagreement is not compared. Empty when only one shuffle was run. Both carry an
    interval (`<column>_ci_low`, `<column>_ci_high`) bootstrapped over prompts.

    Columns: aspect, n_compared, share_changed, mean_abs_change, their intervals, ci_method.
    """
    aspect_annotations = _shuffled(aspect_annotations)
    if aspect_annotations is None:
        return typed_frame(None, POSITION_CONSISTENCY_COLUMN_TYPES)

    item = [*COMPLETION_KEY, "aspect"]
    ratings = aspect_annotations.loc[:, item].copy()
    ratings["rating"] = as_float(aspect_annotations["rating"])
    ratings = ratings.dropna(subset=["rating"]).sort_values([*item, "rating"])
    # Sum of |x_i - x_j| over pairs of an item's sorted ratings x_0 <= ... <= x_{n-1} is
    # sum_k x_k (2k - n + 1): vectorised, instead of a Python loop over pairs per item.
    grouped = ratings.groupby(item, sort=False)["rating"]
    n = grouped.transform("size")
    rank = grouped.cumcount()
    ratings["weighted"] = ratings["rating"] * (2 * rank - n + 1)
    per_item = ratings.groupby(item, sort=False).agg(
        n=("rating", "size"),
        low=("rating", "min"),
        high=("rating", "max"),
        pair_sum=("weighted", "sum"),
    )
    per_item = per_item[per_item["n"] >= 2].reset_index()
    per_item["changed"] = (per_item["low"] != per_item["high"]).astype("float64")
    per_item["abs_change"] = per_item["pair_sum"] / (per_item["n"] * (per_item["n"] - 1) / 2)

    rows = []
    for aspect in ordered_aspects(aspect_annotations["aspect"]):
        compared = per_item[per_item["aspect"] == aspect]
        rows.append(
            {
                "aspect": aspect,
                "n_compared": len(compared),
                "share_changed": compared["changed"].mean() if len(compared) else np.nan,
                "mean_abs_change": compared["abs_change"].mean() if len(compared) else np.nan,
            }
        )
    table = pd.DataFrame(rows)
    for value, column in (("changed", "share_changed"), ("abs_change", "mean_abs_change")):
        intervals = mean_intervals(per_item, value, ["aspect"], bootstrap, f"{column}_")
        table = table.merge(intervals.drop(columns="ci_method"), on="aspect", how="left")
    table["ci_method"] = bootstrap_method(bootstrap.n_resamples)
    return typed_frame(table, POSITION_CONSISTENCY_COLUMN_TYPES)


def shuffle_agreement(
    aspect_annotations: pd.DataFrame | ParquetSource, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
) -> pd.DataFrame:
    """Per aspect, how well one judge agrees with itself when the completions are shown in
    another order: for each two shuffles (raters `shuffle_i~shuffle_j`), Spearman's rho and
    the exact-match share of the 1-5 ratings each completion got in both, over the
    completions rated in both (`n`; N/A and failed ratings left out), with an interval
    bootstrapped over prompts. Empty when only one shuffle was run.

    Columns: aspect, raters, statistic, value, n, ci_low, ci_high, ci_method.
    """
    aspect_annotations = _shuffled(aspect_annotations)
    if aspect_annotations is None:
        return typed_frame(None, SHUFFLE_AGREEMENT_COLUMN_TYPES)
    ratings = aspect_annotations.loc[:, [*COMPLETION_KEY, "aspect", "shuffle_idx"]].copy()
    ratings["rating"] = as_float(aspect_annotations["rating"])
    ratings["shuffle"] = "shuffle_" + ratings["shuffle_idx"].astype(str)
    shuffles = [f"shuffle_{index}" for index in sorted(ratings["shuffle_idx"].unique())]
    rows = []
    for aspect in ordered_aspects(ratings["aspect"]):
        by_shuffle = ratings[ratings["aspect"] == aspect].pivot(
            index=list(COMPLETION_KEY), columns="shuffle", values="rating"
        )
        by_shuffle = by_shuffle.reindex(columns=shuffles)
        found = agreement_rows(by_shuffle, shuffles, categorical=False)
        rows += [
            {"aspect": aspect, **row, **_agreement_interval(by_shuffle, row, bootstrap)}
            for row in found
        ]
    return typed_frame(pd.DataFrame(rows), SHUFFLE_AGREEMENT_COLUMN_TYPES)


def _shuffled(aspect_annotations: pd.DataFrame | ParquetSource) -> pd.DataFrame | None:
    """The columns the shuffle comparisons read, or None with fewer than two shuffles. A
    table on disk is read only when it has two: one shuffle (the default) is known from
    its `shuffle_idx` column, read a record batch at a time."""
    require_columns(aspect_annotations, ANNOTATION_COLUMNS, "aspect_annotations")
    if isinstance(aspect_annotations, ParquetSource):
        if len(aspect_annotations.distinct("shuffle_idx")) < 2:
            return None
        return aspect_annotations.read(list(ANNOTATION_COLUMNS))
    return aspect_annotations if aspect_annotations["shuffle_idx"].nunique() >= 2 else None


def _agreement_interval(
    by_shuffle: pd.DataFrame, row: Mapping[str, Any], bootstrap: Bootstrap
) -> dict[str, object]:
    """The interval of one agreement row (Spearman's rho or exact-match share of two
    shuffles), bootstrapped over prompts."""
    first, second = str(row["raters"]).split(RATERS_SEPARATOR)
    both = by_shuffle[[first, second]].dropna().reset_index()
    if row["statistic"] == SPEARMAN:
        _, low, high = correlation_interval(
            both[first], both[second], both["prompt_id"], "spearman", **bootstrap.kwargs
        )
    else:
        both["match"] = (both[first] == both[second]).astype("float64")
        found = grouped_mean_intervals(both, "match", "prompt_id", **bootstrap.kwargs)
        low, high = (
            (found["ci_low"].iloc[0], found["ci_high"].iloc[0])
            if len(found)
            else (
                np.nan,
                np.nan,
            )
        )
    return {"ci_low": low, "ci_high": high, "ci_method": bootstrap_method(bootstrap.n_resamples)}


def rating_by_position(
    aspect_annotations: pd.DataFrame | ParquetSource, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
) -> pd.DataFrame:
    """Mean rating per aspect by the 0-based position the completion was shown at, with
    intervals bootstrapped over prompts: a judge without position bias gives flat lines.
    Measured from one shuffle too: shown positions are random. A table on disk is read a
    record batch at a time (a prompt's weight in a resample is its own, whichever batch
    holds its rows).

    Columns: aspect, position, n_rated, mean_rating, ci_low, ci_high, ci_method.
    """
    require_columns(aspect_annotations, ANNOTATION_COLUMNS, "aspect_annotations")
    means = GroupedMeans("rating", "prompt_id", ["aspect", "position"], **bootstrap.kwargs)
    for batch in table_batches(aspect_annotations, ["prompt_id", "aspect", "position", "rating"]):
        means.add(batch.assign(rating=as_float(batch["rating"])))
    table = means.result().rename(
        columns={"n": "n_rated", "estimate": "mean_rating", "method": "ci_method"}
    )
    aspect_rank = {aspect: rank for rank, aspect in enumerate(ordered_aspects(table["aspect"]))}
    table["aspect_rank"] = table["aspect"].map(aspect_rank)
    table = table.sort_values(["aspect_rank", "position"])
    return typed_frame(table, RATING_BY_POSITION_COLUMN_TYPES)
