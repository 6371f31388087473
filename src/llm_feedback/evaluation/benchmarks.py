"""The benchmark each evaluation sample belongs to, as Youtu-agent keeps it: the samples'
`benchmark` column (rows without one, or a file without the column, take
`evaluate.benchmark`, else the samples file's name), a question template per benchmark
(`evaluate.benchmark_prompts`, Youtu-agent's per-benchmark `preprocess_one`) and the
benchmark named on every `eval_metrics` row (its `stat()`), metrics computed per benchmark
when a file mixes several."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llm_feedback.core.errors import ConfigError, InputError

BENCHMARK = "benchmark"
DEFAULT_BENCHMARK = "eval_samples"
PROMPT_KEYS = ("pre_prompt", "post_prompt")


def benchmark_name(configured: str | None, samples_path: str | None) -> str:
    """The name of the samples' benchmark where rows do not name one.

    Args:
        configured: `evaluate.benchmark`.
        samples_path: the samples file, when known.

    Returns:
        `configured`, else the file's name without its suffix, else "eval_samples".
    """
    if configured:
        return configured
    if samples_path:
        return Path(str(samples_path).rstrip("/")).stem or DEFAULT_BENCHMARK
    return DEFAULT_BENCHMARK


def with_benchmark(samples: pd.DataFrame, name: str) -> pd.DataFrame:
    """The samples with a `benchmark` on every row: their own, else `name`.

    Args:
        samples: eval_samples as read.
        name: the benchmark of rows that name none.

    Returns:
        A copy with the column filled (text).

    Raises:
        InputError: a `benchmark` value that is not text, naming its row.
    """
    frame = samples.copy()
    if BENCHMARK not in frame.columns:
        frame[BENCHMARK] = name
        return frame
    for row, value in enumerate(frame[BENCHMARK]):
        if not (value is None or pd.isna(value) or (isinstance(value, str) and value.strip())):
            raise InputError(
                f"eval_samples row {row}, column 'benchmark': expected a name (text), got {value!r}"
            )
    frame[BENCHMARK] = frame[BENCHMARK].where(frame[BENCHMARK].notna(), name).astype(object)
    return frame


def check_benchmark_prompts(prompts: Any) -> dict[str, dict[str, str]]:
    """`evaluate.benchmark_prompts`: {benchmark: {pre_prompt, post_prompt}}.

    Args:
        prompts: the parameter's value.

    Returns:
        The checked mapping (a missing key is "").
    """
    if prompts is None:
        return {}
    if not isinstance(prompts, Mapping):
        raise ConfigError(
            f"evaluate.benchmark_prompts must map benchmark names to {{pre_prompt, "
            f"post_prompt}}, got {prompts!r}"
        )
    checked = {}
    for name, texts in prompts.items():
        where = f"evaluate.benchmark_prompts.{name}"
        if not isinstance(texts, Mapping):
            raise ConfigError(f"{where} must be a mapping with pre_prompt / post_prompt")
        unknown = sorted(set(texts) - set(PROMPT_KEYS))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {list(PROMPT_KEYS)}")
        for key in PROMPT_KEYS:
            if not isinstance(texts.get(key, ""), str):
                raise ConfigError(f"{where}.{key} must be text, got {texts[key]!r}")
        checked[str(name)] = {key: texts.get(key, "") for key in PROMPT_KEYS}
    return checked


def question_text(
    question: str,
    benchmark: str | None,
    prompts: Mapping[str, Mapping[str, str]],
    default: tuple[str, str],
) -> str:
    """The question as sent to the model under test: between its benchmark's pre and post
    prompts, else the global ones.

    Args:
        question: the sample's question.
        benchmark: its benchmark.
        prompts: `evaluate.benchmark_prompts`.
        default: (`evaluate.pre_prompt`, `evaluate.post_prompt`).

    Returns:
        The text.
    """
    texts = prompts.get(benchmark) if benchmark is not None else None
    pre, post = (texts["pre_prompt"], texts["post_prompt"]) if texts else default
    return f"{pre}{question}{post}"


def metrics_per_benchmark(
    judgments: pd.DataFrame, compute: Callable[[pd.DataFrame], pd.DataFrame]
) -> pd.DataFrame:
    """`compute`'s metrics for each benchmark of the judgments apart, each row naming it.

    Args:
        judgments: eval_judgments (with a `benchmark` column, or none: one unnamed).
        compute: the metrics of one set of judgments.

    Returns:
        The metrics with a `benchmark` column.
    """
    if BENCHMARK not in judgments.columns or judgments[BENCHMARK].nunique(dropna=False) <= 1:
        metrics = compute(judgments)
        name = judgments[BENCHMARK].iloc[0] if BENCHMARK in judgments and len(judgments) else None
        return metrics.assign(**{BENCHMARK: name}).astype({BENCHMARK: "string"})
    parts = [
        compute(part).assign(**{BENCHMARK: name})
        for name, part in judgments.groupby(BENCHMARK, sort=True, dropna=False)
    ]
    dtypes = parts[0].dtypes
    return pd.concat(parts, ignore_index=True).astype(dtypes).astype({BENCHMARK: "string"})
