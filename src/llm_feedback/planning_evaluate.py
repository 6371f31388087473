"""The evaluate pipeline's part of a run plan (`planning`), by the same rules: its calls
built with the pipeline's own request builders (`generation_request` for the responses
to generate, `judge_tasks` for the judge calls: one per sample that needs the judge, both
orders of every pair), each looked up in the request cache, the rest priced.

Stages: `evaluate_generate` (per generating endpoint and model) and `evaluate` (per judge
of the panel, or the one judge; an evaluator, or recorded pairwise verdicts, score without
calls). Responses still to be
generated are judged as their cached reply or a placeholder as long as its estimate: the
judge's figures are then an "estimate of estimate". Re-asks of unreadable replies are not
counted (they depend on the replies).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.evaluation.config import EvaluateParams
from llm_feedback.evaluation.generation import generation_request
from llm_feedback.evaluation.judging import judge_tasks
from llm_feedback.evaluation.recorded import has_recorded_verdicts
from llm_feedback.judges import Judge
from llm_feedback.planning import COUNTED, ESTIMATED, Stage, placeholder_response
from llm_feedback.reporting.metrics import price_usage
from llm_feedback.schema import RUN_PLAN_COLUMN_TYPES

GENERATE_STAGE = "evaluate_generate"
JUDGE_STAGE = "evaluate"


def _generation_rows(
    samples: pd.DataFrame, config: EvaluateParams, cache_path: str | Path | None
) -> tuple[list[dict[str, Any]], pd.DataFrame, bool]:
    """The generation rows, the samples with their responses (cached or placeholders) and
    whether every response is known."""
    todo = samples[samples["response"].isna()]
    if todo.empty:
        return [], samples, True
    answered = samples.copy()
    known = True
    generators = todo["model"].map(config.generator_for)
    rows: list[dict[str, Any]] = []
    for _, part in todo.groupby(generators.map(lambda endpoint: endpoint.name), sort=True):
        requests = [generation_request(row, config) for row in part.itertuples()]
        stage = Stage(generators[part.index[0]], requests, cache_path)
        rows += stage.rows(GENERATE_STAGE, part["model"], COUNTED)
        for index, request, answer in zip(part.index, requests, stage.answers(), strict=True):
            known &= answer is not None
            # Placeholders differ by row: two models' responses are never one judge request.
            fill = answer if answer is not None else placeholder_response(int(index), request)
            answered.at[index, "response"] = fill
    return rows, answered, known


def plan_evaluation(
    samples: pd.DataFrame,
    config: EvaluateParams,
    prices: Mapping[str, Mapping[str, float]],
    cache_path: str | Path | None,
) -> pd.DataFrame:
    """The evaluate stages' plan rows (`schema.RUN_PLAN_COLUMN_TYPES`) for the prepared
    `samples` (`evaluation.prepare_samples`)."""
    rows, answered, known = _generation_rows(samples, config, cache_path)
    # Recorded pairwise verdicts are judged without a call (`evaluation.recorded`).
    recorded = config.kind.compares and has_recorded_verdicts(samples)
    if config.evaluator is None and not recorded:
        for judge_params in config.judges.values():
            endpoint = judge_params.endpoint
            top_logprobs = config.judge_top_logprobs_asked if judge_params is config.judge else 0
            judge = Judge(
                endpoint, sampling=judge_params.sampling, connect=False, top_logprobs=top_logprobs
            )
            requests = [task.request for task in judge_tasks(answered, config, judge)]
            stage = Stage(endpoint, requests, cache_path)
            basis = COUNTED if known else ESTIMATED
            rows += stage.rows(JUDGE_STAGE, [endpoint.model] * len(requests), basis)
    plan = pd.DataFrame(rows, columns=list(RUN_PLAN_COLUMN_TYPES))
    plan = price_usage(plan, prices)
    return plan.loc[:, list(RUN_PLAN_COLUMN_TYPES)].astype(dict(RUN_PLAN_COLUMN_TYPES))
