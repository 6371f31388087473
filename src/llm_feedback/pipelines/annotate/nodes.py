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
from llm_feedback.annotation.rescore_ahead import ScoreFixAhead
from llm_feedback.annotation.stages import Completions, check_completions, judge_tables
from llm_feedback.backends import LLMClient
from llm_feedback.params.blocks import EndpointsBlock
from llm_feedback.pipelines.parsed_params import annotate_params
from llm_feedback.publishing.dataset_card import export_card, feature_list
from llm_feedback.runs.record import card_lineage, recorded_judge
from llm_feedback.storage.parquet_source import ParquetSource, as_frame
from llm_feedback.storage.schema import ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA
from llm_feedback.storage.spool import FrameSpool, SpooledTable


def judge_completions(
    completions: Completions,
    annotate: Mapping[str, Any],
    endpoints: EndpointsBlock,
    prompt_templates: str | None,
    request_cache: str | None,
) -> tuple[SpooledTable, SpooledTable]:
    """`aspect_annotations` and `critiques`, both stages' calls on one queue of the judge,
    with the score fix's re-scores of each finished prompt (answered into the request cache
    that `fix_scores` reads)."""
    params = annotate_params(annotate, endpoints, prompt_templates)
    check_completions(completions)  # bad input fails before the judge starts
    with LLMClient(params.endpoint, request_cache) as judge:
        return judge_tables(
            completions,
            judge,
            aspects=params.aspects,
            n_shuffles=params.n_shuffles,
            shuffle_seed=params.shuffle_seed,
            aspect_orders=params.aspect_orders,
            max_reasks=params.max_reasks,
            aspect_sampling=params.aspect_sampling,
            critique_sampling=params.critique_sampling,
            fail_loud=True,
            templates=params.templates,
            score_fix=ScoreFixAhead(
                params.score_fix.flip_threshold,
                params.score_fix.reannotate_threshold,
                params.fine_grained_aspects,
                params.critique_sampling,
                params.max_reasks,
            ),
        )


def fix_scores(
    completions: Completions,
    aspect_annotations: ParquetSource,
    critiques: ParquetSource,
    annotate: Mapping[str, Any],
    endpoints: EndpointsBlock,
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
    endpoints: EndpointsBlock,
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
    completions: Completions, run_lineage: Mapping[str, Any], contamination_counts: pd.DataFrame
) -> str:
    """The dataset card beside the export, its `dataset_info` features those of the public
    columns, its decontamination counts those of the sample stage, its judge and settings
    those of the data's lineage (`run_lineage`), not of the configuration now."""
    features = feature_list(ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA)
    lineage = run_lineage or None  # `{}`: no record was built (the hook did not run)
    judge, settings = card_lineage(lineage, (lineage or {}).get("version"))
    # The columns the export was written with: those of the aspects the run rated.
    rated = (settings.get("annotate") or {}).get("aspects")
    return export_card(
        as_frame(completions, CARD_COLUMNS),
        judge=judge,
        settings=settings,
        features=features,
        contamination=contamination_counts,
        judge_endpoint=recorded_judge(lineage).endpoint_words(),
        export_schema=export_schema(rated) if rated else None,
    )
