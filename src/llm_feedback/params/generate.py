"""`params:endpoints`, `params:model_pool` and `params:generation`: who answers the prompts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.backends.contract import check_sampling
from llm_feedback.backends.endpoints import ModelSpec, parse_endpoints, parse_model_pool


@dataclass(frozen=True)
class GenerateParams:
    """The completion models by name, each with its endpoint and its sampling settings."""

    pool: Mapping[str, ModelSpec]


def parse_generate(
    endpoints: Mapping[str, Any], model_pool: Mapping[str, Any], generation: Any
) -> GenerateParams:
    """Read `params:generation` and the model pool, each model on its endpoint.

    Args:
        endpoints: the `endpoints` block.
        model_pool: the `model_pool` block.
        generation: the `generation` block (the pool's default sampling).

    Returns:
        The checked parameters.
    """
    defaults = check_sampling(generation, "generation")
    return GenerateParams(parse_model_pool(model_pool, parse_endpoints(endpoints), defaults))
