"""The sampling every judge asks with, annotate's and evaluate's alike: deterministic
grading unless the caller's settings say otherwise (they are merged over it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

JUDGE_SAMPLING: Mapping[str, Any] = {"temperature": 0.0, "top_p": 1.0}
