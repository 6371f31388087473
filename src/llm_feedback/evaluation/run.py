"""`run_evaluation`: the whole evaluation outside Kedro, in one call, in either form.

`run_evaluation(eval_samples, params, endpoints)` runs the evaluate pipeline's library on
a table (sync); `await run_evaluation(dataset, model, evaluator, output_dir, ...)` is
genlm.eval's runner over a model adaptor and an evaluator (`adaptor.evaluate_instances`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.evaluation.adaptor import check_options, evaluate_instances
from llm_feedback.evaluation.generation import generate_responses
from llm_feedback.evaluation.panel import judge_all, metrics_with_agreement
from llm_feedback.evaluation.sample_files import samples_from_file
from llm_feedback.evaluation.samples import prepare_samples


def run_evaluation(
    eval_samples: Any = None,
    params: Any = None,
    endpoints: Any = None,
    cache_path: str | Path | None = None,
    progress: bool = True,
    *,
    dataset: Any = None,
    model: Any = None,
    evaluator: Any = None,
    output_dir: str | Path | None = None,
    n_replicates: int = 1,
    overwrite_results: bool = False,
    overwrite_outputs: bool = False,
    max_instances: float = math.inf,
    max_concurrent: int = 1,
    verbosity: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame] | Awaitable[dict[str, Any]]:
    """The whole evaluation outside Kedro.

    Table form: (judgments, metrics) of the `eval_samples` table under the evaluate
    `params` and `endpoints`; with a panel, the judgments are the panel's (each judge's
    value in `score_<name>`). genlm.eval form (a `model` and `evaluator`, by keyword or in
    the second and third places; the fourth is then `output_dir`): an awaitable of the
    results dict of `adaptor.evaluate_instances`, its settings checked at the call.

    Args:
        eval_samples: table form: the samples (a DataFrame); genlm form: the instances.
        params: table form: the evaluate block; genlm form: the model, in this place.
        endpoints: table form: the endpoint definitions; genlm form: the evaluator.
        cache_path: table form: the request cache (None: no cache); genlm form: the output folder.
        progress: show progress bars.
        dataset: genlm form: the instances.
        model: genlm form: the model adaptor.
        evaluator: genlm form: the evaluator.
        output_dir: genlm form: where results are written.
        n_replicates: genlm form: replicates per instance.
        overwrite_results: genlm form: evaluate again what has results.
        overwrite_outputs: genlm form: generate again what has outputs.
        max_instances: genlm form: how many instances at most.
        max_concurrent: genlm form: instances run at once.
        verbosity: genlm form: how much to print.

    Returns:
        Table form: (judgments, metrics); genlm form: an awaitable of the results dict.
    """
    table_form = model is None and evaluator is None and dataset is None
    if table_form and isinstance(eval_samples, pd.DataFrame):
        return _run_table(eval_samples, params or {}, endpoints or {}, cache_path, progress)
    check_options(n_replicates, overwrite_results, overwrite_outputs)
    return evaluate_instances(
        eval_samples if dataset is None else dataset,
        params if model is None else model,
        endpoints if evaluator is None else evaluator,
        cache_path if output_dir is None else output_dir,
        n_replicates=n_replicates,
        overwrite_results=overwrite_results,
        overwrite_outputs=overwrite_outputs,
        max_instances=max_instances,
        max_concurrent=max_concurrent,
        verbosity=verbosity,
    )


def _run_table(
    eval_samples: pd.DataFrame,
    params: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    cache_path: str | Path | None,
    progress: bool,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole evaluation outside Kedro: (judgments, metrics) of `eval_samples` (native
    rows, or the records of a gold-labelled file: `evaluate.samples_format`); with a
    panel, the judgments are the panel's (each judge's value in `score_<name>`)."""
    # The one library entry that takes YAML-shaped parameters: the params layer maps them.
    from llm_feedback.params.evaluate import parse_evaluate  # noqa: PLC0415 - params above us

    config = parse_evaluate(params, endpoints)
    samples = prepare_samples(
        samples_from_file(
            eval_samples,
            config.samples_format,
            baseline=config.ranking.baseline,
            pairwise=config.kind.compares,
        ),
        config,
    )
    samples = generate_responses(samples, config, cache_path, progress)
    judgments, _ = judge_all(samples, config, cache_path, progress=progress)
    return judgments, metrics_with_agreement(judgments, config)
