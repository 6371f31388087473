"""Completion generation: one request per (prompt, slot), grouped by endpoint."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pandas as pd

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.endpoints import ModelSpec
from llm_feedback.core.errors import InputError
from llm_feedback.engine import Outcome, Task, TaskEngine
from llm_feedback.storage.parquet_source import ParquetSource, table_batches
from llm_feedback.storage.schema import ANSWER_LIST_COLUMNS, COMPLETIONS_COLUMN_TYPES
from llm_feedback.storage.spool import SpooledTable, TableBuilder

logger = logging.getLogger(__name__)

SAMPLED_COLUMNS = ("prompt_id", "completion_idx", "instruction", "model", "system_prompt")
# What generation reads of a sampled row: the columns it sends or copies.
SAMPLED_READ = (*SAMPLED_COLUMNS, "source", "principle", "world_knowledge", *ANSWER_LIST_COLUMNS)
Sampled = pd.DataFrame | ParquetSource


def validate_sampled_prompts(sampled: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> None:
    """Raise InputError, naming the row and column, when the sampled prompts lack a
    column, name a model not in the pool or hold a blank instruction.

    Args:
        sampled: the sampled prompts.
        pool: the model pool, by model name.
    """
    _require_sampled_columns(sampled.columns)
    _check_rows(sampled, pool)


def _require_sampled_columns(columns: Iterable[str]) -> None:
    missing = [column for column in SAMPLED_COLUMNS if column not in set(columns)]
    if missing:
        raise InputError(f"sampled_prompts: missing column(s) {', '.join(missing)}")


def _check_rows(sampled: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> None:
    """Every row's model is in the pool and its instruction is not blank; the error names
    the row by its index (its position in the file, when streamed)."""
    unknown = ~sampled["model"].isin(list(pool))
    if unknown.any():
        row = sampled.index[unknown.to_numpy().argmax()]
        raise InputError(
            f"sampled_prompts row {row} (prompt_id {sampled.at[row, 'prompt_id']}), column "
            f"'model': '{sampled.at[row, 'model']}' is not in model_pool "
            f"({', '.join(sorted(pool))})"
        )
    empty = sampled["instruction"].isna() | (sampled["instruction"].astype(str).str.strip() == "")
    if empty.any():
        row = sampled.index[empty.to_numpy().argmax()]
        raise InputError(f"sampled_prompts row {row}, column 'instruction': empty instruction")


def sent_system_prompts(sampled: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> list[str]:
    """The system prompt each model was given: none for a model that drops it.

    Args:
        sampled: the sampled prompts.
        pool: the model pool, by model name.

    Returns:
        One system prompt per row ("": none).
    """
    return [
        "" if pool[model].system_prompt == "drop" or not isinstance(prompt, str) else prompt
        for prompt, model in zip(sampled["system_prompt"], sampled["model"], strict=True)
    ]


def build_requests(sampled: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> list[ChatRequest]:
    """One chat request per sampled row, with its model's sampling settings and system
    prompt handling.

    Args:
        sampled: the sampled prompts.
        pool: the model pool, by model name.

    Returns:
        The requests, in row order.
    """
    requests = []
    for instruction, system_prompt, model in zip(
        sampled["instruction"], sent_system_prompts(sampled, pool), sampled["model"], strict=True
    ):
        spec = pool[model]
        user, system = instruction, system_prompt or None
        if spec.system_prompt == "fold" and system:
            # No system role in the model's chat template: the prompt leads the user turn.
            user, system = f"{system}\n\n{instruction}", None
        requests.append(ChatRequest.from_prompt(user, system=system, **spec.sampling))
    return requests


def _answer_lists(sampled: pd.DataFrame, column: str) -> list[list[str]]:
    """A prompt's reference answers as lists of strings (empty when the source has none), for
    the UltraFeedback export; Parquet gives them back as numpy arrays."""
    if column not in sampled.columns:
        return [[] for _ in range(len(sampled))]
    return [
        [] if value is None or value is pd.NA or isinstance(value, float) else list(map(str, value))
        for value in sampled[column]
    ]


def _endpoint_names(models: Iterable[str], pool: Mapping[str, ModelSpec]) -> list[str]:
    return [pool[model].endpoint.name for model in models]


def _rows_per_endpoint(sampled: Sampled, pool: Mapping[str, ModelSpec]) -> Counter[str]:
    """Every row checked before any call (a file a record batch at a time), and how many
    rows each endpoint answers."""
    if isinstance(sampled, pd.DataFrame):
        validate_sampled_prompts(sampled, pool)  # rows named by the frame's own index
        return Counter(_endpoint_names(sampled["model"], pool))
    _require_sampled_columns(sampled.columns)
    counts: Counter[str] = Counter()
    for batch in sampled.row_batches(("prompt_id", "model", "instruction")):
        _check_rows(batch, pool)
        counts.update(_endpoint_names(batch["model"], pool))
    return counts


def _prompt_fields(rows: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> Iterator[dict]:
    """The columns a completion row copies from its sampled row."""
    n = len(rows)
    columns = {
        "prompt_id": rows["prompt_id"].astype(str).tolist(),
        "completion_idx": rows["completion_idx"].astype(int).tolist(),
        "source": rows["source"].tolist() if "source" in rows else [None] * n,
        "instruction": rows["instruction"].astype(str).tolist(),
        **{column: _answer_lists(rows, column) for column in ANSWER_LIST_COLUMNS},
        "world_knowledge": rows["world_knowledge"].tolist()
        if "world_knowledge" in rows
        else [""] * n,
        "model": rows["model"].tolist(),
        "principle": rows["principle"].tolist() if "principle" in rows else [None] * n,
        "system_prompt": sent_system_prompts(rows, pool),
    }
    for values in zip(*columns.values(), strict=True):
        yield dict(zip(columns, values, strict=True))


def _answer_endpoint(
    sampled: Sampled,
    pool: Mapping[str, ModelSpec],
    endpoint: EndpointConfig,
    client: LLMClient,
    table: TableBuilder,
    *,
    total: int,
    fail_loud: bool,
) -> int:
    """Send the rows of `endpoint`'s models, adding each answered row to `table` at its
    position in `sampled`; returns how many calls failed."""
    # Task index -> (row position, the row's prompt fields), while its call is out.
    pending: dict[int, tuple[int, dict]] = {}
    failed = 0

    def tasks() -> Iterator[Task]:
        indices = itertools.count()  # the engine numbers tasks in the order given
        for batch in table_batches(sampled, SAMPLED_READ):
            rows = batch[[name == endpoint.name for name in _endpoint_names(batch["model"], pool)]]
            for position, fields, request in zip(
                rows.index, _prompt_fields(rows, pool), build_requests(rows, pool), strict=True
            ):
                pending[next(indices)] = (int(position), fields)
                yield Task(request, reask=False)

    def take(index: int, outcome: Outcome) -> None:
        nonlocal failed
        position, row = pending.pop(index)
        reply = outcome.reply
        row.update(
            endpoint=endpoint.name,
            backend=endpoint.backend,
            response=pool[row["model"]].cleanup.apply(reply.text),
            finish_reason=reply.finish_reason,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            cached_prompt_tokens=reply.cached_prompt_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            latency_s=reply.latency_s,
            cached=reply.cached,
            via_batch=reply.via_batch,
            error=reply.error,
        )
        failed += reply.error is not None
        table.add(position, row)

    TaskEngine(client, max_reasks=0, fail_loud=fail_loud).run_into(
        tasks(), take, desc=f"generate [{endpoint.name}]", total=total
    )
    return failed


def completions_table(
    sampled: Sampled,
    pool: Mapping[str, ModelSpec],
    cache_path: str | Path | None,
    progress: bool = True,
    fail_loud: bool = False,
) -> SpooledTable:
    """`completions`: every sampled (prompt, slot) answered, in the sampled order, spooled
    to disk as the calls finish; a failed call becomes a row with `error` set.

    `sampled` on disk (`ParquetSource`) is read a record batch at a time as the calls are
    sent, once per endpoint, so memory follows the calls in flight, not the prompts.
    `fail_loud`: raise instead when more calls of an endpoint failed than its
    `max_failure_share` (the pipeline's node does).

    Args:
        sampled: the sampled prompts, a DataFrame or a table on disk.
        pool: the model pool, by model name.
        cache_path: the request cache (None: no cache).
        progress: show progress bars.
        fail_loud: raise when too many calls of an endpoint fail.

    Returns:
        The spooled table.
    """
    counts = _rows_per_endpoint(sampled, pool)
    endpoints = {spec.endpoint.name: spec.endpoint for spec in pool.values()}
    table = TableBuilder(COMPLETIONS_COLUMN_TYPES)
    failed = 0
    for name in sorted(counts):
        with LLMClient(endpoints[name], cache_path, progress=progress) as client:
            failed += _answer_endpoint(
                sampled,
                pool,
                endpoints[name],
                client,
                table,
                total=counts[name],
                fail_loud=fail_loud,
            )
    finished = table.finish()
    if failed:
        logger.warning(
            "generate: %d of %d completions failed (see column 'error')", failed, len(finished)
        )
    return finished


def generate_completions(
    sampled: Sampled,
    pool: Mapping[str, ModelSpec],
    cache_path: str | Path | None,
    progress: bool = True,
    fail_loud: bool = False,
) -> pd.DataFrame:
    """`completions_table` as a DataFrame.

    Args:
        sampled: the sampled prompts, a DataFrame or a table on disk.
        pool: the model pool, by model name.
        cache_path: the request cache (None: no cache).
        progress: show progress bars.
        fail_loud: raise when too many calls of an endpoint fail.

    Returns:
        The table.
    """
    return completions_table(sampled, pool, cache_path, progress, fail_loud).frame()
