"""Thin nodes: published records in, the project's tables, the score fix and the records
with their fixed scores out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.annotation import ultrafeedback_export
from llm_feedback.annotation.published import PublishedExport, PublishedTables
from llm_feedback.annotation.rescore import fix_overall_scores
from llm_feedback.annotation.score_fix import (
    ASPECT_COLUMNS_READ,
    CRITIQUE_COLUMNS_READ,
    collect_scores,
    plan_score_fix,
)
from llm_feedback.annotation.stages import aspect_annotations_table, critiques_table
from llm_feedback.backends import LLMClient
from llm_feedback.params.blocks import EndpointsBlock
from llm_feedback.pipelines.parsed_params import ultrafeedback_fix_params
from llm_feedback.storage.parquet_source import ParquetSource
from llm_feedback.storage.spool import SpooledTable

# Each node takes the four parameter blocks (PARAMS in pipeline.py) and parses them once
# per run through `parsed_params`, so that every Kedro slice of the pipeline has them.
Blocks = Mapping[str, Any]


def read_records(
    ultrafeedback_fix: Blocks,
    annotate: Blocks,
    endpoints: EndpointsBlock,
    prompt_templates: str | None,
) -> tuple[pd.DataFrame, SpooledTable, SpooledTable]:
    params = ultrafeedback_fix_params(ultrafeedback_fix, annotate, endpoints, prompt_templates)
    tables = PublishedTables(params.records_path, params.judge_model)
    return tables.completions, tables.aspect_annotations, tables.critiques


def rejudge_aspects(
    completions: pd.DataFrame,
    published: ParquetSource,
    ultrafeedback_fix: Blocks,
    annotate: Blocks,
    endpoints: EndpointsBlock,
    prompt_templates: str | None,
    request_cache: str | None,
) -> pd.DataFrame:
    """The published ratings, those of `rejudge_aspects` replaced by the judge's."""
    params = ultrafeedback_fix_params(ultrafeedback_fix, annotate, endpoints, prompt_templates)
    kept = published.read()
    if not params.rejudge_aspects:
        return kept
    annotate = params.annotate
    with LLMClient(annotate.endpoint, request_cache) as judge:
        rejudged = aspect_annotations_table(
            completions,
            judge,
            aspects=params.rejudge_aspects,
            n_shuffles=annotate.n_shuffles,
            shuffle_seed=annotate.shuffle_seed,
            aspect_orders=annotate.aspect_orders,
            max_reasks=annotate.max_reasks,
            sampling=annotate.aspect_sampling,
            fail_loud=True,
            templates=annotate.templates,
        ).frame()
    kept = kept[~kept["aspect"].isin(params.rejudge_aspects)]
    return pd.concat([kept, rejudged[kept.columns]], ignore_index=True)


def recritique(
    completions: pd.DataFrame,
    published: ParquetSource,
    ultrafeedback_fix: Blocks,
    annotate: Blocks,
    endpoints: EndpointsBlock,
    prompt_templates: str | None,
    request_cache: str | None,
) -> pd.DataFrame | SpooledTable:
    """The published critiques, or (`recritique`) the judge's own."""
    params = ultrafeedback_fix_params(ultrafeedback_fix, annotate, endpoints, prompt_templates)
    if not params.recritique:
        return published.read()
    annotate = params.annotate
    with LLMClient(annotate.endpoint, request_cache) as judge:
        return critiques_table(
            completions,
            judge,
            max_reasks=annotate.max_reasks,
            sampling=annotate.critique_sampling,
            fail_loud=True,
            templates=annotate.templates,
        )


def fix_scores(
    completions: pd.DataFrame,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    ultrafeedback_fix: Blocks,
    annotate: Blocks,
    endpoints: EndpointsBlock,
    prompt_templates: str | None,
    request_cache: str | None,
) -> pd.DataFrame:
    params = ultrafeedback_fix_params(ultrafeedback_fix, annotate, endpoints, prompt_templates)
    annotate = params.annotate
    aspect_ratings = aspect_annotations.read(ASPECT_COLUMNS_READ)
    critique_scores = critiques.read(CRITIQUE_COLUMNS_READ)
    thresholds = annotate.score_fix
    if not params.reannotate:
        scores = collect_scores(
            completions, aspect_ratings, critique_scores, annotate.fine_grained_aspects
        )
        return plan_score_fix(scores, thresholds.flip_threshold, thresholds.reannotate_threshold)
    with LLMClient(annotate.endpoint, request_cache) as judge:
        return fix_overall_scores(
            completions,
            aspect_ratings,
            critique_scores,
            judge,
            flip_threshold=thresholds.flip_threshold,
            reannotate_threshold=thresholds.reannotate_threshold,
            aspects=annotate.fine_grained_aspects,
            max_reasks=annotate.max_reasks,
            sampling=annotate.critique_sampling,
            fail_loud=True,
            templates=annotate.templates,
        )


def export_records(
    completions: pd.DataFrame,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    overall_scores: pd.DataFrame,
) -> PublishedExport:
    # Not re-annotated (reannotate: false): the candidate keeps its published score.
    planned = overall_scores["fix_action"] == "reannotate"
    scores = overall_scores.assign(
        overall_score_fixed=overall_scores["overall_score_fixed"].mask(
            planned, overall_scores["overall_score_original"]
        )
    )
    return PublishedExport(ultrafeedback_export(completions, aspect_annotations, critiques, scores))
