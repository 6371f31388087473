"""The priced plan of a Kedro run: what `llm_feedback.planning` needs, taken from the run's
pipeline and catalog. Stages the run includes are planned; their inputs come from the
catalog, or, where the run itself produces them, from the run's own free nodes (sampling)
or placeholders (completions not generated yet)."""

from collections.abc import Mapping
from typing import Any

import pandas as pd
from kedro.io import CatalogProtocol
from kedro.pipeline import Pipeline

from llm_feedback.errors import ConfigError
from llm_feedback.params import parse_annotate, parse_generate, parse_report
from llm_feedback.params.run import CheckedRun
from llm_feedback.pipelines.sample.nodes import combine_sources, sample
from llm_feedback.planning import plan_run
from llm_feedback.templates import use_template_folder

# Node name -> the plan's stage name, for the nodes that call a judge.
JUDGE_STAGES = {"rate_aspects": "annotate", "critique": "critique"}
# Pipelines whose calls the plan does not estimate: a plan without them would read as free.
UNPLANNED = ("evaluate",)


def _sampled_prompts(
    nodes: set[str], catalog: CatalogProtocol, parameters: Mapping[str, Any]
) -> pd.DataFrame:
    if "sample_prompts" not in nodes:
        return catalog.load("sampled_prompts")
    blocks = [parameters.get(name) for name in ("sample", "model_pool", "prompt_templates")]
    if "combine_prompt_sources" in nodes:
        raw = combine_sources(catalog.load("raw_prompt_files"), *blocks)
    else:
        raw = catalog.load("raw_prompts")
    # Sampling is free and seeded: the plan draws exactly what the run will draw.
    return sample(raw, *blocks)


def plan_for_run(
    pipeline: Pipeline,
    catalog: CatalogProtocol,
    parameters: Mapping[str, Any],
    checked: CheckedRun,
) -> pd.DataFrame:
    """`checked`: the blocks the hook parsed (a block the run's nodes do not read, such as
    `report` for a run without the report pipeline, is parsed here)."""
    unplanned = sorted({tag for node in pipeline.nodes for tag in node.tags} & set(UNPLANNED))
    if unplanned:
        raise ConfigError(
            f"plan_only / max_cost_usd: the {', '.join(unplanned)} pipeline's calls are not "
            "planned; plan the feedback pipelines only (sample, generate, annotate, report)"
        )
    nodes = {node.name for node in pipeline.nodes}
    endpoints = parameters.get("endpoints")
    generate = None
    if "generate_completions" in nodes:
        generate = checked.generate or parse_generate(
            endpoints, parameters.get("model_pool"), parameters.get("generation")
        )
    judge_stages = [stage for name, stage in JUDGE_STAGES.items() if name in nodes]
    annotate = None
    if judge_stages:
        annotate = checked.annotate or parse_annotate(
            parameters.get("annotate"), endpoints, parameters.get("prompt_templates")
        )
        use_template_folder(annotate.prompt_templates)  # the plan prices the prompts sent
    report = checked.report or parse_report(parameters.get("report"))
    needs_sample = generate is not None
    return plan_run(
        sampled=_sampled_prompts(nodes, catalog, parameters) if needs_sample else None,
        completions=catalog.load("completions") if annotate and not generate else None,
        generate=generate,
        annotate=annotate,
        judge_stages=judge_stages,
        prices=report.prices,
        cache_path=parameters.get("request_cache"),
    )
