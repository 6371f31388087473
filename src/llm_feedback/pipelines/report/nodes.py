"""Thin nodes: adapt parameters and catalog data to `llm_feedback.reporting`."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.annotation.settings import parse_annotate_settings
from llm_feedback.endpoints import parse_endpoints
from llm_feedback.errors import ConfigError
from llm_feedback.reporting import (
    PreferencePairs,
    binarize,
    cost_table,
    render_markdown_report,
)

# Figure name -> link in the report. catalog_report.yml saves every `<name>_figure` to
# 08_reporting/figures/<name>.png, next to 08_reporting/report.md, so the links are relative
# and the report renders wherever data_root points.
FIGURE_LINKS = {
    name: f"figures/{name}.png"
    for name in ("rating_distribution", "aspect_heatmap", "score_scatter", "position_bias")
}
PAIR_SETTINGS = ("score", "strategy", "seed")


IN_PROCESS_BACKENDS = ("local", "vllm")
NO_COST = {"prompt_per_1k": 0.0, "completion_per_1k": 0.0}


def estimate_costs(
    completions: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    critiques: pd.DataFrame,
    prices: Mapping[str, Mapping[str, float]] | None,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
) -> pd.DataFrame:
    # Aspect ratings and critiques come from the same judge endpoint (see annotate).
    judge = parse_annotate_settings(annotate, endpoints).endpoint
    # Models run on this machine (embedded or in-process vLLM) cost nothing per token.
    in_process = {name for name, config in parse_endpoints(endpoints).items()
                  if config.backend in IN_PROCESS_BACKENDS}
    free = dict.fromkeys(
        completions.loc[completions["endpoint"].isin(in_process), "model"].dropna().unique(),
        NO_COST,
    )
    if judge.backend in IN_PROCESS_BACKENDS:
        for table in (aspect_annotations, critiques):
            free.update(dict.fromkeys(table["judge_model"].dropna().unique(), NO_COST))
    return cost_table(
        completions,
        aspect_annotations,
        critiques,
        prices={**free, **(prices or {})},
        stage_endpoints={"annotate": judge.name, "critique": judge.name},
    )


def preference_pairs(
    completions: pd.DataFrame,
    feedback: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    decontamination_questions: str | pd.DataFrame,
    pairs: Mapping[str, Any],
) -> PreferencePairs:
    check_pair_settings(pairs)
    return binarize(
        completions,
        feedback,
        aspect_annotations,
        score=pairs["score"],
        strategy=pairs["strategy"],
        seed=pairs["seed"],
        decontaminate=question_list(decontamination_questions),
    )


def check_pair_settings(pairs: Mapping[str, Any]) -> None:
    missing = [key for key in PAIR_SETTINGS if key not in pairs]
    unknown = sorted(set(pairs) - set(PAIR_SETTINGS))
    if missing or unknown:
        raise ConfigError(
            f"report.pairs: expected exactly {', '.join(PAIR_SETTINGS)}; "
            f"missing {missing or 'none'}, unknown {unknown or 'none'}"
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


def render_report(
    input_versions: Mapping[str, str], pairs: Mapping[str, Any], **tables: pd.DataFrame
) -> str:
    run_info = {
        "preference pairs": (
            f"score {pairs['score']}, strategy {pairs['strategy']}, seed {pairs['seed']}"
        )
    }
    return render_markdown_report(tables, FIGURE_LINKS, input_versions, run_info)
