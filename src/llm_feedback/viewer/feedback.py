"""The annotate run's judgment site: one record per prompt (instruction, completions with
model, principle, critique, overall score and fix action, each aspect's ratings and
rationales per shuffle with the position each completion was shown at) and an index row per
prompt for the filters and the sortable columns: the completions' mean overall and
fine-grained scores, the spread of their mean ratings, how far one completion's rating on
one aspect moves between shuffles, and the prompt's flags. Aspects are listed in
UltraFeedback's order, any other aspect after them alphabetically. The full-text index
covers the instruction (and id), the responses, the aspect rationales and the critiques.

`aspect_annotations` records, per row, the completion (`completion_idx`) and the position it
was shown at in that call (`position`, 0-based: the judge's "Text 1" is position 0), so the
page maps a rationale's "Text N" back to the completion shown there in the same call.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llm_feedback.core.errors import require_columns
from llm_feedback.replies.status import CALL_FAILED, SKIPPED_TOO_LONG, UNREADABLE
from llm_feedback.storage.parquet_source import (
    CHUNK_PROMPTS,
    ParquetSource,
    rows_by_prompt,
    table_chunks,
)
from llm_feedback.storage.schema import ULTRAFEEDBACK_ASPECTS
from llm_feedback.viewer.site import SHARD_SIZE, Filter, Search, StaticSite, column, snippet

Table = pd.DataFrame | ParquetSource

COMPLETION_KEY = ["prompt_id", "completion_idx"]
COMPLETION_COLUMNS = (*COMPLETION_KEY, "source", "instruction", "model", "principle", "response")
ASPECT_COLUMNS = (
    *COMPLETION_KEY,
    "aspect",
    "shuffle_idx",
    "position",
    "rating",
    "is_na",
    "rationale",
    "parse_status",
    "suspected_injection",
)
CRITIQUE_COLUMNS = (*COMPLETION_KEY, "critique", "parse_status", "suspected_injection")
SCORE_COLUMNS = (
    *COMPLETION_KEY,
    "overall_score_original",
    "overall_score_fixed",
    "fine_grained_score",
    "fix_action",
)
# Read when present (older runs and hand-made tables may lack them), else these values.
OPTIONAL = {
    "principle": None,
    "source": None,
    "is_na": False,
    "rationale": None,
    "parse_status": None,
    "suspected_injection": False,
    "critique": None,
    "overall_score_original": None,
    "overall_score_fixed": None,
    "fine_grained_score": None,
    "fix_action": None,
}
INDEX_COLUMNS = (
    "id",
    "source",
    "text",
    "models",
    "overall",
    "fine",
    "spread",
    "shuffle",
    "flags",
    "fix_actions",
    "statuses",
    "disagreement",
    "flagged",
)
DISPLAY = ("id", "source", "text", "models", "overall", "fine", "spread", "shuffle", "flags")
HEADINGS = {
    "text": ("instruction", "the instruction's first characters"),
    "overall": ("overall", "the completions' mean overall score (fixed where fixed)"),
    "fine": ("fine-grained", "the completions' mean fine-grained score"),
    "spread": (
        "spread",
        "best minus worst completion, each by its mean rating over aspects and shuffles",
    ),
    "shuffle": (
        "shuffle Δ",
        "the most one completion's rating on one aspect moves between shuffles",
    ),
    "flags": ("flags", "suspected injection, unreadable reply, no reply, score fix"),
}
PRESETS = (("worst first", "overall", "asc"), ("most contested first", "shuffle", "desc"))
FILTERS = (
    Filter("flags", "flag"),
    Filter("fix_actions", "fix action"),
    Filter("statuses", "parse status"),
    Filter("source", "source"),
    Filter("models", "model"),
    Filter("disagreement", "shuffles disagree", "flag"),
    Filter("flagged", "suspected injection", "flag"),
)
# The flags column's words; a fix other than "kept" adds "fix: <action>".
INJECTION, UNREADABLE_FLAG, NO_REPLY = "injection", "unreadable", "no reply"
SEARCH_FIELDS = ("instruction", "responses", "rationales", "critiques")
# Where UltraFeedback's aspects sort; others after them, alphabetically.
ASPECT_RANK = {aspect: rank for rank, aspect in enumerate(ULTRAFEEDBACK_ASPECTS)}


def feedback_site(
    completions: Table,
    aspect_annotations: Table,
    critiques: Table,
    overall_scores: Table,
    *,
    title: str = "Annotations",
    shard_size: int = SHARD_SIZE,
    prompts_per_chunk: int = CHUNK_PROMPTS,
) -> StaticSite:
    """The site of one annotate run's tables (the columns above; the judge tables may be
    empty), DataFrames or `ParquetSource`s. Prompts keep the order of `completions`. The
    tables are read when the site is written, a chunk of `prompts_per_chunk` prompts at a
    time (files in prompt order, as the annotate stages write them), so a site of a million
    prompts costs the memory of one chunk; their columns are checked now.

    Args:
        completions: The completions.
        aspect_annotations: The aspect ratings, one row per shuffle.
        critiques: The critiques.
        overall_scores: The overall scores.
        title: The site's title.
        shard_size: Records per shard file.
        prompts_per_chunk: How many prompts a chunk read holds.

    Returns:
        The site, ready to write.

    Raises:
        InputError: A required column is missing.
    """
    for table, columns, name in (
        (completions, COMPLETION_COLUMNS, "completions"),
        (aspect_annotations, ASPECT_COLUMNS, "aspect_annotations"),
        (critiques, CRITIQUE_COLUMNS, "critiques"),
        (overall_scores, SCORE_COLUMNS, "overall_scores"),
    ):
        require_columns(table, [c for c in columns if c not in OPTIONAL], name)
    return StaticSite(
        kind="feedback",
        title=title,
        unit="prompts",
        columns=INDEX_COLUMNS,
        display=DISPLAY,
        filters=FILTERS,
        entries=_Entries(
            completions, aspect_annotations, critiques, overall_scores, prompts_per_chunk
        ),
        shard_size=shard_size,
        search=Search(SEARCH_FIELDS, _search_texts),
        headings=HEADINGS,
        descending=("spread", "shuffle", "flags"),
        presets=PRESETS,
        # The review queue's uncertainty: how far the judge's shuffles disagree.
        uncertainty="shuffle",
    )


def _search_texts(record: dict[str, Any]) -> Iterator[tuple[int, Any]]:
    yield 0, record["id"]
    yield 0, record["instruction"]
    for completion in record["completions"]:
        yield 1, completion["response"]
        yield 3, completion["critique"]
    for aspect in record["aspects"]:
        yield 2, aspect[6]


@dataclass(frozen=True)
class _Entries:
    """The site's (index row, record) pairs, made a chunk of prompts at a time: each chunk of
    completions meets its prompts' rows of the judge tables (`rows_by_prompt`)."""

    completions: Table
    aspect_annotations: Table
    critiques: Table
    overall_scores: Table
    prompts_per_chunk: int

    def __call__(self) -> Iterator[tuple[list[Any], dict[str, Any]]]:
        aspect_rows = rows_by_prompt(self.aspect_annotations, ASPECT_COLUMNS)
        critique_rows = rows_by_prompt(self.critiques, CRITIQUE_COLUMNS)
        score_rows = rows_by_prompt(self.overall_scores, SCORE_COLUMNS)
        for chunk in table_chunks(self.completions, self.prompts_per_chunk, COMPLETION_COLUMNS):
            prompts = chunk["prompt_id"].unique()
            last = chunk["prompt_id"].max() if len(chunk) else ""
            yield from _chunk_entries(
                _complete(chunk, COMPLETION_COLUMNS),
                _complete(aspect_rows(prompts, last), ASPECT_COLUMNS),
                _complete(critique_rows(prompts, last), CRITIQUE_COLUMNS),
                _complete(score_rows(prompts, last), SCORE_COLUMNS),
            )


def _chunk_entries(
    completions: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    critiques: pd.DataFrame,
    overall_scores: pd.DataFrame,
) -> Iterator[tuple[list[Any], dict[str, Any]]]:
    per_completion = completions.merge(
        critiques.rename(
            columns={"parse_status": "critique_status", "suspected_injection": "injection"}
        ),
        on=COMPLETION_KEY,
        how="left",
    ).merge(overall_scores, on=COMPLETION_KEY, how="left")
    prompt_ids = list(dict.fromkeys(per_completion["prompt_id"].tolist()))
    number = {prompt_id: i for i, prompt_id in enumerate(prompt_ids)}
    per_completion = per_completion.assign(
        _prompt=per_completion["prompt_id"].map(number)
    ).sort_values(["_prompt", "completion_idx"], kind="stable")
    records = [
        {"id": prompt_id, "source": None, "instruction": None, "completions": [], "aspects": []}
        for prompt_id in prompt_ids
    ]
    facts = [_Facts() for _ in prompt_ids]
    _add_completions(records, facts, per_completion)
    _add_aspects(records, facts, aspect_annotations, number)
    for record, fact in zip(records, facts, strict=True):
        row = [
            record["id"],
            record["source"],
            snippet(record["instruction"]),
            sorted(fact.models),
            _mean(fact.overall),
            _mean(fact.fine),
            fact.spread(),
            fact.shuffle_range(),
            fact.flags(),
            sorted(fact.fix_actions),
            sorted(fact.statuses),
            fact.disagreement(),
            fact.flagged,
        ]
        yield row, record


def _complete(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """`frame`'s `columns`, the optional ones filled with their defaults where absent."""
    missing = {c: OPTIONAL[c] for c in columns if c not in frame.columns}
    return frame.assign(**missing)[list(columns)] if missing else frame[list(columns)]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def _number(value: Any) -> float | None:
    """A score as a float; None for a missing one (None or NaN)."""
    return None if value is None or math.isnan(value) else float(value)


class _Facts:
    """What a prompt's index row says about it, gathered while its record is built."""

    def __init__(self) -> None:
        self.models: set[str] = set()
        self.fix_actions: set[str] = set()
        self.statuses: set[str] = set()
        self.flagged = False
        self.overall: list[float] = []
        self.fine: list[float] = []
        self.ratings: dict[tuple[str, int], set[Any]] = defaultdict(set)
        # Numeric ratings: per (aspect, completion) across shuffles, and per completion.
        self.numeric: dict[tuple[str, int], list[float]] = defaultdict(list)
        self.by_completion: dict[int, list[float]] = defaultdict(list)

    def disagreement(self) -> bool:
        """Some completion got different ratings for one aspect in different shuffles."""
        return any(len(ratings) > 1 for ratings in self.ratings.values())

    def shuffle_range(self) -> float | None:
        """The largest max - min of one completion's ratings on one aspect over shuffles;
        None where no completion was rated twice on an aspect (one shuffle)."""
        ranges = [max(r) - min(r) for r in self.numeric.values() if len(r) > 1]
        return round(max(ranges), 2) if ranges else None

    def spread(self) -> float | None:
        """Best minus worst completion by mean rating; None with fewer than two rated."""
        means = [sum(r) / len(r) for r in self.by_completion.values()]
        return round(max(means) - min(means), 2) if len(means) > 1 else None

    def flags(self) -> list[str]:
        found = [INJECTION] if self.flagged else []
        if self.statuses & set(UNREADABLE):
            found.append(UNREADABLE_FLAG)
        if self.statuses & {CALL_FAILED, SKIPPED_TOO_LONG}:
            found.append(NO_REPLY)
        return found + [f"fix: {action}" for action in sorted(self.fix_actions - {"kept"})]


def _add_completions(records: list[dict], facts: list[_Facts], frame: pd.DataFrame) -> None:
    names = [
        "_prompt",
        "completion_idx",
        "source",
        "instruction",
        "model",
        "principle",
        "response",
        "critique",
        "critique_status",
        "injection",
        "overall_score_original",
        "overall_score_fixed",
        "fine_grained_score",
        "fix_action",
    ]
    for values in zip(*(column(frame, name) for name in names), strict=True):
        row = dict(zip(names, values, strict=True))
        record, fact = records[row["_prompt"]], facts[row["_prompt"]]
        record["source"], record["instruction"] = row["source"], row["instruction"]
        record["completions"].append(
            {
                "idx": row["completion_idx"],
                "model": row["model"],
                "principle": row["principle"],
                "response": row["response"],
                "critique": row["critique"],
                "critique_status": row["critique_status"],
                "injection": bool(row["injection"]),
                "overall": row["overall_score_original"],
                "fixed": row["overall_score_fixed"],
                "fine": row["fine_grained_score"],
                "fix_action": row["fix_action"],
            }
        )
        fact.models.add(row["model"])
        overall = _number(row["overall_score_fixed"])
        overall = _number(row["overall_score_original"]) if overall is None else overall
        if overall is not None:
            fact.overall.append(overall)
        if (fine := _number(row["fine_grained_score"])) is not None:
            fact.fine.append(fine)
        if row["fix_action"] is not None:
            fact.fix_actions.add(row["fix_action"])
        if row["critique_status"] is not None:
            fact.statuses.add(row["critique_status"])
        fact.flagged = fact.flagged or bool(row["injection"])


def _add_aspects(
    records: list[dict], facts: list[_Facts], frame: pd.DataFrame, number: dict[str, int]
) -> None:
    frame = frame.loc[frame["prompt_id"].isin(number.keys())]
    frame = frame.assign(
        _prompt=frame["prompt_id"].map(number),
        _rank=frame["aspect"].map(ASPECT_RANK).fillna(len(ASPECT_RANK)),
    ).sort_values(["_prompt", "_rank", "aspect", "shuffle_idx", "position"], kind="stable")
    names = ["_prompt", *ASPECT_COLUMNS[1:]]
    for prompt, idx, aspect, shuffle, position, rating, is_na, rationale, status, flag in zip(
        *(column(frame, name) for name in names), strict=True
    ):
        records[prompt]["aspects"].append(
            [aspect, shuffle, position, idx, rating, bool(is_na), rationale, status, bool(flag)]
        )
        fact = facts[prompt]
        if status is not None:
            fact.statuses.add(status)
        fact.flagged = fact.flagged or bool(flag)
        fact.ratings[(aspect, idx)].add("N/A" if is_na else rating)
        if not is_na and (value := _number(rating)) is not None:
            fact.numeric[(aspect, idx)].append(value)
            fact.by_completion[idx].append(value)
