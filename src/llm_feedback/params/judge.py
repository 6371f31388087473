"""The judge block that annotate and evaluate share: `{endpoint: ..., <sampling>...}`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_feedback.backends.contract import SAMPLING_KEYS, check_sampling
from llm_feedback.backends.endpoints import resolve_endpoint
from llm_feedback.core.errors import ConfigError
from llm_feedback.judges.config import JudgeParams

__all__ = ["JudgeParams", "parse_judge"]


def parse_judge(block: Any, path: str, endpoints: Mapping[str, Any] | None) -> JudgeParams:
    """`block` is `{endpoint: <name | env | inline mapping>, temperature: ..., ...}`.

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
    unknown = sorted(set(block) - {"endpoint", *SAMPLING_KEYS})
    if unknown:
        raise ConfigError(
            f"{path}.{unknown[0]}: unknown setting; allowed: endpoint, {', '.join(SAMPLING_KEYS)}"
        )
    sampling = {key: value for key, value in block.items() if key != "endpoint"}
    return JudgeParams(
        endpoint=resolve_endpoint(block["endpoint"], endpoints, f"{path}.endpoint"),
        sampling=check_sampling(sampling, path),
    )
