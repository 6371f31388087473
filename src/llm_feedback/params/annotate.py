"""`params:annotate`: the judge, the aspects, shuffles, re-asks and the score fix."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.annotation.aspects import DEFAULT_ASPECTS, get_aspect
from llm_feedback.annotation.export import check_exportable
from llm_feedback.annotation.score_fix import validate_thresholds
from llm_feedback.annotation.shuffle import ASPECT_ORDERS, INDEPENDENT
from llm_feedback.backends import EndpointConfig
from llm_feedback.backends.contract import check_sampling
from llm_feedback.core.errors import ConfigError
from llm_feedback.params.judge import JudgeParams, parse_judge
from llm_feedback.params.prompt_templates import check_prompt_templates
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.templates import Templates


@dataclass(frozen=True)
class ScoreFixParams:
    flip_threshold: float = 2.0
    reannotate_threshold: float = 4.0


@dataclass(frozen=True)
class AnnotateParams:
    """Everything the annotate nodes need, checked as a whole before any judge call."""

    judge: JudgeParams
    critique_sampling: Mapping[str, Any] = field(default_factory=dict)
    aspects: tuple[str, ...] = DEFAULT_ASPECTS
    n_shuffles: int = 1
    shuffle_seed: int = 42
    aspect_orders: str = INDEPENDENT
    max_reasks: int = 2
    score_fix: ScoreFixParams = field(default_factory=ScoreFixParams)
    # The folder of prompt replacements (`prompt_templates`), checked; None: the package's.
    prompt_templates: str | None = None

    @property
    def endpoint(self) -> EndpointConfig:
        return self.judge.endpoint

    @functools.cached_property
    def templates(self) -> Templates:
        """The prompt templates the judge's requests are rendered from: the package's, with
        the `prompt_templates` folder's replacements over them (one object per parse, so
        each file is read once)."""
        return Templates(self.prompt_templates)

    @property
    def aspect_sampling(self) -> Mapping[str, Any]:
        return self.judge.sampling

    @property
    def fine_grained_aspects(self) -> list[str]:
        """UltraFeedback's fine-grained score averages its four aspects, not harmlessness."""
        return [a for a in self.aspects if a in DEFAULT_ASPECTS] or list(self.aspects)


_SECTIONS = (
    "judge",
    "critique",
    "aspects",
    "n_shuffles",
    "shuffle_seed",
    "aspect_orders",
    "max_reasks",
    "score_fix",
)


def parse_annotate(
    annotate: Any, endpoints: Mapping[str, Any] | None, prompt_templates: Any = None
) -> AnnotateParams:
    """Read `params:annotate`, its judge resolved against `endpoints`.

    Args:
        annotate: the block.
        endpoints: the `endpoints` block (None: none defined).
        prompt_templates: the `prompt_templates` folder (None: the package's templates).

    Returns:
        The checked parameters.
    """
    defaults = defaults_of(AnnotateParams)
    block = Block(annotate, "annotate", _SECTIONS, defaults)
    aspects = block.raw("aspects")
    if isinstance(aspects, str) or not isinstance(aspects, list | tuple) or not aspects:
        raise ConfigError(f"annotate.aspects: list at least one aspect, got {aspects!r}")
    for aspect in aspects:
        get_aspect(aspect)
    if len(set(aspects)) != len(aspects):
        raise ConfigError("annotate.aspects: an aspect is listed twice")
    check_exportable(aspects)  # the export must hold every rating before one is paid for
    judge = parse_judge(
        block.raw("judge") if "judge" in block.values else None, "annotate.judge", endpoints
    )
    score_fix = block.block(
        "score_fix", ("flip_threshold", "reannotate_threshold"), defaults_of(ScoreFixParams)
    )
    thresholds = ScoreFixParams(
        flip_threshold=score_fix.number("flip_threshold"),
        reannotate_threshold=score_fix.number("reannotate_threshold"),
    )
    validate_thresholds(thresholds.flip_threshold, thresholds.reannotate_threshold)
    return AnnotateParams(
        judge=judge,
        # A critique is longer than a rating: its own settings override the judge's.
        critique_sampling={
            **judge.sampling,
            **check_sampling(block.values.get("critique"), "annotate.critique"),
        },
        aspects=tuple(aspects),
        n_shuffles=block.integer("n_shuffles", minimum=1),
        shuffle_seed=block.integer("shuffle_seed"),
        aspect_orders=block.choice("aspect_orders", ASPECT_ORDERS),
        max_reasks=block.integer("max_reasks", minimum=0),
        score_fix=thresholds,
        prompt_templates=check_prompt_templates(prompt_templates, "prompt_templates"),
    )
