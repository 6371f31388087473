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
