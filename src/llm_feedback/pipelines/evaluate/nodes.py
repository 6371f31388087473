"""Thin nodes: `eval_samples` in; `eval_judgments`, `eval_panel_judgments` and
`eval_metrics` out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.evaluation import (
    generate_responses,
    judge_all,
    metrics_with_agreement,
    prepare_samples,
)
from llm_feedback.params import EvaluateParams, parse_evaluate


def read_params(evaluate: Mapping[str, Any], endpoints: Mapping[str, Any]) -> EvaluateParams:
    return parse_evaluate(evaluate, endpoints)


def prepare(eval_samples: pd.DataFrame, params: EvaluateParams) -> pd.DataFrame:
    return prepare_samples(eval_samples, params)


def generate(
    samples: pd.DataFrame, params: EvaluateParams, request_cache: str | None
) -> pd.DataFrame:
    return generate_responses(samples, params, request_cache, fail_loud=True)


def judge(
    samples: pd.DataFrame, params: EvaluateParams, request_cache: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return judge_all(samples, params, request_cache, fail_loud=True)


def summarise(eval_judgments: pd.DataFrame, params: EvaluateParams) -> pd.DataFrame:
    return metrics_with_agreement(eval_judgments, params)
