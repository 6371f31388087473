"""Small DataFrame helpers shared by the reporting modules: input checks and typed outputs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.storage.parquet_source import (
    CHUNK_PROMPTS,
    ParquetSource,
    as_frame,
    rows_by_prompt,
    table_batches,
    table_chunks,
)
from llm_feedback.storage.schema import COMPLETION_KEY

# A report input: a DataFrame, or a table on disk that the report reads in parts.
Table = pd.DataFrame | ParquetSource

# The four UltraFeedback aspects in the order the paper presents them; any other aspect
# found in the data is listed after these, alphabetically.
CANONICAL_ASPECTS = ("instruction_following", "honesty", "truthfulness", "helpfulness")


def require_unique_key(frame: pd.DataFrame, key: Sequence[str], dataset: str) -> None:
    """Fail on a repeated key, which would silently duplicate rows in a join.

    Args:
        frame: The table to check.
        key: The columns that must be unique together.
        dataset: The table's name, for the error.

    Raises:
        InputError: A row repeats the key; the first such row is named.
    """
    duplicated = frame.duplicated(subset=list(key))
    if duplicated.any():
        position = int(duplicated.to_numpy().argmax())
        values = ", ".join(repr(frame[column].iloc[position]) for column in key)
        raise InputError(
            f"{dataset}: row {position} repeats the key ({', '.join(key)}) = ({values})"
        )


def typed_frame(frame: pd.DataFrame | None, column_types: Mapping[str, str]) -> pd.DataFrame:
    """Select `column_types`' columns in order and cast them, so outputs have stable dtypes
    even when empty (an empty groupby result otherwise comes back as `object`).

    Args:
        frame: The table (None or empty: an empty table with those columns).
        column_types: Each output column's dtype, in the output's order.

    Returns:
        The typed table, with a fresh index.
    """
    if frame is None or frame.empty:
        frame = pd.DataFrame({column: [] for column in column_types})
    return frame.loc[:, list(column_types)].astype(dict(column_types)).reset_index(drop=True)


def as_float(values: pd.Series) -> pd.Series:
    """Nullable numbers (Float64 with <NA>) as float64 with NaN, which numpy reductions and
    matplotlib understand.

    Args:
        values: The numbers, nullable or not.

    Returns:
        The same numbers as float64, with the same index and name.
    """
    return pd.Series(
        values.to_numpy(dtype="float64", na_value=np.nan), index=values.index, name=values.name
    )


def ordered_aspects(aspects: Iterable[str]) -> list[str]:
    """The distinct aspects in the paper's order (`CANONICAL_ASPECTS`), others after it.

    Args:
        aspects: Aspect names, repeats allowed.

    Returns:
        The distinct names: the canonical ones first, then the rest alphabetically.
    """
    present = set(aspects)
    return [a for a in CANONICAL_ASPECTS if a in present] + sorted(present - set(CANONICAL_ASPECTS))


def ratings_per_completion_aspect(aspect_annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per (prompt_id, completion_idx, aspect) with the shuffles folded together.

    rating: mean of the non-null ratings over shuffles (NaN when none);
    status: "rated" when any shuffle gave a rating, else "na" when any shuffle said N/A,
    else "failed" (parse or call error in every shuffle). Each completion thus counts once
    per aspect however many shuffles were run.

    Args:
        aspect_annotations: Aspect ratings, one row per shuffle (the completion key,
            aspect, rating and is_na).

    Returns:
        The folded table: the completion key, aspect, rating and status.
    """
    keys = [*COMPLETION_KEY, "aspect"]
    work = aspect_annotations.loc[:, keys].copy()
    work["rating"] = as_float(aspect_annotations["rating"])
    work["is_na"] = aspect_annotations["is_na"].fillna(False).astype(bool)
    folded = work.groupby(keys, sort=True, as_index=False).agg(
        rating=("rating", "mean"), any_na=("is_na", "any")
    )
    folded["status"] = np.where(
        folded["rating"].notna(), "rated", np.where(folded["any_na"], "na", "failed")
    )
    return folded.drop(columns="any_na")


def attach_model(
    frame: pd.DataFrame,
    completions: pd.DataFrame,
    dataset: str,
    columns: Sequence[str] = ("model",),
) -> pd.DataFrame:
    """Add each row's completion model (and the completion's other `columns`). A row whose
    completion is unknown means the inputs come from different runs, which would silently
    skew every per-model number: fail.

    Args:
        frame: Rows keyed by completion (prompt_id, completion_idx).
        completions: The completions, with those columns.
        dataset: The name of `frame`'s table, for the error.
        columns: The completion columns to add.

    Returns:
        `frame` with `columns` added.

    Raises:
        InputError: A completion key repeats in `completions`, or a row of `frame` has
            no completion.
    """
    models = completions.loc[:, [*COMPLETION_KEY, *columns]]
    require_unique_key(models, COMPLETION_KEY, "completions")
    merged = frame.merge(models, on=list(COMPLETION_KEY), how="left", indicator=True)
    orphans = merged[merged["_merge"] == "left_only"]
    if not orphans.empty:
        row = orphans.iloc[0]
        raise InputError(
            f"{dataset}: (prompt_id, completion_idx) = ({row['prompt_id']!r}, "
            f"{row['completion_idx']}) has no row in completions ({len(orphans)} such rows)"
        )
    return merged.drop(columns="_merge")


def completion_chunks(
    completions: Table,
    columns: Sequence[str],
    others: Mapping[str, tuple[Table, Sequence[str]]],
    prompts_per_chunk: int = CHUNK_PROMPTS,
    *,
    unmatched_ok: Sequence[str] = (),
) -> Iterator[tuple[pd.DataFrame, dict[str, pd.DataFrame]]]:
    """`completions` (its `columns`) a chunk of whole prompts at a time, each chunk with its
    prompts' rows of every table in `others` (name -> (table, columns)): a table on disk in
    prompt order is read in step, so the walk holds one chunk of each table. Once the walk
    is over, a table with rows of prompts that no completion has fails by name (the inputs
    come from different runs: those rows would silently count nowhere), unless it is named
    in `unmatched_ok` (scores looked up per completion: a version chosen with
    `--load-versions` is taken as asked for).

    Args:
        completions: The completions table, in memory or on disk.
        columns: The completion columns to read.
        others: The tables to read in step, name -> (table, columns).
        prompts_per_chunk: How many prompts a chunk holds.
        unmatched_ok: Names in `others` whose rows need not all have a completion.

    Yields:
        Each chunk of completions with {name: that chunk's prompts' rows of the table}.

    Raises:
        InputError: A table in `others` (not in `unmatched_ok`) has rows of prompts that
            no completion has.
    """
    readers = {name: rows_by_prompt(table, wanted) for name, (table, wanted) in others.items()}
    seen = dict.fromkeys(others, 0)
    for chunk in table_chunks(completions, prompts_per_chunk, list(columns)):
        prompts = chunk["prompt_id"].unique()
        last = chunk["prompt_id"].max() if len(chunk) else ""
        rows = {}
        for name, reader in readers.items():
            found = reader(prompts, last)
            rows[name] = found[found["prompt_id"].isin(prompts).to_numpy()]
            seen[name] += len(rows[name])
        yield chunk, rows
    for name, (table, _) in others.items():
        if name in unmatched_ok:
            continue
        unmatched = (len(table) if isinstance(table, pd.DataFrame) else table.num_rows) - seen[name]
        if unmatched:
            row = _first_orphan(table, completions)
            raise InputError(
                f"{name}: (prompt_id, completion_idx) = ({row['prompt_id']!r}, "
                f"{row['completion_idx']}) has no row in completions ({unmatched} such rows: "
                "the inputs come from different runs)"
            )


def _first_orphan(table: Table, completions: Table) -> pd.Series:
    """The first row of `table` whose prompt no completion has (on the error path only:
    it holds every prompt id)."""
    prompts = set(as_frame(completions, ["prompt_id"])["prompt_id"])
    for batch in table_batches(table, list(COMPLETION_KEY)):
        orphans = batch[~batch["prompt_id"].isin(prompts)]
        if len(orphans):
            return orphans.iloc[0]
    raise AssertionError("unreachable: a row count without its row")
