"""The UltraFeedback-shaped export: one record per prompt, its completions nested inside.

Field names, types and value conventions are the public openbmb/UltraFeedback dataset's
(`schema.ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA`): `source`, `instruction`, `models`,
`completions`, `correct_answers`, `incorrect_answers` (lists of strings, empty when the
prompt's source has none). Ratings are strings ("4" or "N/A"); truthfulness and
helpfulness carry "Type" codes with the type rationale under "Rationale" and the rating
rationale under "Rationale For Rating"; `overall_score` is the fixed score. The file is
written with one explicit Arrow schema (`schema.ultrafeedback_arrow_schema`: the public
columns, and ours for the aspects the run rated), so `datasets.concatenate_datasets`
accepts it together with the public data.

Ours, as extra top-level columns (inside `completions` an extra field would change the
list's type and `concatenate_datasets` would refuse it; extra top-level columns it takes,
null in the public rows; `to_public` drops them):

- `prompt_id`, so records join back to the long tables;
- `annotation_status`: per completion (in the order of `completions`), each aspect's
  `parse_status` word (`ok`, `na`, `no_match`, `call_failed`, ...; see
  `replies/status.py`), so a null `Rating` says why it is null; null where the aspect was
  not annotated at all (not configured, or the completion has no response);
- `extra_annotations`: per completion, the rated aspects beyond the public four (e.g.
  harmlessness, or an aspect of your own in `aspects.ASPECTS`); the column is there only
  when the run rated such an aspect, so the schema never grows for aspects left unrated;
- `shuffle_ratings`: per completion, each aspect's rating in every shuffle (see below).

The public format has room for one rating per aspect, and UltraFeedback's readers take it
as `int(Rating)`: with several shuffles (`n_shuffles`) `Rating` is therefore always an
integer string ("1".."5") or "N/A", the rating of the earliest shuffle that gave a number
(else of the earliest N/A), shown with that shuffle's rationale and types. Every shuffle's
rating, in shuffle order, is kept in the top-level `shuffle_ratings` column (per completion,
per aspect: a list of "1".."5", "N/A", or null for a shuffle without a usable reply). All
shuffles stay in `aspect_annotations`, and `fine-grained_score` averages every shuffle (see
below), so where shuffles disagree it is not the mean of the integers shown.

Rule for `fine-grained_score`: the mean of the completion's aspect ratings (from
`overall_scores`), and null when any aspect it averages failed for that completion, that is
when its status is anything other than `ok` or `na` (no usable rating in any shuffle, or no
judgment at all). A mean over the aspects that happened to come back would read like the
public score while averaging fewer, different aspects. `overall_scores` keeps its
best-effort mean (it only flags a completion for the score fix; `no_fine_grained` marks
the empty ones).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from llm_feedback.annotation.aspects import ASPECTS, NOT_APPLICABLE, get_aspect
from llm_feedback.annotation.plain_values import float_or_none, plain, row_dicts, string_list
from llm_feedback.annotation.score_fix import require_columns
from llm_feedback.core.errors import ConfigError
from llm_feedback.replies.status import READ
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.schema import (
    ANSWER_LIST_COLUMNS,
    COMPLETION_KEY,
    ULTRAFEEDBACK_ASPECTS,
    ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
    ULTRAFEEDBACK_TYPED_ASPECTS,
    SchemaFrame,
    pandas_dtypes,
    schema_frame,
    ultrafeedback_arrow_schema,
)
from llm_feedback.storage.spool import ChunkedParquet

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


# An aspect's name is a field of the export (and of `aspect_<name>` template files).
_ASPECT_NAME = re.compile(r"[a-z][a-z0-9_]*")


def export_problem(aspect: str) -> str | None:
    """Why the UltraFeedback export cannot hold ratings of `aspect` (None: it can).

    Any aspect of the registry (`aspects.ASPECTS`) is exported, the standard four in the
    public `annotations` and the others in `extra_annotations`, as long as its entry is
    keyed by its own name, that name is a lower-case word, and an aspect named as a public
    one has the public field's shape (type codes for truthfulness and helpfulness only).

    Args:
        aspect: the aspect's name.

    Returns:
        The reason, in words, or None.
    """
    spec = ASPECTS.get(aspect)
    if spec is None:
        return f"unknown aspect {aspect!r}; expected one of {', '.join(ASPECTS)}"
    if spec.name != aspect:
        return f"aspect {aspect!r} is registered under another name than its own ({spec.name!r})"
    if not _ASPECT_NAME.fullmatch(aspect):
        return (
            f"aspect {aspect!r}: the export needs a lower-case word (letters, digits, _) "
            "as its name"
        )
    if aspect in ULTRAFEEDBACK_ASPECTS:
        public_typed = aspect in ULTRAFEEDBACK_TYPED_ASPECTS
        if spec.has_types != public_typed:
            return (
                f"aspect {aspect!r} {'has' if spec.has_types else 'has no'} type codes, but "
                f"the public UltraFeedback field {aspect} {'has' if public_typed else 'has none'}"
                ": the export cannot hold it (give your aspect another name)"
            )
    return None


def check_exportable(aspects: Sequence[str], where: str = "annotate.aspects") -> None:
    """Raise ConfigError naming the first aspect of `aspects` that the export cannot hold.

    Args:
        aspects: the aspects a run is to rate.
        where: the parameter that named them, for the message.
    """
    for aspect in aspects:
        problem = export_problem(aspect)
        if problem is not None:
            raise ConfigError(f"{where}: {problem}")


def export_aspects(aspects: Sequence[str]) -> dict[str, bool]:
    """The extra aspects of an export that rates `aspects` ({aspect: has type codes}, in
    registry order): those beyond the public four.

    Args:
        aspects: the aspects the run rates.

    Returns:
        {aspect: whether it has type codes} for the rated aspects beyond the public four.
    """
    chosen = set(aspects)
    return {
        name: spec.has_types
        for name, spec in ASPECTS.items()
        if name in chosen and name not in ULTRAFEEDBACK_ASPECTS
    }


def export_schema(aspects: Sequence[str]) -> pa.Schema:
    """The Arrow schema of the export of a run that rates `aspects`.

    Args:
        aspects: the aspects the run rates.

    Returns:
        The public columns plus a rating field and a status for each extra aspect.
    """
    return ultrafeedback_arrow_schema(export_aspects(aspects))


def _rating_string(row: dict[str, Any] | None) -> str | None:
    """ "4" as in the public data (ratings are whole numbers 1-5), or "N/A"."""
    if row is None or row["parse_status"] not in READ:
        return None
    if bool(row["is_na"]):
        return NOT_APPLICABLE
    rating = float_or_none(row["rating"])
    return None if rating is None else str(round(rating))


def _annotation(aspect: str, row: dict[str, Any] | None) -> dict[str, Any]:
    """One aspect's annotation; all fields null when the aspect has no usable rating row."""
    rationale = plain(row["rationale"]) if row else None
    if not get_aspect(aspect).has_types:
        return {"Rating": _rating_string(row), "Rationale": rationale}
    return {
        "Rating": _rating_string(row),
        "Rationale": plain(row["type_rationale"]) if row else None,
        "Rationale For Rating": rationale,
        "Type": string_list(row["types"]) if row else [],
    }


def _shown_aspect_rows(aspect_df: pd.DataFrame) -> pd.DataFrame:
    """Per (prompt_id, completion_idx, aspect), the one annotation the public format has
    room for: the earliest shuffle with a number, else the earliest N/A, else the earliest
    shuffle (whose status then says why there is no rating)."""
    keys = [*COMPLETION_KEY, "aspect"]
    usable = aspect_df["parse_status"].isin(READ).to_numpy(dtype=bool)
    has_number = usable & aspect_df["rating"].notna().to_numpy(dtype=bool)
    preference = np.where(has_number, 0, np.where(usable, 1, 2))
    ranked = aspect_df[_ASPECT_COLUMNS].assign(preference=preference)
    chosen = ranked.sort_values(["preference", "shuffle_idx"], kind="stable")
    return chosen.drop_duplicates(keys).drop(columns="preference")


def _shuffle_ratings(aspect_df: pd.DataFrame) -> dict[tuple[str, int, str], list[str | None]]:
    """Per (prompt_id, completion_idx, aspect), the rating string of each shuffle in order."""
    ordered = aspect_df[_ASPECT_COLUMNS].sort_values("shuffle_idx", kind="stable")
    ratings: dict[tuple[str, int, str], list[str | None]] = {}
    for row in row_dicts(ordered):
        key = (row["prompt_id"], int(row["completion_idx"]), row["aspect"])
        ratings.setdefault(key, []).append(_rating_string(row))
    return ratings


# Prompts whose records are Python dicts at once while the export is built.
_PROMPTS_PER_CHUNK = 2_000  # records built at once when written


def _status(row: dict[str, Any] | None) -> str | None:
    return None if row is None else plain(row["parse_status"])


class _FrameRows:
    """An in-memory table read like a `ParquetSource`."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.columns = list(frame.columns)

    def read(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        if columns is None:
            return self.frame
        return self.frame[[name for name in columns if name in self.frame.columns]]

    def rows_of(
        self, column: str, values: Sequence[Any], columns: Sequence[str] | None = None
    ) -> pd.DataFrame:
        return self.read(columns)[self.frame[column].isin(values).to_numpy(dtype=bool)]

    def distinct(self, column: str) -> list[Any]:
        return list(self.frame[column].unique())


Rows = ParquetSource | _FrameRows


def _rows(table: pd.DataFrame | ParquetSource) -> Rows:
    return table if isinstance(table, ParquetSource) else _FrameRows(table)


_SCORE_COLUMNS = [*COMPLETION_KEY, "fine_grained_score", "overall_score_fixed"]


def _record_chunks(
    completions_table: pd.DataFrame | ParquetSource,
    aspect_table: pd.DataFrame | ParquetSource,
    critique_table: pd.DataFrame | ParquetSource,
    overall_scores_table: pd.DataFrame | ParquetSource,
    aspects: Sequence[str] | None,
    *,
    per_chunk: int = _PROMPTS_PER_CHUNK,
) -> tuple[Callable[[], Iterator[list[dict[str, Any]]]], int, pa.Schema]:
    """What `to_ultrafeedback_records` returns, as a function that yields the records
    `per_chunk` prompts at a time. The inputs are checked now (a bad one fails
    before anything is built); each chunk reads only its prompts' rows of the judge tables,
    which may stay on disk (`ParquetSource`); with the number of prompts and the Arrow
    schema of the records.

    Completions on disk in prompt order are streamed: read a chunk at a time, and each
    judge table in prompt order read on in step with them (`KeyOrderedReader`), so that
    memory holds one chunk of every table whatever the number of prompts.

    Only one chunk's rows become Python dicts at once: at UltraFeedback scale the records
    of all prompts, and a dict per aspect row, would take gigabytes.
    """
    aspect_rows_of, critique_rows_of = _rows(aspect_table), _rows(critique_table)
    completion_rows_of, score_rows_of = _rows(completions_table), _rows(overall_scores_table)
    require_columns(completion_rows_of, _COMPLETION_COLUMNS, "completions")
    require_columns(aspect_rows_of, _ASPECT_COLUMNS, "aspect_annotations")
    require_columns(critique_rows_of, [*COMPLETION_KEY, "critique"], "critiques")
    require_columns(score_rows_of, _SCORE_COLUMNS, "overall_scores")
    present = set(aspect_rows_of.distinct("aspect")) | set(aspects or ())
    annotated = [name for name in ASPECTS if name in present]
    for unknown in sorted(present - set(annotated)):
        get_aspect(unknown)  # raises ConfigError naming the unknown aspect
    # `params.annotate` refused these before any call; a table judged elsewhere is checked here.
    check_exportable(annotated, "aspect_annotations")
    extras = list(export_aspects(annotated))
    # The aspects the fine-grained score averages (params.annotate.fine_grained_aspects).
    averaged = [name for name in annotated if name in ULTRAFEEDBACK_ASPECTS] or annotated
    answer_columns = [c for c in ANSWER_LIST_COLUMNS if c in completion_rows_of.columns]
    completion_columns = [*_COMPLETION_COLUMNS, *answer_columns]
    streamed = isinstance(completions_table, ParquetSource) and completions_table.in_key_order()
    if streamed:
        prompt_count = completions_table.distinct_count("prompt_id")
    else:
        prompt_order = pd.Index(completion_rows_of.read(["prompt_id"])["prompt_id"].unique())
        prompt_count = len(prompt_order)

    def prompt_chunks() -> Iterator[tuple[pd.Index, pd.DataFrame | None]]:
        """Each chunk's prompts, with its completions when they were read with them."""
        if streamed:
            for chunk in completions_table.key_chunks(per_chunk, completion_columns):
                yield pd.Index(chunk["prompt_id"].unique()), chunk
            return
        for start in range(0, len(prompt_order), per_chunk):
            yield prompt_order[start : start + per_chunk], None

    def chunk_rows(rows: pd.DataFrame, prompts: pd.Index, *then: str) -> pd.DataFrame:
        """The chunk's `rows`, in prompt order, then by the columns `then`."""
        rank = prompts.get_indexer(rows["prompt_id"])
        order = np.lexsort([*(rows[c].to_numpy() for c in reversed(then)), rank])
        return rows.iloc[order[rank[order] >= 0]]

    def chunks() -> Iterator[list[dict[str, Any]]]:
        aspect_rows_in = _rows_in_step(aspect_rows_of, _ASPECT_COLUMNS, streamed)
        critique_rows_in = _rows_in_step(critique_rows_of, [*COMPLETION_KEY, "critique"], streamed)
        score_rows_in = _rows_in_step(score_rows_of, _SCORE_COLUMNS, streamed)
        for prompts, streamed_completions in prompt_chunks():
            chunk_aspects = chunk_rows(aspect_rows_in(prompts), prompts)
            shown = _shown_aspect_rows(chunk_aspects)
            aspect_rows = {
                (row["prompt_id"], int(row["completion_idx"]), row["aspect"]): row
                for row in row_dicts(shown)
            }
            critique_rows = chunk_rows(critique_rows_in(prompts), prompts)
            critiques = {
                (row["prompt_id"], int(row["completion_idx"])): plain(row["critique"])
                for row in row_dicts(critique_rows)
            }
            overall_scores = {
                (row["prompt_id"], int(row["completion_idx"])): row
                for row in row_dicts(chunk_rows(score_rows_in(prompts), prompts))
            }
            rows = (
                completion_rows_of.rows_of("prompt_id", list(prompts), completion_columns)
                if streamed_completions is None
                else streamed_completions
            )
            completions = chunk_rows(rows, prompts, "completion_idx")
            yield _records(
                prompts,
                completions,
                aspect_rows=aspect_rows,
                shuffle_ratings=_shuffle_ratings(chunk_aspects),
                critiques=critiques,
                overall_scores=overall_scores,
                annotated=annotated,
                averaged=averaged,
                extras=extras,
            )

    return chunks, prompt_count, export_schema(annotated)


def _rows_in_step(
    table: Rows, columns: Sequence[str], streamed: bool
) -> Callable[[pd.Index], pd.DataFrame]:
    """`rows(prompts)`: `table`'s rows of a chunk's `prompts` (more, when read on in step:
    the caller keeps the chunk's). Streamed chunks come in prompt order, so a table on disk
    in that order is read on from where the last chunk stopped."""
    if streamed and isinstance(table, ParquetSource) and table.in_key_order():
        reader = table.key_reader(columns)
        return lambda prompts: reader.through(prompts.max())
    return lambda prompts: table.rows_of("prompt_id", list(prompts), columns)


def _records(
    prompts: pd.Index,
    completions: pd.DataFrame,
    *,
    aspect_rows: dict[tuple[str, int, str], dict[str, Any]],
    shuffle_ratings: dict[tuple[str, int, str], list[str | None]],
    critiques: dict[tuple[str, int], Any],
    overall_scores: dict[tuple[str, int], dict[str, Any]],
    annotated: Sequence[str],
    averaged: Sequence[str],
    extras: Sequence[str],
) -> list[dict[str, Any]]:
    """The records of `prompts`, from their rows of each table: the public four aspects
    always, and the rated `extras` beyond them."""
    all_aspects = (*ULTRAFEEDBACK_ASPECTS, *extras)
    records: dict[Any, dict[str, Any]] = {prompt_id: {} for prompt_id in prompts}
    for row in row_dicts(completions):
        key = (row["prompt_id"], int(row["completion_idx"]))
        record = records[row["prompt_id"]]
        if not record:
            record.update(
                prompt_id=row["prompt_id"],
                source=plain(row["source"]),
                instruction=plain(row["instruction"]),
                models=[],
                completions=[],
                **{column: string_list(row.get(column)) for column in ANSWER_LIST_COLUMNS},
                **({"extra_annotations": []} if extras else {}),
                annotation_status=[],
                shuffle_ratings=[],
            )
        used = {
            aspect: aspect_rows.get((*key, aspect)) if aspect in annotated else None
            for aspect in all_aspects
        }
        status = {aspect: _status(used[aspect]) for aspect in all_aspects}
        scores = overall_scores.get(key, {})
        failed = any(status[aspect] not in READ for aspect in averaged)
        record["models"].append(plain(row["model"]))
        record["completions"].append(
            {
                "model": plain(row["model"]),
                "principle": plain(row["principle"]),
                "custom_system_prompt": plain(row["system_prompt"]),
                "response": plain(row["response"]),
                "annotations": {
                    aspect: _annotation(aspect, used[aspect]) for aspect in ULTRAFEEDBACK_ASPECTS
                },
                "critique": critiques.get(key),
                "overall_score": float_or_none(scores.get("overall_score_fixed")),
                "fine-grained_score": (
                    None if failed else float_or_none(scores.get("fine_grained_score"))
                ),
            }
        )
        if extras:
            record["extra_annotations"].append(
                {aspect: _annotation(aspect, used[aspect]) for aspect in extras}
            )
        record["annotation_status"].append(status)
        record["shuffle_ratings"].append(
            {
                aspect: shuffle_ratings.get((*key, aspect), []) if aspect in annotated else []
                for aspect in all_aspects
            }
        )
    return list(records.values())


def to_ultrafeedback_records(
    completions_df: pd.DataFrame,
    aspect_df: pd.DataFrame | ParquetSource,
    critiques_df: pd.DataFrame | ParquetSource,
    overall_scores_df: pd.DataFrame,
    aspects: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One record per prompt (in first-seen order), completions ordered by completion_idx.

    Every record has every field of `export_schema(annotated)`: all four public aspects
    (null fields where a completion has no rating, also when no call was answered at all),
    the annotated aspects beyond them and a status for each. The annotated aspects are
    `aspects` (default: none) plus those present in `aspect_df`. `correct_answers` /
    `incorrect_answers` come from `completions_df` when it has them, else they are empty.
    For a whole run, `ultrafeedback_export` builds the same table without holding every
    record.

    Args:
        completions_df: the run's completions.
        aspect_df: the aspect annotations (a table or a Parquet version on disk).
        critiques_df: the critiques (a table or a Parquet version on disk).
        overall_scores_df: the overall scores.
        aspects: aspects to export besides those in `aspect_df` (default: none).

    Returns:
        One UltraFeedback record (a dict) per prompt.
    """
    chunks, _, _ = _record_chunks(
        completions_df, aspect_df, critiques_df, overall_scores_df, aspects
    )
    return [record for chunk in chunks() for record in chunk]


def records_schema(records: Sequence[dict[str, Any]]) -> pa.Schema:
    """The Arrow schema of `to_ultrafeedback_records`' records: the aspects they hold a
    status for (the public four when there is no completion).

    Args:
        records: records of `to_ultrafeedback_records`.

    Returns:
        Their export schema (`export_schema` of the aspects they hold).
    """
    statuses = next((s for record in records for s in record["annotation_status"]), {})
    return export_schema(list(statuses))


def ultrafeedback_frame(records: Sequence[dict[str, Any]]) -> SchemaFrame:
    """The records as a DataFrame whose `to_parquet` writes their export schema.

    Args:
        records: records of `to_ultrafeedback_records`.

    Returns:
        The records, one row per prompt, typed by `records_schema`.
    """
    return schema_frame(records, records_schema(records))


class UltraFeedbackExport(ChunkedParquet):
    """The records of `to_ultrafeedback_records`, built a chunk of prompts at a time
    straight into Arrow when written (`ChunkedParquet`): `to_parquet` writes the same file
    as `ultrafeedback_frame(records).to_parquet` (pandas metadata included) holding one
    chunk; `frame()` is the whole table as a `SchemaFrame`."""

    def __init__(
        self,
        chunks: Callable[[], Iterator[list[dict[str, Any]]]],
        prompts: int,
        arrow_schema: pa.Schema,
    ):
        """Keep what builds the records; nothing is read until written.

        Args:
            chunks: makes the records again, a list per chunk of prompts, on each call.
            prompts: how many prompts (records) there are.
            arrow_schema: the export schema the records are written with.
        """
        self._chunks = chunks
        self._prompts = prompts
        self.arrow_schema = arrow_schema

    def __len__(self) -> int:
        return self._prompts

    def arrow_chunks(self) -> Iterator[pa.Table]:
        for records in self._chunks():
            yield pa.Table.from_pylist(records, schema=self.arrow_schema)

    def frame(self) -> SchemaFrame:
        """The whole export: nested columns Arrow-backed (`pd.ArrowDtype`), not Python
        lists and dicts, which at UltraFeedback scale would take gigabytes."""
        table = pa.concat_tables([self.arrow_schema.empty_table(), *self.arrow_chunks()])
        frame = SchemaFrame(
            {
                name: table.column(name).to_pandas()
                if dtype != "object"
                # the chunks as they are: combining them would copy every completion's text
                else pd.Series(pd.arrays.ArrowExtensionArray(table.column(name)))
                for name, dtype in pandas_dtypes(self.arrow_schema).items()
            }
        )
        frame.arrow_schema = self.arrow_schema
        return frame


def ultrafeedback_export(
    completions: pd.DataFrame | ParquetSource,
    aspect_df: pd.DataFrame | ParquetSource,
    critiques_df: pd.DataFrame | ParquetSource,
    overall_scores: pd.DataFrame | ParquetSource,
    aspects: Sequence[str] | None = None,
    *,
    prompts_per_chunk: int = _PROMPTS_PER_CHUNK,
) -> UltraFeedbackExport:
    """The export of `to_ultrafeedback_records`'s records, checked now and built when
    written (`UltraFeedbackExport`). Every table may stay on disk (`ParquetSource`): each
    chunk of prompts reads only its rows, and completions in prompt order are streamed.

    Args:
        completions: the run's completions.
        aspect_df: the aspect annotations.
        critiques_df: the critiques.
        overall_scores: the overall scores.
        aspects: aspects to export besides those in `aspect_df` (default: none).
        prompts_per_chunk: how many prompts' records are built at a time.

    Returns:
        The export, built a chunk at a time when written.
    """
    chunks, prompts, schema = _record_chunks(
        completions, aspect_df, critiques_df, overall_scores, aspects, per_chunk=prompts_per_chunk
    )
    return UltraFeedbackExport(chunks, prompts, schema)


def to_public(data: Any) -> Any:
    """The export with only the public openbmb/UltraFeedback columns, with their types.

    - a `datasets.Dataset` (anything with `select_columns`), e.g. from
      `load_dataset("parquet", data_files=...)`: the same with the public columns;
    - a `pyarrow.Table` or a pandas DataFrame (`pd.read_parquet` of the file, or
      `ultrafeedback_frame`): a `pyarrow.Table` with `ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA`.

    `concatenate_datasets` takes the export as it is too (our extra columns come out null
    in the public rows); this gives exactly the public features.

    Args:
        data: the export as a `datasets.Dataset`, a `pyarrow.Table` or a DataFrame.

    Returns:
        The same kind of object for a Dataset, else a `pyarrow.Table`, public columns only.
    """
    names = ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA.names
    if hasattr(data, "select_columns"):
        return data.select_columns(names)
    if isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(
            data[names], schema=ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA, preserve_index=False
        )
    return data.select(names).cast(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)
