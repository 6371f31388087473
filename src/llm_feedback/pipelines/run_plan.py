"""The priced plan of a Kedro run: what `llm_feedback.runs.plan` needs, taken from the run's
pipeline and catalog. Stages the run includes are planned; their inputs come from the
catalog, or, where the run itself produces them, from the run's own free nodes (sampling)
or placeholders (completions not generated yet)."""

from collections.abc import Mapping
from typing import Any

import pandas as pd
from kedro.io import CatalogProtocol
from kedro.pipeline import Pipeline

from llm_feedback.evaluation import prepare_samples, samples_from_file
from llm_feedback.params import parse_annotate, parse_evaluate, parse_generate, parse_report
from llm_feedback.params.run import CheckedRun
from llm_feedback.pipelines.sample.nodes import combine_sources, sample
from llm_feedback.runs.plan import plan_evaluation, plan_run
from llm_feedback.storage.parquet_source import as_frame

# Node name -> the plan's stage names, for the nodes that call a judge.
JUDGE_STAGES = {"judge_completions": ("annotate", "critique")}
# The evaluate node whose calls the plan prices (with `planning_evaluate`).
EVALUATE_NODE = "check_eval_samples"


def _sampled_prompts(
    nodes: set[str], catalog: CatalogProtocol, parameters: Mapping[str, Any]
) -> pd.DataFrame:
    if "sample_prompts" not in nodes:
        return as_frame(catalog.load("sampled_prompts"))
    blocks = [parameters.get(name) for name in ("sample", "model_pool", "prompt_templates")]
    if "combine_prompt_sources" in nodes:
        # The plan draws from the prompts decontamination keeps, as the run will.
        decontamination = parameters.get("decontamination")
        raw = combine_sources(catalog.load("raw_prompt_files"), *blocks, decontamination)[
            "raw_prompts"
        ]
    else:
        raw = as_frame(catalog.load("raw_prompts"))
    # Sampling is free and seeded: the plan draws exactly what the run will draw.
    return sample(raw, *blocks)


def plan_for_run(
    pipeline: Pipeline,
    catalog: CatalogProtocol,
    parameters: Mapping[str, Any],
    checked: CheckedRun,
) -> pd.DataFrame:
    """`checked`: the blocks the hook parsed (a block the run's nodes do not read, such as
    `report` for a run without the report pipeline, is parsed here).

    Args:
        pipeline: the pipeline the run would run.
        catalog: the run's catalog (the tables the run would read).
        parameters: the run's parameters.
        checked: the blocks the hook parsed.

    Returns:
        The plan (`runs.plan.plan_run` and the evaluate stages').
    """
    nodes = {node.name for node in pipeline.nodes}
    endpoints = parameters.get("endpoints")
    generate = None
    if "generate_completions" in nodes:
        generate = checked.generate or parse_generate(
            endpoints, parameters.get("model_pool"), parameters.get("generation")
        )
    judge_stages = [
        stage for name, stages in JUDGE_STAGES.items() if name in nodes for stage in stages
    ]
    annotate = None
    if judge_stages:
        annotate = checked.annotate or parse_annotate(
            parameters.get("annotate"), endpoints, parameters.get("prompt_templates")
        )
    report = checked.report or parse_report(parameters.get("report"))
    needs_sample = generate is not None
    plan = plan_run(
        sampled=_sampled_prompts(nodes, catalog, parameters) if needs_sample else None,
        completions=as_frame(catalog.load("completions")) if annotate and not generate else None,
        generate=generate,
        annotate=annotate,
        judge_stages=judge_stages,
        prices=report.prices,
        cache_path=parameters.get("request_cache"),
    )
    if EVALUATE_NODE not in nodes:
        return plan
    # The same checks as the run's own first nodes: bad samples fail here, before any call.
    config = checked.evaluate or parse_evaluate(parameters.get("evaluate"), endpoints)
    samples = prepare_samples(
        samples_from_file(
            catalog.load("eval_samples"),
            config.samples_format,
            baseline=config.ranking.baseline,
            pairwise=config.kind.compares,
        ),
        config,
    )
    evaluation = plan_evaluation(samples, config, report.prices, parameters.get("request_cache"))
    return pd.concat([plan, evaluation], ignore_index=True) if len(plan) else evaluation
