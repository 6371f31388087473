"""`run_evaluation`: the whole evaluation outside Kedro, in one call."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.evaluation.generation import generate_responses
from llm_feedback.evaluation.judging import judge_samples, open_judge
from llm_feedback.evaluation.metrics import compute_metrics
from llm_feedback.evaluation.samples import prepare_samples
from llm_feedback.params.evaluate import parse_evaluate


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
    with open_judge(config, cache_path, progress=progress) as judge:
        judgments = judge_samples(samples, config, judge)
    return judgments, compute_metrics(judgments, config)
