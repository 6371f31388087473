"""Thin nodes: `eval_samples` in, `eval_judgments` and `eval_metrics` out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.evaluation import (
    EvaluationConfig,
    compute_metrics,
    generate_responses,
    judge_endpoint,
    judge_samples,
    prepare_samples,
)
from llm_feedback.judges import Judge


def prepare(eval_samples: pd.DataFrame, evaluate: Mapping[str, Any],
            endpoints: Mapping[str, Any]) -> pd.DataFrame:
    config = EvaluationConfig.from_params(evaluate)
    judge_endpoint(config, endpoints)  # a bad judge endpoint fails here, before any call
    return prepare_samples(eval_samples, config)


def generate(samples: pd.DataFrame, evaluate: Mapping[str, Any],
             endpoints: Mapping[str, Any], request_cache: str | None) -> pd.DataFrame:
    return generate_responses(samples, EvaluationConfig.from_params(evaluate), endpoints,
                              request_cache)


def judge(samples: pd.DataFrame, evaluate: Mapping[str, Any],
          endpoints: Mapping[str, Any], request_cache: str | None) -> pd.DataFrame:
    config = EvaluationConfig.from_params(evaluate)
    with Judge(judge_endpoint(config, endpoints), request_cache,
               refresh=config.overwrite_results, progress=True,
               sampling=config.judge_sampling, max_reasks=config.max_reasks) as judge_client:
        return judge_samples(samples, config, judge_client)


def summarise(eval_judgments: pd.DataFrame, evaluate: Mapping[str, Any]) -> pd.DataFrame:
    return compute_metrics(eval_judgments, EvaluationConfig.from_params(evaluate))
