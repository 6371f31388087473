"""The overall-score fix as a stage: planned a chunk of prompts at a time, suspicious 10s
asked again.

Each chunk of completions (`parquet_source.table_chunks`) meets its prompts' rows of the
judge tables: read on in step when a table is on disk in prompt order (a streaming
merge-join, `KeyOrderedReader`), picked out otherwise. So the fix holds one chunk of each
table, not the tables, and its output is spooled (`overall_scores_table`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llm_feedback.annotation.critique import build_rescore_request, parse_rescore_reply
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
from llm_feedback.annotation.stages import critique_request
from llm_feedback.backends import LLMClient
from llm_feedback.backends.client_state import request_key, sent_form
from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Reading, Task, TaskEngine
from llm_feedback.replies.status import NO_MATCH, OK
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


def _rescore_reading(text: str | None) -> Reading:
    score = parse_rescore_reply(text)
    if score is None:
        return Reading(None, NO_MATCH, ok=False, problem="no overall score from 1 to 10")
    return Reading(score, OK)


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
    requests (and the critique requests they repeat) are rendered from."""
    validate_thresholds(flip_threshold, reannotate_threshold)
    sampling = dict(sampling or {})
    aspect_rows = rows_by_prompt(aspect_annotations, ASPECT_COLUMNS_READ)
    critique_rows = rows_by_prompt(critiques, CRITIQUE_COLUMNS_READ)
    fixer = _ChunkFixer(
        client,
        TaskEngine(client, max_reasks=max_reasks, fail_loud=fail_loud) if client else None,
        flip_threshold,
        reannotate_threshold,
        aspects,
        sampling,
        templates,
    )
    counts: Counter[str] = Counter()
    for chunk in table_chunks(completions, prompts_per_chunk, COMPLETION_COLUMNS_READ):
        prompts = chunk["prompt_id"].unique()
        last = chunk["prompt_id"].max() if len(chunk) else ""
        scores = fixer.fix(chunk, aspect_rows(prompts, last), critique_rows(prompts, last))
        counts.update(fix_counts(scores))
        yield scores
    logger.info("score fix: %s", ", ".join(f"{k}={v}" for k, v in counts.items()))


@dataclass
class _ChunkFixer:
    """The fix of one chunk's completions, given its rows of the judge tables."""

    client: LLMClient | None
    engine: TaskEngine | None
    flip_threshold: float
    reannotate_threshold: float
    aspects: Sequence[str] | None
    sampling: Mapping[str, Any]
    templates: Templates = PACKAGE_TEMPLATES
    # Identical requests are sent once: only the first copy carries the call's usage. A
    # digest per request sent, not its texts: a million prompts' re-scores are gigabytes.
    sent: set[bytes] = field(default_factory=set)

    def fix(
        self, completions: pd.DataFrame, aspect_rows: pd.DataFrame, critiques: pd.DataFrame
    ) -> pd.DataFrame:
        scores = collect_scores(completions, aspect_rows, critiques, aspects=self.aspects)
        plan = plan_score_fix(scores, self.flip_threshold, self.reannotate_threshold)
        pending = pending_reannotation(plan)
        new_scores: dict[tuple[str, int], float | None] = {}
        rescore_tokens: dict[tuple[str, int], tuple[int, int]] = {}
        if pending:
            if self.client is None or self.engine is None:
                raise ConfigError("the score fix needs a judge to re-annotate suspicious scores")
            structured = self.client.supports_json_schema
            # Indexing only the pending rows: indexing whole tables would copy their texts.
            # Rows in `pending`'s order, read as tuples: a `.loc` per row cost 0.4 ms.
            rows = _pending_rows(completions, pending).reindex(pending)
            critique_texts = _pending_rows(critiques, pending)["critique"].reindex(pending)
            tasks = [
                Task(
                    build_rescore_request(
                        critique_request(row, structured, self.sampling, self.templates),
                        "" if pd.isna(critique) else str(critique),
                        structured=structured,
                        sampling=self.sampling,
                        templates=self.templates,
                    ),
                    _rescore_reading,
                )
                for row, critique in zip(
                    rows.itertuples(index=False), critique_texts.tolist(), strict=True
                )
            ]
            outcomes = self.engine.run(tasks, desc="re-annotate overall scores")
            new_scores = {key: out.value for key, out in zip(pending, outcomes, strict=True)}
            for key, task, outcome in zip(pending, tasks, outcomes, strict=True):
                request = self._identity(task)
                if request not in self.sent:
                    self.sent.add(request)
                    rescore_tokens[key] = (
                        outcome.prompt_tokens,
                        outcome.completion_tokens,
                        outcome.cached_prompt_tokens,
                        outcome.cache_write_tokens,
                    )
        overall_scores = apply_reannotated_scores(plan, new_scores)
        # The re-score calls' usage, for the cost table (0 where no call was made).
        keys = list(zip(overall_scores["prompt_id"], overall_scores["completion_idx"], strict=True))
        for column, part in (("prompt_tokens", 0), ("completion_tokens", 1)):
            overall_scores[column] = np.array(
                [rescore_tokens.get(key, (0, 0))[part] for key in keys], dtype="int64"
            )
        for part, column in enumerate(CACHE_TOKEN_COLUMN_TYPES, start=2):  # null: unsaid
            overall_scores[column] = np.array(
                [(rescore_tokens.get(key) or (0, 0, None, None))[part] for key in keys],
                dtype="float64",
            )
        return overall_scores

    def _identity(self, task: Task) -> bytes:
        """The client's own identity of a request (its cache key), as bytes to keep small."""
        config = self.client.config
        key = request_key(config, self.client.backend, sent_form(config, task.request))
        return bytes.fromhex(key)


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
    writes it a row group per chunk."""
    chunks = overall_score_chunks(completions, aspect_annotations, critiques, client, **options)
    first = next(chunks)  # every table gives at least one chunk
    spool = FrameSpool(first.head(0))
    spool.append(first)
    for chunk in chunks:
        spool.append(chunk)
    return spool.finish()
