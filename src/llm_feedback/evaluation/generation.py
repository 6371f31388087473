"""Generating the missing responses, each from its model's `generate_with` endpoint."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.backends import ChatRequest, LLMClient
from llm_feedback.backends.media import with_media
from llm_feedback.engine import Task, TaskEngine
from llm_feedback.evaluation.benchmarks import BENCHMARK, question_text
from llm_feedback.evaluation.config import EvaluateParams

logger = logging.getLogger(__name__)


def generation_request(sample: Any, config: EvaluateParams) -> ChatRequest:
    """The request that generates one sample's response: its question between the
    benchmark's prompts, its earlier turn and attachments.

    Args:
        sample: one eval_samples row (a named tuple).
        config: the evaluate parameters.

    Returns:
        The chat request.
    """
    messages: list[dict[str, Any]] = []
    if sample.turn == 2:
        messages += [
            {"role": "user", "content": sample.prior_question},
            {"role": "assistant", "content": sample.prior_response},
        ]
    question = question_text(
        sample.question,
        getattr(sample, BENCHMARK, None),
        config.benchmark_prompts,
        (config.pre_prompt, config.post_prompt),
    )
    messages.append(
        {"role": "user", "content": with_media(question, (*sample.images, *sample.audio))}
    )
    settings = dict(config.generation)
    stop = settings.pop("stop", None)
    # The replicate is the attempt: replicates are separate samples, each cached.
    return ChatRequest(
        messages=tuple(messages),
        stop=tuple(stop) if stop else None,
        attempt=int(sample.replicate),
        **settings,
    )


def generate_responses(
    samples: pd.DataFrame,
    config: EvaluateParams,
    cache_path: str | Path | None,
    progress: bool = True,
    fail_loud: bool = False,
) -> pd.DataFrame:
    """Fill every empty `response` from its model's `generate_with` endpoint.

    The question is sent between its benchmark's `pre_prompt` and `post_prompt`
    (`benchmark_prompts`, else the global ones), with the row's images and
    audio attached. Answers are cached like judgments; `overwrite_outputs` asks again. A
    failed call leaves the response empty and its error in `generation_error`. `runtime_s`
    records how long each generated response took (a cached one: its original call's time).

    Args:
        samples: eval_samples rows.
        config: the evaluate parameters.
        cache_path: the request cache (None: no cache).
        progress: show a progress bar.
        fail_loud: raise when too many calls fail.

    Returns:
        `samples` with responses, `generation_error` and `runtime_s`.
    """
    samples = samples.copy()
    samples["generation_error"] = pd.Series(pd.NA, index=samples.index, dtype="string")
    todo = samples[samples["response"].isna()]
    if todo.empty:
        return samples
    generators = todo["model"].map(config.generator_for)
    for endpoint_name, rows in todo.groupby(generators.map(lambda e: e.name), sort=True):
        endpoint = generators[rows.index[0]]
        tasks = [Task(generation_request(row, config), reask=False) for row in rows.itertuples()]
        with LLMClient(
            endpoint, cache_path, progress=progress, refresh=config.overwrite_outputs
        ) as client:
            outcomes = TaskEngine(client, max_reasks=0, fail_loud=fail_loud).run(
                tasks, desc=f"evaluate: generate [{endpoint_name}]"
            )
        for row, outcome in zip(rows.index, outcomes, strict=True):
            if outcome.error is None:
                samples.at[row, "response"] = outcome.text
                samples.at[row, "runtime_s"] = outcome.reply.latency_s
            else:
                samples.at[row, "generation_error"] = outcome.error
    failed = int(samples["generation_error"].notna().sum())
    logger.info("evaluate: generated %d responses, %d failed", len(todo) - failed, failed)
    return samples
