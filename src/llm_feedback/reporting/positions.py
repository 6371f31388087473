"""Position effects in the annotate report: how ratings move with the shown order.

position_consistency and shuffle_agreement compare the shuffles of a completion (two or
more shuffles needed); rating_by_position works from one shuffle, shown positions being
random. Every figure has an interval bootstrapped over prompts.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from llm_feedback.core.errors import require_columns
from llm_feedback.reporting._frames import (
    as_float,
    ordered_aspects,
    typed_frame,
)
from llm_feedback.reporting.uncertainty import DEFAULT_BOOTSTRAP, Bootstrap
from llm_feedback.stats.correlation_tally import CorrelationTally
from llm_feedback.stats.intervals import (
    GroupedMeans,
    bootstrap_method,
)
from llm_feedback.storage.parquet_source import (
    CHUNK_PROMPTS,
    ParquetSource,
    table_batches,
    table_chunks,
)
from llm_feedback.storage.schema import (
    COMPLETION_KEY,
    POSITION_CONSISTENCY_COLUMN_TYPES,
    RATING_BY_POSITION_COLUMN_TYPES,
    SHUFFLE_AGREEMENT_COLUMN_TYPES,
)
from llm_feedback.validation.agreement import EXACT_MATCH_SHARE, RATERS_SEPARATOR, SPEARMAN

ANNOTATION_COLUMNS = (*COMPLETION_KEY, "aspect", "shuffle_idx", "position", "rating", "is_na")


def position_consistency(
    aspect_annotations: pd.DataFrame | ParquetSource,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> pd.DataFrame:
    """Per aspect, how often re-shuffling the completions changed the judge's rating.

    Compares the ratings a (completion, aspect) got in different shuffles, over those with
    at least two non-null ratings (`n_compared`). share_changed: share whose ratings are
    not all equal; mean_abs_change: mean over them of the mean absolute difference between
    any two of its shuffles' ratings (for two shuffles simply |r1 - r0|). A rating vs N/A
    disagreement is not compared. Empty when only one shuffle was run. Both carry an
    interval (`<column>_ci_low`, `<column>_ci_high`) bootstrapped over prompts. A table on
    disk is read a chunk of prompts at a time.

    Columns: aspect, n_compared, share_changed, mean_abs_change, their intervals, ci_method.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        bootstrap: The bootstrap settings of the intervals.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The table, one row per aspect.

    Raises:
        InputError: A required column is missing.
    """
    if _shuffles(aspect_annotations) is None:
        return typed_frame(None, POSITION_CONSISTENCY_COLUMN_TYPES)
    means = {
        column: GroupedMeans(value, "prompt_id", ["aspect"], **bootstrap.kwargs)
        for value, column in (("changed", "share_changed"), ("abs_change", "mean_abs_change"))
    }
    aspects: set[str] = set()
    for chunk in table_chunks(aspect_annotations, prompts_per_chunk, list(ANNOTATION_COLUMNS)):
        aspects.update(chunk["aspect"].unique())
        per_item = _compared_items(chunk)
        for accumulator in means.values():
            accumulator.add(per_item)
    table = pd.DataFrame({"aspect": ordered_aspects(aspects)})
    for column, accumulator in means.items():
        found = accumulator.result().rename(
            columns={
                "n": f"{column}_n",
                "estimate": column,
                "ci_low": f"{column}_ci_low",
                "ci_high": f"{column}_ci_high",
            }
        )
        table = table.merge(found.drop(columns="method"), on="aspect", how="left")
    # Both are defined for every compared item: either's count is the items compared.
    table["n_compared"] = table["share_changed_n"]
    table["n_compared"] = table["n_compared"].fillna(0)
    table["ci_method"] = bootstrap_method(bootstrap.n_resamples)
    return typed_frame(table, POSITION_CONSISTENCY_COLUMN_TYPES)


def _compared_items(aspect_rows: pd.DataFrame) -> pd.DataFrame:
    """Per (completion, aspect) rated in two shuffles or more: whether its ratings differ
    (`changed`) and their mean absolute pairwise difference (`abs_change`)."""
    item = [*COMPLETION_KEY, "aspect"]
    ratings = aspect_rows.loc[:, item].copy()
    ratings["rating"] = as_float(aspect_rows["rating"])
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
    return per_item


def shuffle_agreement(
    aspect_annotations: pd.DataFrame | ParquetSource,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    *,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> pd.DataFrame:
    """Per aspect, how well one judge agrees with itself when the completions are shown in
    another order: for each two shuffles (raters `shuffle_i~shuffle_j`), Spearman's rho and
    the exact-match share of the 1-5 ratings each completion got in both, over the
    completions rated in both (`n`; N/A and failed ratings left out), with an interval
    bootstrapped over prompts. Empty when only one shuffle was run. A table on disk is
    walked twice, a chunk of prompts at a time (Spearman's ranks need the first walk).

    Columns: aspect, raters, statistic, value, n, ci_low, ci_high, ci_method.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        bootstrap: The bootstrap settings of the intervals.
        prompts_per_chunk: How many prompts a chunk read from disk holds.

    Returns:
        The table, two rows (Spearman, exact match) per aspect and two shuffles.

    Raises:
        InputError: A required column is missing.
    """
    shuffles = _shuffles(aspect_annotations)
    if shuffles is None:
        return typed_frame(None, SHUFFLE_AGREEMENT_COLUMN_TYPES)
    spearman = CorrelationTally("spearman", **bootstrap.kwargs)
    matches = GroupedMeans("match", "prompt_id", ["aspect", "raters"], **bootstrap.kwargs)
    aspects: set[str] = set()
    for walk in ("count", "add"):
        for chunk in table_chunks(aspect_annotations, prompts_per_chunk, list(ANNOTATION_COLUMNS)):
            aspects.update(chunk["aspect"].unique())
            for aspect, raters, both in _shuffle_pairs(chunk, shuffles):
                x, y = both["first"].to_numpy(), both["second"].to_numpy()
                groups = np.full(len(both), repr((aspect, raters)), dtype=object)
                if walk == "count":
                    spearman.count(groups, x, y)
                    continue
                spearman.add(groups, x, y, both["prompt_id"])
                matched = both.assign(aspect=aspect, raters=raters, match=(x == y).astype(float))
                matches.add(matched)
    rhos = spearman.result()
    shares = matches.result().set_index(["aspect", "raters"])
    rows = []
    for aspect in ordered_aspects(aspects):
        for first, second in itertools.combinations(shuffles, 2):
            raters = f"{first}{RATERS_SEPARATOR}{second}"
            rho = rhos.get(repr((aspect, raters)), (0, np.nan, np.nan, np.nan))
            rows.append(_agreement_row(aspect, raters, SPEARMAN, rho))
            if (aspect, raters) in shares.index:
                share = shares.loc[(aspect, raters)]
                found = int(share["n"]), share["estimate"], share["ci_low"], share["ci_high"]
            else:
                found = 0, np.nan, np.nan, np.nan
            rows.append(_agreement_row(aspect, raters, EXACT_MATCH_SHARE, found))
    table = pd.DataFrame(rows)
    table["ci_method"] = bootstrap_method(bootstrap.n_resamples)
    return typed_frame(table, SHUFFLE_AGREEMENT_COLUMN_TYPES)


def _agreement_row(
    aspect: str, raters: str, statistic: str, found: tuple[int, float, float, float]
) -> dict[str, object]:
    """A row of `shuffle_agreement` from (n, value, ci_low, ci_high)."""
    n, value, low, high = found
    return {
        "aspect": aspect,
        "raters": raters,
        "statistic": statistic,
        "value": value,
        "n": n,
        "ci_low": low,
        "ci_high": high,
    }


def _shuffle_pairs(aspect_rows: pd.DataFrame, shuffles: list[str]):
    """Per aspect and two shuffles: the completions rated in both, with both ratings."""
    ratings = aspect_rows.loc[:, [*COMPLETION_KEY, "aspect", "shuffle_idx"]].copy()
    ratings["rating"] = as_float(aspect_rows["rating"])
    ratings["shuffle"] = "shuffle_" + ratings["shuffle_idx"].astype(str)
    for aspect, part in ratings.groupby("aspect", sort=False):
        by_shuffle = part.pivot(
            index=list(COMPLETION_KEY), columns="shuffle", values="rating"
        ).reindex(columns=shuffles)
        for first, second in itertools.combinations(shuffles, 2):
            both = by_shuffle[[first, second]].dropna().reset_index()
            yield (
                aspect,
                f"{first}{RATERS_SEPARATOR}{second}",
                both.rename(columns={first: "first", second: "second"}),
            )


def _shuffles(aspect_annotations: pd.DataFrame | ParquetSource) -> list[str] | None:
    """The shuffles' rater names, or None with fewer than two shuffles (known from the
    `shuffle_idx` column alone, read a record batch at a time)."""
    require_columns(aspect_annotations, ANNOTATION_COLUMNS, "aspect_annotations")
    found = sorted(
        {
            value
            for batch in table_batches(aspect_annotations, ["shuffle_idx"])
            for value in batch["shuffle_idx"].unique()
        }
    )
    return [f"shuffle_{index}" for index in found] if len(found) >= 2 else None


def rating_by_position(
    aspect_annotations: pd.DataFrame | ParquetSource, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP
) -> pd.DataFrame:
    """Mean rating per aspect by the 0-based position the completion was shown at, with
    intervals bootstrapped over prompts: a judge without position bias gives flat lines.
    Measured from one shuffle too: shown positions are random. A table on disk is read a
    record batch at a time (a prompt's weight in a resample is its own, whichever batch
    holds its rows).

    Columns: aspect, position, n_rated, mean_rating, ci_low, ci_high, ci_method.

    Args:
        aspect_annotations: The aspect ratings, one row per shuffle.
        bootstrap: The bootstrap settings of the intervals.

    Returns:
        The table, one row per aspect and position.

    Raises:
        InputError: A required column is missing.
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
