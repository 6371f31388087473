"""The `annotate` parameters, checked as a whole before any judge call is made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_feedback.annotation.aspects import get_aspect
from llm_feedback.annotation.score_fix import validate_thresholds
from llm_feedback.backends import EndpointConfig
from llm_feedback.endpoints import resolve_endpoint
from llm_feedback.errors import ConfigError

_KNOWN_KEYS = {"judge", "aspects", "n_shuffles", "shuffle_seed", "max_reasks", "critique",
               "score_fix"}


@dataclass(frozen=True)
class AnnotateSettings:
    endpoint: EndpointConfig
    aspect_sampling: dict[str, Any]
    critique_sampling: dict[str, Any]
    aspects: tuple[str, ...]
    n_shuffles: int
    shuffle_seed: int
    max_reasks: int
    flip_threshold: float
    reannotate_threshold: float


def parse_annotate_settings(
    annotate: Mapping[str, Any], endpoints: Mapping[str, Any]
) -> AnnotateSettings:
    unknown = sorted(set(annotate) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"annotate: unknown setting(s) {', '.join(unknown)}")
    judge = dict(annotate.get("judge") or {})
    if "endpoint" not in judge:
        raise ConfigError("annotate.judge.endpoint: name the judge's endpoint")
    endpoint = resolve_endpoint(judge.pop("endpoint"), endpoints)
    allowed_sampling = {"temperature", "top_p", "max_tokens", "seed"}
    if set(judge) - allowed_sampling:
        raise ConfigError(
            f"annotate.judge: unknown setting(s) {', '.join(sorted(set(judge) - allowed_sampling))}"
        )
    aspects = tuple(annotate.get("aspects") or ())
    if not aspects:
        raise ConfigError("annotate.aspects: list at least one aspect")
    for aspect in aspects:
        get_aspect(aspect)
    if len(set(aspects)) != len(aspects):
        raise ConfigError("annotate.aspects: an aspect is listed twice")
    n_shuffles = int(annotate.get("n_shuffles", 1))
    max_reasks = int(annotate.get("max_reasks", 2))
    if n_shuffles < 1:
        raise ConfigError("annotate.n_shuffles must be >= 1")
    if max_reasks < 0:
        raise ConfigError("annotate.max_reasks must be >= 0")
    critique = dict(annotate.get("critique") or {})
    score_fix = dict(annotate.get("score_fix") or {})
    flip = float(score_fix.get("flip_threshold", 2.0))
    reannotate = float(score_fix.get("reannotate_threshold", 4.0))
    validate_thresholds(flip, reannotate)
    return AnnotateSettings(
        endpoint=endpoint,
        aspect_sampling=judge,
        critique_sampling={**judge, **{k: v for k, v in critique.items()
                                       if k in allowed_sampling}},
        aspects=aspects,
        n_shuffles=n_shuffles,
        shuffle_seed=int(annotate.get("shuffle_seed", 42)),
        max_reasks=max_reasks,
        flip_threshold=flip,
        reannotate_threshold=reannotate,
    )
