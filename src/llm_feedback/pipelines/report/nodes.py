"""Thin nodes: adapt parameters and catalog data to `llm_feedback.reporting`."""

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from llm_feedback.errors import ConfigError
from llm_feedback.params import ReportParams, parse_annotate, parse_report
from llm_feedback.parquet_source import ParquetSource
from llm_feedback.reporting import (
    PreferencePairs,
    binarize,
    cost_table,
    describe_run,
    render_markdown_report,
)
from llm_feedback.reporting.judge_card import annotate_judge_key
from llm_feedback.reporting.markdown import judge_card_section

# Figure name -> link in the report. catalog_report.yml saves every `<name>_figure` to
# 08_reporting/figures/<name>.png, next to 08_reporting/report.md, so the links are relative
# and the report renders wherever data_root points.
FIGURE_LINKS = {
    name: f"figures/{name}.png"
    for name in ("rating_distribution", "aspect_heatmap", "score_scatter", "position_bias")
}


def reading_tables(function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` as a node: the judge tables it is given (`ParquetSource`s, see
    catalog.yml) are read whole into DataFrames first."""

    @functools.wraps(function)
    def node_function(*args: Any) -> Any:
        return function(*(arg.read() if isinstance(arg, ParquetSource) else arg for arg in args))

    return node_function


def read_params(report: Mapping[str, Any]) -> ReportParams:
    return parse_report(report)


def estimate_costs(
    completions: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    critiques: pd.DataFrame,
    params: ReportParams,
) -> pd.DataFrame:
    return cost_table(completions, aspect_annotations, critiques, params.prices)


def preference_pairs(
    completions: pd.DataFrame,
    overall_scores: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    decontamination_questions: str | pd.DataFrame,
    params: ReportParams,
) -> PreferencePairs:
    return binarize(
        completions,
        overall_scores,
        aspect_annotations,
        score=params.pairs.score,
        strategy=params.pairs.strategy,
        seed=params.pairs.seed,
        decontaminate=question_list(decontamination_questions),
        layout=params.pairs.layout,
    )


def question_list(questions: str | pd.DataFrame) -> list[str]:
    """The questions to keep out of the preference pairs, from a text file with one question
    a line (blank lines and `#` comments skipped) or a one-column table, e.g. TruthfulQA.csv
    loaded with `load_args: {usecols: [Question]}`."""
    if isinstance(questions, pd.DataFrame):
        if questions.shape[1] != 1:
            raise ConfigError(
                "decontamination_questions: expected one column of questions, got "
                f"{list(questions.columns)}; pick one with load_args: {{usecols: [...]}}"
            )
        return [str(question) for question in questions.iloc[:, 0].dropna()]
    return [
        line.strip()
        for line in questions.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def annotate_judge(annotate: Mapping[str, Any], endpoints: Mapping[str, Any]) -> str:
    """The key of annotate's judge, under which a validated judge's card is filed."""
    return annotate_judge_key(parse_annotate(annotate, endpoints))


def render_report(
    input_versions: Mapping[str, str],
    params: ReportParams,
    completions: pd.DataFrame,
    judge_cards: pd.DataFrame,
    judge_key: str,
    **tables: pd.DataFrame,
) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    run_info = {
        **describe_run(completions, tables["cost_table"], when),
        "preference pairs": params.pairs.describe(),
    }
    figures, omitted = dict(FIGURE_LINKS), {}
    if tables["position_consistency"].empty:
        del figures["position_bias"]
        omitted["position_bias"] = (
            "each completion was judged in one order only; set annotate.n_shuffles to 2 or "
            "more to measure position effects"
        )
    report = render_markdown_report(tables, figures, input_versions, run_info, omitted)
    return report + judge_card_section(judge_cards, judge_key)
