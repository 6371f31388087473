"""The cost table's token totals, read a chunk of prompts at a time.

Each chunk of completions meets its prompts' rows of the judge tables and of
`overall_scores` (`parquet_source.rows_by_prompt`), so the tally holds one chunk of each
table, never the judge replies or texts of the whole run. What outlives a chunk is the
sums per group and a 64-bit hash per judge request counted (8 bytes a call), because
identical requests are sent once wherever they occur in the run and only the first copy
counts.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from llm_feedback.core.errors import InputError
from llm_feedback.reporting.cache_prices import CACHE_COLUMNS
from llm_feedback.reporting.costs import (
    TOKEN_COLUMNS,
    aspect_call_identities,
    critique_identities,
    estimate_missing_usage,
    request_texts,
    rescore_usage,
)
from llm_feedback.storage.parquet_source import (
    CHUNK_PROMPTS,
    ParquetSource,
    rows_by_prompt,
    table_chunks,
)
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

Table = pd.DataFrame | ParquetSource
GROUP = ["stage", "endpoint", "backend", "model", "mode"]
JUDGE = ["judge_endpoint", "judge_backend", "judge_model"]
COMPLETION_COLUMNS = (
    "prompt_id",
    "completion_idx",
    "model",
    "endpoint",
    "backend",
    *TOKEN_COLUMNS,
    *CACHE_COLUMNS,
    "via_batch",
    "error",
    "instruction",
    "response",
    "principle",
    "system_prompt",
    "world_knowledge",
)
_JUDGED = (
    "prompt_id",
    "completion_idx",
    *JUDGE,
    "judge_via_batch",
    *TOKEN_COLUMNS,
    *CACHE_COLUMNS,  # absent from tables written before them: none counted
    "raw_reply",
)
ASPECT_COLUMNS = (*_JUDGED, "aspect", "shuffle_idx", "position", "suspected_injection")
CRITIQUE_COLUMNS = (*_JUDGED, "suspected_injection")
SCORE_COLUMNS = ("prompt_id", "completion_idx", *TOKEN_COLUMNS, *CACHE_COLUMNS)
# What the tally sums per group.
SUMS = (*TOKEN_COLUMNS, *CACHE_COLUMNS, "estimated_rows")


@dataclass
class _Tally:
    codes: dict[tuple[Hashable, ...], int] = field(default_factory=dict)
    totals: dict[int, np.ndarray] = field(default_factory=dict)  # group -> `SUMS` sums
    # Per stage, the request hashes of the calls counted so far, sorted: 8 bytes a call.
    sent: dict[str, np.ndarray] = field(default_factory=dict)

    def group_codes(self, stage: str, keys: pd.DataFrame) -> np.ndarray:
        """A code per row of `keys` (endpoint, backend, model, mode) for its group."""
        local = keys.groupby(list(keys.columns), dropna=False, sort=False).ngroup().to_numpy()
        _, first = np.unique(local, return_index=True)
        heads = keys.iloc[first].astype(object).where(keys.iloc[first].notna(), None)
        mapping = np.array(
            [
                self.codes.setdefault((stage, *head), len(self.codes))
                for head in heads.itertuples(index=False, name=None)
            ],
            dtype="int64",
        )
        return mapping[local]

    def add(self, stage: str, keys: pd.DataFrame, tokens: np.ndarray) -> None:
        """Rows counted as they are (no copies among them)."""
        codes = self.group_codes(stage, keys)
        for code in np.unique(codes):
            self._add_total(int(code), tokens[codes == code].sum(axis=0))

    def add_calls(
        self, stage: str, identities: np.ndarray, keys: pd.DataFrame, tokens: np.ndarray
    ) -> None:
        """Calls counted only if no earlier call (in this chunk or before) made the same
        request: a copy was answered from the first and cost nothing."""
        sent = self.sent.get(stage, np.empty(0, dtype="uint64"))
        _, first = np.unique(identities, return_index=True)
        first = first[~_sorted_contains(sent, identities[first])]
        self.add(stage, keys.iloc[first], tokens[first])
        # Two sorted runs: the stable sort merges them in one pass.
        self.sent[stage] = np.sort(np.concatenate([sent, identities[first]]), kind="stable")

    def _add_total(self, code: int, sums: np.ndarray) -> None:
        self.totals[code] = self.totals.get(code, np.zeros(len(SUMS))) + sums

    def table(self) -> pd.DataFrame:
        keys = {code: key for key, code in self.codes.items()}
        rows = [(*keys[code], *sums) for code, sums in self.totals.items()]
        table = pd.DataFrame(rows, columns=[*GROUP, *SUMS])
        table["estimated_rows"] = table["estimated_rows"].astype("int64")
        return table


def _sorted_contains(ordered: np.ndarray, values: np.ndarray) -> np.ndarray:
    if not len(ordered):
        return np.zeros(len(values), dtype=bool)
    where = np.searchsorted(ordered, values)
    return (where < len(ordered)) & (ordered[np.minimum(where, len(ordered) - 1)] == values)


def _modes(frame: pd.DataFrame, column: str) -> np.ndarray:
    """online | batch per row; data written before batch mode existed is online."""
    if column not in frame.columns:
        return np.full(len(frame), "online", dtype=object)
    return np.where(frame[column].fillna(False).astype(bool), "batch", "online")


def _tokens(frame: pd.DataFrame) -> np.ndarray:
    """The `SUMS` of each row: a cache count the row does not record counts 0."""
    caches = [
        frame[column].to_numpy(dtype="float64", na_value=0.0)
        if column in frame.columns
        else np.zeros(len(frame))
        for column in CACHE_COLUMNS
    ]
    return np.column_stack(
        [frame[column].to_numpy(dtype="float64") for column in TOKEN_COLUMNS]
        + caches
        + [frame["usage_estimated"].to_numpy(dtype="float64")]
    )


def _judge_keys(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "endpoint": frame["judge_endpoint"].to_numpy(),
            "backend": frame["judge_backend"].to_numpy(),
            "model": frame["judge_model"].to_numpy(),
            "mode": _modes(frame, "judge_via_batch"),
        }
    )


def usage_totals(
    completions: Table,
    aspect_annotations: Table,
    critiques: Table,
    overall_scores: Table | None = None,
    prompts_per_chunk: int = CHUNK_PROMPTS,
    *,
    templates: Templates = PACKAGE_TEMPLATES,
) -> pd.DataFrame:
    """Tokens per (stage, endpoint, backend, model, mode), summed over the requests sent
    (estimated where a reply had no usage, from the judge requests rebuilt with
    `templates`): columns `GROUP`, prompt_tokens, completion_tokens, cached_prompt_tokens,
    cache_write_tokens (float sums of the rows' shares) and estimated_rows.

    Args:
        completions: The run's completions (the generate stage's rows).
        aspect_annotations: The aspect annotations.
        critiques: The critiques.
        overall_scores: The score fix's table, whose re-scores count in the critique stage
            (None: none).
        prompts_per_chunk: Prompts read at a time from tables on disk.
        templates: The prompt templates the run's judge requests were rendered from.

    Returns:
        The token totals per group.
    """
    tally = _Tally()
    aspect_rows = rows_by_prompt(aspect_annotations, ASPECT_COLUMNS)
    critique_rows = rows_by_prompt(critiques, CRITIQUE_COLUMNS)
    score_rows = None
    if overall_scores is not None and set(TOKEN_COLUMNS) <= set(overall_scores.columns):
        score_rows = rows_by_prompt(overall_scores, SCORE_COLUMNS)
    seen = {"aspect_annotations": 0, "critiques": 0}
    for chunk in table_chunks(completions, prompts_per_chunk, COMPLETION_COLUMNS):
        prompts = chunk["prompt_id"].unique()
        last = chunk["prompt_id"].max() if len(chunk) else ""
        keys = chunk.loc[:, ["endpoint", "backend", "model"]]
        counts = [c for c in (*TOKEN_COLUMNS, *CACHE_COLUMNS) if c in chunk.columns]
        generated = estimate_missing_usage("generate", chunk.loc[:, counts], chunk)
        tally.add("generate", keys.assign(mode=_modes(chunk, "via_batch")), _tokens(generated))
        texts = request_texts(chunk)  # what the judge requests showed, for their identities

        aspects = estimate_missing_usage(
            "annotate", _of(aspect_rows(prompts, last), prompts), chunk, templates
        )
        seen["aspect_annotations"] += len(aspects)
        if len(aspects):
            codes, first, identities = aspect_call_identities(aspects, texts)
            per_call = np.column_stack(
                [np.bincount(codes, weights=column) for column in _tokens(aspects).T]
            )
            tally.add_calls("annotate", identities, _judge_keys(aspects.iloc[first]), per_call)

        judged = estimate_missing_usage(
            "critique", _of(critique_rows(prompts, last), prompts), chunk, templates
        )
        seen["critiques"] += len(judged)
        if len(judged):
            identities = critique_identities(judged, texts)
            tally.add_calls("critique", identities, _judge_keys(judged), _tokens(judged))
        if score_rows is not None:
            rescores = rescore_usage(score_rows(prompts, last), judged)
            if rescores is not None:
                tally.add("critique", rescores.loc[:, GROUP[1:]], _tokens(rescores))
    for name, table in (("aspect_annotations", aspect_annotations), ("critiques", critiques)):
        unmatched = _row_count(table) - seen[name]
        if unmatched:
            raise InputError(
                f"{name}: {unmatched} row(s) have no completion in completions (the inputs "
                "come from different runs): their cost would go uncounted"
            )
    return tally.table()


def _of(rows: pd.DataFrame, prompts: np.ndarray) -> pd.DataFrame:
    """`rows` of the chunk's prompts: a row of no completion's prompt is counted as
    unmatched, whichever way the table is read."""
    return rows[rows["prompt_id"].isin(prompts).to_numpy()]


def _row_count(table: Table) -> int:
    return len(table) if isinstance(table, pd.DataFrame) else table.num_rows
