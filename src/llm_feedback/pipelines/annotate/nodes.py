"""Thin nodes: DataFrames in, one judge client per node, tables out.

The judge stages return `SpooledTable`s (their rows on disk, in order): the catalog's
ParquetDataset writes one a row group at a time, as it writes a DataFrame, and loads a
DataFrame back.
"""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.annotation import ultrafeedback_export
from llm_feedback.annotation.export import UltraFeedbackExport
from llm_feedback.annotation.score_fix import ASPECT_COLUMNS_READ, CRITIQUE_COLUMNS_READ
from llm_feedback.annotation.stages import (
    aspect_annotations_table,
    critiques_table,
    fix_overall_scores,
    usable_completions,
)
from llm_feedback.backends import LLMClient
from llm_feedback.hub_card import export_card, feature_list
from llm_feedback.parquet_source import ParquetSource
from llm_feedback.pipelines.parsed_params import annotate_params
from llm_feedback.schema import ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA
from llm_feedback.spool import SpooledTable
from llm_feedback.templates import use_template_folder


def rate_aspects(
    completions: pd.DataFrame,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
    request_cache: str | None,
) -> SpooledTable:
    params = annotate_params(annotate, endpoints, prompt_templates)
    usable_completions(completions)  # bad input fails before the judge starts
    use_template_folder(params.prompt_templates)
    with LLMClient(params.endpoint, request_cache) as judge:
        return aspect_annotations_table(
            completions,
            judge,
            aspects=params.aspects,
            n_shuffles=params.n_shuffles,
            shuffle_seed=params.shuffle_seed,
            aspect_orders=params.aspect_orders,
            max_reasks=params.max_reasks,
            sampling=params.aspect_sampling,
            fail_loud=True,
        )


def critique(
    completions: pd.DataFrame,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
    request_cache: str | None,
) -> SpooledTable:
    params = annotate_params(annotate, endpoints, prompt_templates)
    usable_completions(completions)
    use_template_folder(params.prompt_templates)
    with LLMClient(params.endpoint, request_cache) as judge:
        return critiques_table(
            completions,
            judge,
            max_reasks=params.max_reasks,
            sampling=params.critique_sampling,
            fail_loud=True,
        )


def fix_scores(
    completions: pd.DataFrame,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
    request_cache: str | None,
) -> pd.DataFrame:
    params = annotate_params(annotate, endpoints, prompt_templates)
    # Only the columns the fix reads: the tables' rationales and replies stay on disk.
    aspect_ratings = aspect_annotations.read(ASPECT_COLUMNS_READ)
    critique_scores = critiques.read(CRITIQUE_COLUMNS_READ)
    use_template_folder(params.prompt_templates)
    with LLMClient(params.endpoint, request_cache) as judge:
        return fix_overall_scores(
            completions,
            aspect_ratings,
            critique_scores,
            judge,
            flip_threshold=params.score_fix.flip_threshold,
            reannotate_threshold=params.score_fix.reannotate_threshold,
            aspects=params.fine_grained_aspects,
            max_reasks=params.max_reasks,
            sampling=params.critique_sampling,
            fail_loud=True,
        )


def export_ultrafeedback(
    completions: pd.DataFrame,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    overall_scores: pd.DataFrame,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
) -> UltraFeedbackExport:
    params = annotate_params(annotate, endpoints, prompt_templates)
    # Built a chunk of prompts at a time as the catalog writes it, each chunk reading only
    # its rows of the judge tables.
    return ultrafeedback_export(
        completions, aspect_annotations, critiques, overall_scores, aspects=params.aspects
    )


def card_of_export(completions: pd.DataFrame, parameters: Mapping[str, Any]) -> str:
    """The dataset card beside the export, its `dataset_info` features those of the public
    columns."""
    return export_card(completions, parameters, feature_list(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA))
