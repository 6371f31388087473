"""Thin nodes: raw prompt files in, `sampled_prompts` out."""

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from llm_feedback.pipelines.parsed_params import sample_params
from llm_feedback.sampling import combine_prompt_sources, sample_prompts


def combine_sources(raw_prompt_files: Mapping[str, Callable[[], pd.DataFrame]]) -> pd.DataFrame:
    """Every file under data/01_raw/prompts is one prompt source."""
    return combine_prompt_sources({name: load() for name, load in sorted(raw_prompt_files.items())})


def sample(
    raw_prompts: pd.DataFrame, sample: Mapping[str, Any], model_pool: Mapping[str, Any]
) -> pd.DataFrame:
    params = sample_params(sample, model_pool)
    return sample_prompts(
        raw_prompts,
        model_pool=list(params.models),
        n_completions=params.n_completions,
        seed=params.seed,
        principle_weights=params.principle_weights,
        verbalized_calibration_rate=params.verbalized_calibration_rate,
        max_prompts=params.max_prompts,
    )
