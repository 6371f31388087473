"""Thin nodes: raw prompt files in, `sampled_prompts` out."""

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from llm_feedback.sampling import combine_prompt_sources, sample_prompts


def combine_sources(raw_prompt_files: Mapping[str, Callable[[], pd.DataFrame]]) -> pd.DataFrame:
    """Every file under data/01_raw/prompts is one prompt source."""
    return combine_prompt_sources({name: load() for name, load in sorted(raw_prompt_files.items())})


def sample(raw_prompts: pd.DataFrame, model_pool: Mapping[str, Any],
           sampling: Mapping[str, Any]) -> pd.DataFrame:
    return sample_prompts(
        raw_prompts,
        model_pool=list(model_pool),
        n_completions=sampling["n_completions"],
        seed=sampling["seed"],
        principle_weights=sampling.get("principle_weights"),
        verbalized_calibration_rate=sampling.get("verbalized_calibration_rate", 0.1),
        max_prompts=sampling.get("max_prompts"),
    )
