"""Completion generation: one request per (prompt, slot), grouped by endpoint."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from llm_feedback.backends import ChatRequest, LLMClient
from llm_feedback.endpoints import ModelSpec
from llm_feedback.engine import Task, TaskEngine
from llm_feedback.errors import InputError
from llm_feedback.schema import ANSWER_LIST_COLUMNS, COMPLETIONS_COLUMN_TYPES

logger = logging.getLogger(__name__)

SAMPLED_COLUMNS = ("prompt_id", "completion_idx", "instruction", "model", "system_prompt")


def validate_sampled_prompts(sampled: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> None:
    missing = [column for column in SAMPLED_COLUMNS if column not in sampled.columns]
    if missing:
        raise InputError(f"sampled_prompts: missing column(s) {', '.join(missing)}")
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
    """The system prompt each model was given: none for a model that drops it."""
    return [
        "" if pool[model].system_prompt == "drop" or not isinstance(prompt, str) else prompt
        for prompt, model in zip(sampled["system_prompt"], sampled["model"], strict=True)
    ]


def build_requests(sampled: pd.DataFrame, pool: Mapping[str, ModelSpec]) -> list[ChatRequest]:
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


def generate_completions(
    sampled: pd.DataFrame,
    pool: Mapping[str, ModelSpec],
    cache_path: str | Path | None,
    progress: bool = True,
    fail_loud: bool = False,
) -> pd.DataFrame:
    """Answer every sampled (prompt, slot); a failed call becomes a row with `error` set.

    `fail_loud`: raise instead when more calls of an endpoint failed than its
    `max_failure_share` (the pipeline's node does)."""
    validate_sampled_prompts(sampled, pool)
    sampled = sampled.reset_index(drop=True)
    requests = build_requests(sampled, pool)
    endpoint_of_row = sampled["model"].map(lambda model: pool[model].endpoint.name)
    endpoints = {spec.endpoint.name: spec.endpoint for spec in pool.values()}
    results: list = [None] * len(sampled)
    for endpoint_name, rows in endpoint_of_row.groupby(endpoint_of_row, sort=True):
        positions = rows.index.to_list()
        with LLMClient(endpoints[endpoint_name], cache_path, progress=progress) as client:
            outcomes = TaskEngine(client, max_reasks=0, fail_loud=fail_loud).run(
                [Task(requests[i], reask=False) for i in positions],
                desc=f"generate [{endpoint_name}]",
            )
        for position, outcome in zip(positions, outcomes, strict=True):
            results[position] = outcome.reply

    frame = pd.DataFrame(
        {
            "prompt_id": sampled["prompt_id"],
            "completion_idx": sampled["completion_idx"],
            "source": sampled.get("source"),
            "instruction": sampled["instruction"],
            **{column: _answer_lists(sampled, column) for column in ANSWER_LIST_COLUMNS},
            "world_knowledge": sampled.get("world_knowledge", ""),
            "model": sampled["model"],
            "principle": sampled.get("principle"),
            "system_prompt": sent_system_prompts(sampled, pool),
            "endpoint": endpoint_of_row,
            "backend": endpoint_of_row.map(lambda name: endpoints[name].backend),
            "response": [
                pool[model].cleanup.apply(r.text)
                for model, r in zip(sampled["model"], results, strict=True)
            ],
            "finish_reason": [r.finish_reason for r in results],
            "prompt_tokens": [r.prompt_tokens for r in results],
            "completion_tokens": [r.completion_tokens for r in results],
            "latency_s": [r.latency_s for r in results],
            "cached": [r.cached for r in results],
            "via_batch": [r.via_batch for r in results],
            "error": [r.error for r in results],
        }
    )
    failed = frame["error"].notna().sum()
    if failed:
        logger.warning(
            "generate: %d of %d completions failed (see column 'error')", failed, len(frame)
        )
    return frame.astype(COMPLETIONS_COLUMN_TYPES)
