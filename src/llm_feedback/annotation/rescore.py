"""The overall-score fix as a stage: planned a chunk of prompts at a time, suspicious 10s
asked again.

Each chunk of completions (`parquet_source.table_chunks`) meets its prompts' rows of the
judge tables: read on in step when a table is on disk in prompt order (a streaming
merge-join, `KeyOrderedReader`), picked out otherwise. So the fix holds one chunk of each
table (and the re-scores' answers), not the tables, and its output is spooled
(`overall_scores_table`). Its re-scores are counted first and sent in one stream, across
the chunks: one progress bar with the stage's total, and no chunk's tail idles the judge.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.annotation.rescore_ahead import rescore_reading, rescore_request
from llm_feedback.annotation.score_fix import (
    ASPECT_COLUMNS_READ,
    CRITIQUE_COLUMNS_READ,
    apply_reannotated_scores,
    collect_scores,
    fix_counts,
    pending_reannotation,
    plan_score_fix,
    validate_thresholds,
)
from llm_feedback.backends import ChatRequest, LLMClient
from llm_feedback.backends.client_state import request_key, sent_form
from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Outcome, Task, TaskEngine
from llm_feedback.storage.parquet_source import (
    CHUNK_PROMPTS,
    ParquetSource,
    rows_by_prompt,
    table_chunks,
)
from llm_feedback.storage.schema import CACHE_TOKEN_COLUMN_TYPES
from llm_feedback.storage.spool import FrameSpool
from llm_feedback.templates import PACKAGE_TEMPLATES, Templates

logger = logging.getLogger(__name__)

# What the fix reads of the completions: the key, the model, and what a re-score request
# repeats of the critique request.
COMPLETION_COLUMNS_READ = (
    "prompt_id",
    "completion_idx",
    "model",
    "instruction",
    "response",
    "principle",
    "system_prompt",
)
Table = pd.DataFrame | ParquetSource


def _pending_rows(df: pd.DataFrame, pending: list[tuple[str, int]]) -> pd.DataFrame:
    """`df`'s rows of the completions in `pending`, indexed by (prompt_id, completion_idx)."""
    keys = pd.MultiIndex.from_frame(df[["prompt_id", "completion_idx"]])
    return df[keys.isin(pending)].set_index(["prompt_id", "completion_idx"])


def overall_score_chunks(
    completions: Table,
    aspect_annotations: Table,
    critiques: Table,
    client: LLMClient | None,
    *,
    flip_threshold: float = 2.0,
    reannotate_threshold: float = 4.0,
    aspects: Sequence[str] | None = None,
    max_reasks: int = 0,
    fail_loud: bool = False,
    sampling: Mapping[str, Any] | None = None,
    prompts_per_chunk: int = CHUNK_PROMPTS,
    templates: Templates = PACKAGE_TEMPLATES,
) -> Iterator[pd.DataFrame]:
    """`overall_scores` a chunk of prompts at a time (a DataFrame of completions is one
    chunk); see `fix_overall_scores`. `templates`: the prompt templates the re-score
    requests (and the critique requests they repeat) are rendered from.

    The tables are read three times, a chunk at a time: to count the re-scores (so that
    their progress bar shows the stage's total and the time left), to send them all in one
    stream (no chunk's tail leaves the judge idle before the next chunk's calls), and to
    write each chunk's rows with the answers.

    Args:
        completions: the run's completions.
        aspect_annotations: the aspect annotations.
        critiques: the critiques.
        client: the judge that re-scores (None: ConfigError if any score needs it).
        flip_threshold: a suspicious overall score whose fine-grained score is at most this
            is flipped.
        reannotate_threshold: one at most this (and above `flip_threshold`) is re-scored.
        aspects: the aspects the fine-grained score averages (default: all rated).
        max_reasks: re-asks of an unreadable reply.
        fail_loud: raise when too many calls fail.
        sampling: the critique's sampling settings.
        prompts_per_chunk: prompts per chunk.
        templates: the prompt templates.

    Returns:
        The overall_scores rows, a chunk at a time.
    """
    validate_thresholds(flip_threshold, reannotate_threshold)
    fix = _Fix(completions, aspect_annotations, critiques, prompts_per_chunk)
    thresholds = (flip_threshold, reannotate_threshold, aspects)
    total = sum(len(pending_reannotation(plan)) for _, plan, _ in fix.plans(*thresholds))
    answers: dict[tuple[str, int], _Answer] = {}
    if total:
        if client is None:
            raise ConfigError("the score fix needs a judge to re-annotate suspicious scores")
        answers = _rescore(
            TaskEngine(client, max_reasks=max_reasks, fail_loud=fail_loud),
            fix.plans(*thresholds, texts=True),
            total,
            sampling=dict(sampling or {}),
            templates=templates,
        )
    # Identical requests are sent once: only the first copy carries the call's usage.
    charged: set[bytes] = set()
    counts: Counter[str] = Counter()
    for _, plan, _ in fix.plans(*thresholds):
        scores = _with_answers(plan, answers, charged)
        counts.update(fix_counts(scores))
        yield scores
    logger.info("score fix: %s", ", ".join(f"{k}={v}" for k, v in counts.items()))


# What counting and writing read: the key and model, and the critiques' scores.
KEY_COLUMNS_READ = ("prompt_id", "completion_idx", "model")
SCORE_COLUMNS_READ = ("prompt_id", "completion_idx", "overall_score")


@dataclass(frozen=True, slots=True)
class _Fix:
    """The tables the fix reads, walked a chunk of prompts at a time."""

    completions: Table
    aspect_annotations: Table
    critiques: Table
    prompts_per_chunk: int

    def plans(
        self,
        flip_threshold: float,
        reannotate_threshold: float,
        aspects: Sequence[str] | None,
        *,
        texts: bool = False,
    ) -> Iterator[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
        """Per chunk: its completions, its plan (`plan_score_fix`) and its critique rows;
        `texts`: with what a re-score request repeats (instruction, response, critique)."""
        aspect_rows = rows_by_prompt(self.aspect_annotations, ASPECT_COLUMNS_READ)
        critique_columns = CRITIQUE_COLUMNS_READ if texts else SCORE_COLUMNS_READ
        critique_rows = rows_by_prompt(self.critiques, critique_columns)
        completion_columns = COMPLETION_COLUMNS_READ if texts else KEY_COLUMNS_READ
        for chunk in table_chunks(self.completions, self.prompts_per_chunk, completion_columns):
            prompts = chunk["prompt_id"].unique()
            last = chunk["prompt_id"].max() if len(chunk) else ""
            critiques = critique_rows(prompts, last)
            scores = collect_scores(chunk, aspect_rows(prompts, last), critiques, aspects=aspects)
            yield chunk, plan_score_fix(scores, flip_threshold, reannotate_threshold), critiques


@dataclass(frozen=True, slots=True)
class _Answer:
    """A re-score's outcome as the table keeps it, and its request's identity (a digest,
    not its texts: a million prompts' re-scores are gigabytes)."""

    score: float | None
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int | None
    cache_write_tokens: int | None
    request: bytes


def _rescore(
    engine: TaskEngine,
    plans: Iterator[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]],
    total: int,
    *,
    sampling: Mapping[str, Any],
    templates: Templates,
) -> dict[tuple[str, int], _Answer]:
    """Every planned re-score, in one stream of `total` calls; answers by completion."""
    client = engine.client
    structured = client.supports_json_schema
    sent: dict[int, tuple[tuple[str, int], bytes]] = {}  # task index -> key, while out
    indices = itertools.count()
    answers: dict[tuple[str, int], _Answer] = {}

    def tasks() -> Iterator[Task]:
        for chunk, plan, critiques in plans:
            pending = pending_reannotation(plan)
            if not pending:
                continue
            # Indexing only the pending rows: indexing whole tables would copy their texts.
            # Rows in `pending`'s order, read as tuples: a `.loc` per row cost 0.4 ms.
            rows = _pending_rows(chunk, pending).reindex(pending)
            texts = _pending_rows(critiques, pending)["critique"].reindex(pending)
            for key, row, critique in zip(
                pending, rows.itertuples(index=False), texts.tolist(), strict=True
            ):
                request = rescore_request(row, critique, structured, sampling, templates)
                sent[next(indices)] = key, _identity(client, request)
                yield Task(request, rescore_reading)

    def take(index: int, outcome: Outcome) -> None:
        key, request = sent.pop(index)
        answers[key] = _Answer(
            outcome.value,
            outcome.prompt_tokens,
            outcome.completion_tokens,
            outcome.cached_prompt_tokens,
            outcome.cache_write_tokens,
            request,
        )

    engine.run_into(tasks(), take, desc="re-annotate overall scores", total=total)
    return answers


def _with_answers(
    plan: pd.DataFrame, answers: Mapping[tuple[str, int], _Answer], charged: set[bytes]
) -> pd.DataFrame:
    """A chunk's plan with its new scores and the re-score calls' usage (0 where no call
    was made, or an identical request already carries it)."""
    pending = pending_reannotation(plan)
    tokens: dict[tuple[str, int], tuple[int, int, int | None, int | None]] = {}
    for key in pending:
        answer = answers[key]
        if answer.request not in charged:
            charged.add(answer.request)
            tokens[key] = (
                answer.prompt_tokens,
                answer.completion_tokens,
                answer.cached_prompt_tokens,
                answer.cache_write_tokens,
            )
    overall_scores = apply_reannotated_scores(plan, {key: answers[key].score for key in pending})
    keys = list(zip(overall_scores["prompt_id"], overall_scores["completion_idx"], strict=True))
    for column, part in (("prompt_tokens", 0), ("completion_tokens", 1)):
        overall_scores[column] = np.array(
            [tokens.get(key, (0, 0))[part] for key in keys], dtype="int64"
        )
    for part, column in enumerate(CACHE_TOKEN_COLUMN_TYPES, start=2):  # null: unsaid
        overall_scores[column] = np.array(
            [(tokens.get(key) or (0, 0, None, None))[part] for key in keys], dtype="float64"
        )
    return overall_scores


def _identity(client: LLMClient, request: ChatRequest) -> bytes:
    """The client's own identity of a request (its cache key), as bytes to keep small."""
    config = client.config
    return bytes.fromhex(request_key(config, client.backend, sent_form(config, request)))


def fix_overall_scores(
    completions: Table,
    aspect_annotations: Table,
    critiques: Table,
    client: LLMClient | None,
    **options: Any,
) -> pd.DataFrame:
    """`overall_scores`: fine-grained score, original and fixed overall score, and the action.

    A suspicious score is asked again as UltraFeedback did: the critique conversation goes
    on after the stored critique, with the critique's `sampling` (`build_rescore_request`).
    `options` are `overall_score_chunks`'.

    Args:
        completions: the run's completions.
        aspect_annotations: the aspect annotations.
        critiques: the critiques.
        client: the judge that re-scores (None: ConfigError if any score needs it).
        **options: `overall_score_chunks`' keyword arguments.

    Returns:
        The overall_scores table.
    """
    chunks = list(
        overall_score_chunks(completions, aspect_annotations, critiques, client, **options)
    )
    return chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)


def overall_scores_table(
    completions: Table,
    aspect_annotations: Table,
    critiques: Table,
    client: LLMClient | None,
    **options: Any,
) -> FrameSpool:
    """`fix_overall_scores` spooled to disk a chunk at a time: a Kedro `ParquetDataset`
    writes it a row group per chunk.

    Args:
        completions: the run's completions.
        aspect_annotations: the aspect annotations.
        critiques: the critiques.
        client: the judge that re-scores (None: ConfigError if any score needs it).
        **options: `overall_score_chunks`' keyword arguments.

    Returns:
        The spooled table.
    """
    chunks = overall_score_chunks(completions, aspect_annotations, critiques, client, **options)
    first = next(chunks)  # every table gives at least one chunk
    spool = FrameSpool(first.head(0))
    spool.append(first)
    for chunk in chunks:
        spool.append(chunk)
    return spool.finish()
