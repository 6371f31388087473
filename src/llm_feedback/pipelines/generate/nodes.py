"""Thin nodes: the generate parameters, then `sampled_prompts` in, `completions` out."""

from collections.abc import Mapping
from typing import Any

from llm_feedback.completions.generation import Sampled, completions_table
from llm_feedback.params.blocks import EndpointsBlock
from llm_feedback.pipelines.parsed_params import generate_params
from llm_feedback.storage.spool import SpooledTable


def generate(
    sampled_prompts: Sampled,
    endpoints: EndpointsBlock,
    model_pool: Mapping[str, Any],
    generation: Mapping[str, Any],
    request_cache: str | None,
) -> SpooledTable:
    """Streamed: `sampled_prompts` is read (a `ParquetSource`) and `completions` written
    (a `SpooledTable`) a chunk at a time."""
    params = generate_params(endpoints, model_pool, generation)
    return completions_table(sampled_prompts, params.pool, request_cache, fail_loud=True)
