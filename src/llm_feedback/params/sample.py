"""`params:sample`: how models and principles are drawn per prompt."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.errors import ConfigError
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.principles import (
    DEFAULT_VERBALIZED_CALIBRATION_RATE,
    validate_calibration_rate,
    validate_principle_weights,
)
from llm_feedback.prompt_templates import check_prompt_templates, system_prompts


@dataclass(frozen=True)
class SampleParams:
    models: tuple[str, ...] = ()  # the names of the model pool, drawn from per prompt
    n_completions: int = 4
    seed: int = 42
    max_prompts: int | None = None
    verbalized_calibration_rate: float = DEFAULT_VERBALIZED_CALIBRATION_RATE
    principle_weights: Mapping[str, Mapping[str, float]] | None = None
    # Per principle, its system prompts (`principles.txt` of `prompt_templates` over ours).
    system_prompts: Mapping[str, tuple[str, ...]] | None = None  # None: ours


def parse_sample(sample: Any, model_pool: Any, prompt_templates: Any = None) -> SampleParams:
    if not isinstance(model_pool, Mapping) or not model_pool:
        raise ConfigError("model_pool must map model names to definitions")
    allowed = [
        name for name in defaults_of(SampleParams) if name not in ("models", "system_prompts")
    ]
    block = Block(sample, "sample", allowed, defaults_of(SampleParams))
    folder = check_prompt_templates(prompt_templates, "prompt_templates")
    weights = block.mapping("principle_weights", nullable=True)
    validate_principle_weights(weights, "sample.principle_weights")
    rate = validate_calibration_rate(
        block.raw("verbalized_calibration_rate"), "sample.verbalized_calibration_rate"
    )
    return SampleParams(
        models=tuple(model_pool),
        n_completions=block.integer("n_completions", minimum=1),
        seed=block.integer("seed"),
        max_prompts=block.integer("max_prompts", minimum=1, nullable=True),
        verbalized_calibration_rate=rate,
        principle_weights=weights,
        system_prompts=system_prompts(folder) if folder else None,
    )
