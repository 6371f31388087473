"""`JudgeParams`: a judge's endpoint and the sampling settings of its calls (the judge block
that annotate and evaluate share; `params/judge.py` maps the YAML onto it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.backends import EndpointConfig


@dataclass(frozen=True)
class JudgeParams:
    """The judge's endpoint and the sampling settings of its calls."""

    endpoint: EndpointConfig
    sampling: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgePreset:
    """A named set of judge settings a judge block can start from (`preset:`): sampling
    settings the block may still override, and the endpoint's timeout."""

    sampling: Mapping[str, Any]
    timeout_s: float


# lmms-eval's judge server settings, which the evaluator code this project took over used
# ("seed 000"); ours default to temperature 0, top_p 1 and the endpoint's timeout (120 s).
JUDGE_PRESETS: Mapping[str, JudgePreset] = {
    "lmms_eval": JudgePreset(sampling={"temperature": 0.7, "top_p": 0.95}, timeout_s=60.0),
}
