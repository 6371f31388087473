"""Thin nodes: DataFrames in, one judge client per node, DataFrames out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.annotation import (
    DEFAULT_ASPECTS,
    to_ultrafeedback_records,
    ultrafeedback_frame,
)
from llm_feedback.annotation.runner import (
    annotate_aspects,
    critique_completions,
    fix_overall_scores,
    usable_completions,
)
from llm_feedback.annotation.settings import parse_annotate_settings
from llm_feedback.backends import LLMClient


def rate_aspects(completions: pd.DataFrame, annotate: Mapping[str, Any],
                 endpoints: Mapping[str, Any], request_cache: str | None) -> pd.DataFrame:
    settings = parse_annotate_settings(annotate, endpoints)
    usable_completions(completions)  # bad input fails before the judge starts
    with LLMClient(settings.endpoint, request_cache) as judge:
        return annotate_aspects(
            completions, judge, aspects=settings.aspects, n_shuffles=settings.n_shuffles,
            shuffle_seed=settings.shuffle_seed, max_reasks=settings.max_reasks,
            sampling=settings.aspect_sampling,
        )


def critique(completions: pd.DataFrame, annotate: Mapping[str, Any],
             endpoints: Mapping[str, Any], request_cache: str | None) -> pd.DataFrame:
    settings = parse_annotate_settings(annotate, endpoints)
    usable_completions(completions)
    with LLMClient(settings.endpoint, request_cache) as judge:
        return critique_completions(
            completions, judge, max_reasks=settings.max_reasks,
            sampling=settings.critique_sampling,
        )


def fix_scores(completions: pd.DataFrame, aspect_annotations: pd.DataFrame,
               critiques: pd.DataFrame, annotate: Mapping[str, Any],
               endpoints: Mapping[str, Any], request_cache: str | None) -> pd.DataFrame:
    settings = parse_annotate_settings(annotate, endpoints)
    # UltraFeedback's fine-grained score averages its four aspects, not harmlessness.
    aspects = [a for a in settings.aspects if a in DEFAULT_ASPECTS] or list(settings.aspects)
    with LLMClient(settings.endpoint, request_cache) as judge:
        return fix_overall_scores(
            completions, aspect_annotations, critiques, judge,
            flip_threshold=settings.flip_threshold,
            reannotate_threshold=settings.reannotate_threshold, aspects=aspects,
        )


def export_ultrafeedback(completions: pd.DataFrame, aspect_annotations: pd.DataFrame,
                         critiques: pd.DataFrame, feedback: pd.DataFrame) -> pd.DataFrame:
    records = to_ultrafeedback_records(completions, aspect_annotations, critiques, feedback)
    return ultrafeedback_frame(records)
