"""Thin nodes: tables in, one judge client per node, tables out.

The completions come as a `ParquetSource` (`completions@chunks`), which the stages read a
chunk of prompts at a time; a DataFrame works too. The judge stages return spooled tables
(`SpooledTable`, `FrameSpool`: their rows on disk, in order): the catalog's ParquetDataset
writes one a row group at a time, as it writes a DataFrame, and loads a DataFrame back.
"""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.annotation import ultrafeedback_export
from llm_feedback.annotation.export import UltraFeedbackExport, export_schema
from llm_feedback.annotation.rescore import overall_scores_table
from llm_feedback.annotation.stages import (
    Completions,
    aspect_annotations_table,
    check_completions,
    critiques_table,
)
from llm_feedback.backends import LLMClient
from llm_feedback.pipelines.parsed_params import annotate_params
from llm_feedback.publishing.dataset_card import export_card, feature_list
from llm_feedback.storage.parquet_source import ParquetSource, as_frame
from llm_feedback.storage.schema import ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA
from llm_feedback.storage.spool import FrameSpool, SpooledTable


def rate_aspects(
    completions: Completions,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
    request_cache: str | None,
) -> SpooledTable:
    params = annotate_params(annotate, endpoints, prompt_templates)
    check_completions(completions)  # bad input fails before the judge starts
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
            templates=params.templates,
        )


def critique(
    completions: Completions,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
    request_cache: str | None,
) -> SpooledTable:
    params = annotate_params(annotate, endpoints, prompt_templates)
    check_completions(completions)
    with LLMClient(params.endpoint, request_cache) as judge:
        return critiques_table(
            completions,
            judge,
            max_reasks=params.max_reasks,
            sampling=params.critique_sampling,
            fail_loud=True,
            templates=params.templates,
        )


def fix_scores(
    completions: Completions,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    annotate: Mapping[str, Any],
    endpoints: Mapping[str, Any],
    prompt_templates: str | None,
    request_cache: str | None,
) -> FrameSpool:
    params = annotate_params(annotate, endpoints, prompt_templates)
    with LLMClient(params.endpoint, request_cache) as judge:
        # A chunk of prompts at a time, each reading only its rows of the judge tables.
        return overall_scores_table(
            completions,
            aspect_annotations,
            critiques,
            judge,
            flip_threshold=params.score_fix.flip_threshold,
            reannotate_threshold=params.score_fix.reannotate_threshold,
            aspects=params.fine_grained_aspects,
            max_reasks=params.max_reasks,
            sampling=params.critique_sampling,
            fail_loud=True,
            templates=params.templates,
        )


def export_ultrafeedback(
    completions: Completions,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    overall_scores: ParquetSource,
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


# What the card counts: prompts, sources, models and principles (not the texts).
CARD_COLUMNS = ["prompt_id", "source", "model", "principle"]


def card_of_export(
    completions: Completions, parameters: Mapping[str, Any], contamination_counts: pd.DataFrame
) -> str:
    """The dataset card beside the export, its `dataset_info` features those of the public
    columns, its decontamination counts those of the sample stage."""
    features = feature_list(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)
    params = annotate_params(
        parameters.get("annotate"), parameters.get("endpoints"), parameters.get("prompt_templates")
    )
    return export_card(
        as_frame(completions, CARD_COLUMNS),
        parameters,
        features,
        contamination=contamination_counts,
        export_schema=export_schema(params.aspects),
    )
