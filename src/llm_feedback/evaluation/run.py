"""`run_evaluation`: the whole evaluation outside Kedro, in one call."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.evaluation.generation import generate_responses
from llm_feedback.evaluation.panel import judge_all, metrics_with_agreement
from llm_feedback.evaluation.sample_files import samples_from_file
from llm_feedback.evaluation.samples import prepare_samples


def run_evaluation(
    eval_samples: pd.DataFrame,
    params: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    cache_path: str | Path | None = None,
    progress: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole evaluation outside Kedro: (judgments, metrics) of `eval_samples` (native
    rows, or the records of a gold-labelled file: `evaluate.samples_format`); with a
    panel, the judgments are the panel's (each judge's value in `score_<name>`)."""
    # The one library entry that takes YAML-shaped parameters: the params layer maps them.
    from llm_feedback.params.evaluate import parse_evaluate  # noqa: PLC0415 - params above us

    config = parse_evaluate(params, endpoints)
    samples = prepare_samples(samples_from_file(eval_samples, config.samples_format), config)
    samples = generate_responses(samples, config, cache_path, progress)
    judgments, _ = judge_all(samples, config, cache_path, progress=progress)
    return judgments, metrics_with_agreement(judgments, config)
