"""Thin nodes: the generate parameters, then `sampled_prompts` in, `completions` out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.generation import generate_completions
from llm_feedback.pipelines.parsed_params import generate_params


def generate(
    sampled_prompts: pd.DataFrame,
    endpoints: Mapping[str, Any],
    model_pool: Mapping[str, Any],
    generation: Mapping[str, Any],
    request_cache: str | None,
) -> pd.DataFrame:
    params = generate_params(endpoints, model_pool, generation)
    return generate_completions(sampled_prompts, params.pool, request_cache, fail_loud=True)
