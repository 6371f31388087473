"""Thin nodes: DataFrames in, one judge client per node, DataFrames out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.annotation import ultrafeedback_export
from llm_feedback.annotation.stages import (
    annotate_aspects,
    critique_completions,
    fix_overall_scores,
    usable_completions,
)
from llm_feedback.backends import LLMClient
from llm_feedback.params import AnnotateParams, parse_annotate


def read_params(annotate: Mapping[str, Any], endpoints: Mapping[str, Any]) -> AnnotateParams:
    return parse_annotate(annotate, endpoints)


def rate_aspects(
    completions: pd.DataFrame, params: AnnotateParams, request_cache: str | None
) -> pd.DataFrame:
    usable_completions(completions)  # bad input fails before the judge starts
    with LLMClient(params.endpoint, request_cache) as judge:
        return annotate_aspects(
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
    completions: pd.DataFrame, params: AnnotateParams, request_cache: str | None
) -> pd.DataFrame:
    usable_completions(completions)
    with LLMClient(params.endpoint, request_cache) as judge:
        return critique_completions(
            completions,
            judge,
            max_reasks=params.max_reasks,
            sampling=params.critique_sampling,
            fail_loud=True,
        )


def fix_scores(
    completions: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    critiques: pd.DataFrame,
    params: AnnotateParams,
    request_cache: str | None,
) -> pd.DataFrame:
    with LLMClient(params.endpoint, request_cache) as judge:
        return fix_overall_scores(
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
        )


def export_ultrafeedback(
    completions: pd.DataFrame,
    aspect_annotations: pd.DataFrame,
    critiques: pd.DataFrame,
    overall_scores: pd.DataFrame,
    params: AnnotateParams,
) -> pd.DataFrame:
    return ultrafeedback_export(
        completions, aspect_annotations, critiques, overall_scores, aspects=params.aspects
    )
