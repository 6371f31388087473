"""Thin node: `sampled_prompts` in, `completions` out."""

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llm_feedback.endpoints import parse_endpoints, parse_model_pool
from llm_feedback.generation import generate_completions


def generate(sampled_prompts: pd.DataFrame, endpoints: Mapping[str, Any],
             model_pool: Mapping[str, Any], generation: Mapping[str, Any],
             request_cache: str | None) -> pd.DataFrame:
    pool = parse_model_pool(model_pool, parse_endpoints(endpoints), generation)
    return generate_completions(sampled_prompts, pool, request_cache)
