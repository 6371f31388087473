"""Thin nodes: the generate parameters, then `sampled_prompts` in, `completions` out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.generation import generate_completions
from llm_feedback.params import GenerateParams, parse_generate


def read_params(
    endpoints: Mapping[str, Any], model_pool: Mapping[str, Any], generation: Mapping[str, Any]
) -> GenerateParams:
    return parse_generate(endpoints, model_pool, generation)


def generate(
    sampled_prompts: pd.DataFrame, params: GenerateParams, request_cache: str | None
) -> pd.DataFrame:
    return generate_completions(sampled_prompts, params.pool, request_cache, fail_loud=True)
