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
from llm_feedback.pipelines.parsed_params import evaluate_params
from llm_feedback.viewer import StaticSite, evaluation_site

Params = Mapping[str, Any]


def prepare(eval_samples: pd.DataFrame, evaluate: Params, endpoints: Params) -> pd.DataFrame:
    return prepare_samples(eval_samples, evaluate_params(evaluate, endpoints))


def generate(
    samples: pd.DataFrame, evaluate: Params, endpoints: Params, request_cache: str | None
) -> pd.DataFrame:
    params = evaluate_params(evaluate, endpoints)
    return generate_responses(samples, params, request_cache, fail_loud=True)


def judge(
    samples: pd.DataFrame, evaluate: Params, endpoints: Params, request_cache: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return judge_all(samples, evaluate_params(evaluate, endpoints), request_cache, fail_loud=True)


def summarise(eval_judgments: pd.DataFrame, evaluate: Params, endpoints: Params) -> pd.DataFrame:
    return metrics_with_agreement(eval_judgments, evaluate_params(evaluate, endpoints))


def judgment_viewer(samples: pd.DataFrame, eval_judgments: pd.DataFrame) -> StaticSite:
    return evaluation_site(samples, eval_judgments)
