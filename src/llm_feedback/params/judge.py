"""The judge block that annotate and evaluate share: `{endpoint: ..., <sampling>...}`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from llm_feedback.backends.contract import SAMPLING_KEYS, check_sampling
from llm_feedback.backends.endpoints import resolve_endpoint
from llm_feedback.core.errors import ConfigError
from llm_feedback.judges.config import JUDGE_PRESETS, JudgeParams

__all__ = ["JudgeParams", "parse_judge"]


def parse_judge(block: Any, path: str, endpoints: Mapping[str, Any] | None) -> JudgeParams:
    """`block` is `{endpoint: <name | env | inline mapping>, temperature: ..., ...}`, and
    may name a `preset` (`JUDGE_PRESETS`) whose sampling settings it starts from and whose
    timeout its endpoint takes.

    Args:
        block: the judge's block.
        path: its dotted name, for messages.
        endpoints: the `endpoints` block (None: none defined).

    Returns:
        The judge's parameters.
    """
    if not isinstance(block, Mapping):
        raise ConfigError(
            f"{path} must be a mapping {{endpoint: ..., temperature: ..., max_tokens: ...}}, "
            f"got {block!r}"
        )
    if "endpoint" not in block:
        raise ConfigError(f"{path}.endpoint: name the judge's endpoint (or `env`)")
    unknown = sorted(set(block) - {"endpoint", "preset", *SAMPLING_KEYS})
    if unknown:
        raise ConfigError(
            f"{path}.{unknown[0]}: unknown setting; allowed: endpoint, preset, "
            f"{', '.join(SAMPLING_KEYS)}"
        )
    endpoint = resolve_endpoint(block["endpoint"], endpoints, f"{path}.endpoint")
    sampling = {key: value for key, value in block.items() if key not in ("endpoint", "preset")}
    preset_name = block.get("preset")
    if preset_name is not None:
        if preset_name not in JUDGE_PRESETS:
            raise ConfigError(
                f"{path}.preset: unknown preset {preset_name!r}; one of {', '.join(JUDGE_PRESETS)}"
            )
        preset = JUDGE_PRESETS[preset_name]
        sampling = {**preset.sampling, **sampling}
        endpoint = dataclasses.replace(endpoint, timeout_s=preset.timeout_s)
    return JudgeParams(endpoint=endpoint, sampling=check_sampling(sampling, path))
