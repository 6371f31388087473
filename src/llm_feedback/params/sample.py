"""`params:sample`: how models and principles are drawn per prompt."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_feedback.completions.principles import (
    DEFAULT_VERBALIZED_CALIBRATION_RATE,
    validate_calibration_rate,
    validate_principle_weights,
)
from llm_feedback.core.errors import ConfigError
from llm_feedback.params.prompt_templates import check_prompt_templates, system_prompts
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.prompts.sources import SOURCES, ULTRAFEEDBACK_SOURCE_COUNTS


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
    # Public source files by source (sources.read_source), read beside the prompt files.
    source_files: Mapping[str, str] | None = None
    prompt_files: bool = True  # read data/01_raw/prompts (raw_prompts_dir) as well
    # At most this many prompts per source, seeded (FLAN stratified by task); null: all.
    per_source: Mapping[str, int] | None = None


def _source_files(files: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not files:
        return None
    for source, path in files.items():
        if source not in SOURCES:
            raise ConfigError(
                f"sample.source_files.{source}: unknown source; one of {', '.join(SOURCES)}"
            )
        if not isinstance(path, str) or not Path(path).is_file():
            raise ConfigError(f"sample.source_files.{source}: {path!r} is not a file")
    return dict(files)


def _per_source(counts: Any) -> dict[str, int] | None:
    if counts is None:
        return None
    if counts == "ultrafeedback":
        return dict(ULTRAFEEDBACK_SOURCE_COUNTS)
    if not isinstance(counts, Mapping):
        raise ConfigError(
            f"sample.per_source must be null, 'ultrafeedback' or source: count, got {counts!r}"
        )
    for source, count in counts.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"sample.per_source.{source} must be an integer >= 1, got {count!r}")
    return dict(counts)


def parse_sample(sample: Any, model_pool: Any, prompt_templates: Any = None) -> SampleParams:
    """Read `params:sample`, the pool's model names and the templates folder.

    Args:
        sample: the block.
        model_pool: the `model_pool` block.
        prompt_templates: the `prompt_templates` folder (None: the package's templates).

    Returns:
        The checked parameters.
    """
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
        source_files=_source_files(block.mapping("source_files", nullable=True)),
        prompt_files=block.boolean("prompt_files"),
        per_source=_per_source(block.raw("per_source")),
    )
