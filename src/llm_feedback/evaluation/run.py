"""`run_evaluation`: the whole evaluation outside Kedro, in one call."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.evaluation.evaluators import score_samples
from llm_feedback.evaluation.generation import generate_responses
from llm_feedback.evaluation.judging import judge_samples, open_judge
from llm_feedback.evaluation.metrics import compute_metrics
from llm_feedback.evaluation.samples import prepare_samples
from llm_feedback.params.evaluate import EvaluateParams, parse_evaluate


def judge_or_score(
    samples: pd.DataFrame,
    config: EvaluateParams,
    cache_path: str | Path | None,
    *,
    progress: bool = True,
    fail_loud: bool = False,
) -> pd.DataFrame:
    """The judgments of `samples`: scored by `config.evaluator` if set, else by the judge."""
    if config.evaluator is not None:
        return score_samples(samples, config, cache_path, fail_loud=fail_loud)
    with open_judge(config, cache_path, progress=progress, fail_loud=fail_loud) as judge:
        return judge_samples(samples, config, judge)


def run_evaluation(
    eval_samples: pd.DataFrame,
    params: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    cache_path: str | Path | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole evaluation outside Kedro: (judgments, metrics) of `eval_samples`."""
    config = parse_evaluate(params, endpoints)
    samples = prepare_samples(eval_samples, config)
    samples = generate_responses(samples, config, cache_path, progress)
    judgments = judge_or_score(samples, config, cache_path, progress=progress)
    return judgments, compute_metrics(judgments, config)
