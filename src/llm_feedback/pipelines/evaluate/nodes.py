"""Thin nodes: `eval_samples` in; `eval_judgments`, `eval_panel_judgments`,
`eval_metrics`, and the judge's card (`judge_validation`, `eval_annotator_agreement`,
`eval_judge_card`, `judge_accuracy_figure`) and the judgment viewer out."""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from llm_feedback.evaluation import (
    SAMPLES_PATH_ATTR,
    evaluation_judge_key,
    generate_responses,
    judge_all,
    metrics_with_agreement,
    prepare_samples,
    samples_from_file,
    validate_evaluation,
    validation_set_name,
)
from llm_feedback.evaluation.benchmarks import benchmark_name, metrics_per_benchmark, with_benchmark
from llm_feedback.evaluation.judge_validation import check_judge_requirement, requirement_lines
from llm_feedback.params.blocks import EndpointsBlock
from llm_feedback.pipelines.parsed_params import evaluate_params
from llm_feedback.validation.card import accuracy_figure, card_lines
from llm_feedback.viewer import StaticSite, evaluation_site

Params = Mapping[str, Any]


def prepare(
    eval_samples: pd.DataFrame, evaluate: Params, endpoints: EndpointsBlock
) -> pd.DataFrame:
    params = evaluate_params(evaluate, endpoints)
    # Every row names its benchmark: its own, else evaluate.benchmark or the file's name.
    name = benchmark_name(params.benchmark, eval_samples.attrs.get(SAMPLES_PATH_ATTR))
    return prepare_samples(
        samples_from_file(
            with_benchmark(eval_samples, name),
            params.samples_format,
            baseline=params.ranking.baseline,
            pairwise=params.kind.compares,
        ),
        params,
    )


def generate(
    samples: pd.DataFrame, evaluate: Params, endpoints: EndpointsBlock, request_cache: str | None
) -> pd.DataFrame:
    params = evaluate_params(evaluate, endpoints)
    return generate_responses(samples, params, request_cache, fail_loud=True)


def judge(
    samples: pd.DataFrame, evaluate: Params, endpoints: EndpointsBlock, request_cache: str | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return judge_all(samples, evaluate_params(evaluate, endpoints), request_cache, fail_loud=True)


def validate_judge(
    eval_judgments: pd.DataFrame,
    samples: pd.DataFrame,
    evaluate: Params,
    endpoints: EndpointsBlock,
    previous_cards: pd.DataFrame,
    eval_samples: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, str, Figure]:
    params = evaluate_params(evaluate, endpoints)
    validation = validate_evaluation(
        eval_judgments,
        samples,
        params,
        previous_cards,
        validation_set=validation_set_name(params, eval_samples.attrs.get(SAMPLES_PATH_ATTR)),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    key = evaluation_judge_key(params)
    card = (
        card_lines(validation.cards, key)
        if key is not None
        else "A panel of judges or an evaluator scored this run: no single judge's card.\n"
    )
    if key is not None and params.logprobs_off_reason is not None:
        card += f"\nLog-probability verdicts: off, because {params.logprobs_off_reason}.\n"
    card += requirement_lines(validation.cards, params)
    figure = accuracy_figure(validation.cards, key)
    return validation.cards, validation.annotators, validation.metrics, card, figure


def summarise(
    eval_judgments: pd.DataFrame,
    evaluate: Params,
    endpoints: EndpointsBlock,
    validation_metrics: pd.DataFrame,
    judge_cards: pd.DataFrame,
) -> pd.DataFrame:
    params = evaluate_params(evaluate, endpoints)
    # The gate first: a judge whose card falls short of evaluate.judge_requirement (or has
    # none) stops the run here, before eval_metrics is written (`validation.gate`).
    check_judge_requirement(judge_cards, params)
    metrics = metrics_per_benchmark(
        eval_judgments, lambda part: metrics_with_agreement(part, params)
    )
    if validation_metrics.empty:
        return metrics
    if metrics["benchmark"].nunique() == 1:  # the judge validated on this benchmark
        validation_metrics = validation_metrics.assign(benchmark=metrics["benchmark"].iloc[0])
    return pd.concat([metrics, validation_metrics], ignore_index=True).astype(metrics.dtypes)


def judgment_viewer(samples: pd.DataFrame, eval_judgments: pd.DataFrame) -> StaticSite:
    return evaluation_site(samples, eval_judgments)
