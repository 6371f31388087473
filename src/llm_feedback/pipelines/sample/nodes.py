"""Thin nodes: raw prompt files in, `sampled_prompts` out."""

from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from llm_feedback.completions.sampling import SampledPrompts, sample_prompt_file, sample_prompts
from llm_feedback.contamination.overlap import decontaminate
from llm_feedback.params.blocks import DecontaminationBlock
from llm_feedback.params.decontamination import parse_decontamination
from llm_feedback.pipelines.parsed_params import sample_params
from llm_feedback.prompts.raw_prompts import combine_prompt_sources
from llm_feedback.prompts.sources import read_source, sample_per_source
from llm_feedback.storage.parquet_source import ParquetSource


def combine_sources(
    raw_prompt_files: Mapping[str, Callable[[], pd.DataFrame]],
    sample: Mapping[str, Any],
    model_pool: Mapping[str, Any],
    prompt_templates: str | None,
    decontamination: DecontaminationBlock | None,
) -> dict[str, pd.DataFrame]:
    """Every file under data/01_raw/prompts is one prompt source (unless `prompt_files` is
    false), and each public source file of `source_files`; `per_source` caps each. The
    prompts are then checked against the `decontamination` benchmarks: `raw_prompts` are
    those kept, `prompt_contamination` the matches, `contamination_counts` the counts per
    benchmark."""
    params = sample_params(sample, model_pool, prompt_templates)
    checks = parse_decontamination(decontamination)
    frames = {}
    if params.prompt_files:
        frames = {name: load() for name, load in sorted(raw_prompt_files.items())}
    for source, path in (params.source_files or {}).items():
        frames[f"{source} ({path})"] = read_source(source, path)
    sampled = {
        name: sample_per_source(frame, params.per_source, params.seed)
        for name, frame in frames.items()
    }
    kept, matches, counts = decontaminate(combine_prompt_sources(sampled), checks)
    return {
        "raw_prompts": kept,
        "prompt_contamination": matches,
        "contamination_counts": counts,
    }


def sample(
    raw_prompts: pd.DataFrame | ParquetSource,
    sample: Mapping[str, Any],
    model_pool: Mapping[str, Any],
    prompt_templates: str | None,
) -> pd.DataFrame | SampledPrompts:
    """Raw prompts on disk (as the catalog loads them) are drawn a batch at a time as
    `sampled_prompts` is written."""
    params = sample_params(sample, model_pool, prompt_templates)
    draw = sample_prompt_file if isinstance(raw_prompts, ParquetSource) else sample_prompts
    return draw(
        raw_prompts,
        model_pool=list(params.models),
        n_completions=params.n_completions,
        seed=params.seed,
        principle_weights=params.principle_weights,
        verbalized_calibration_rate=params.verbalized_calibration_rate,
        max_prompts=params.max_prompts,
        system_prompts=params.system_prompts,
    )
