"""`params:ultrafeedback_fix`: the published openbmb/UltraFeedback records to repair."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_feedback.annotation.aspects import get_aspect
from llm_feedback.annotation.published import PUBLISHED_JUDGE
from llm_feedback.core.errors import ConfigError
from llm_feedback.params.annotate import AnnotateParams, parse_annotate
from llm_feedback.params.reader import Block, defaults_of
from llm_feedback.storage.schema import ULTRAFEEDBACK_ASPECTS


@dataclass(frozen=True)
class UltraFeedbackFixParams:
    records_path: str | None = None
    judge_model: str = PUBLISHED_JUDGE  # who wrote the published annotations
    reannotate: bool = True  # False: re-annotation candidates keep their published score
    rejudge_aspects: tuple[str, ...] = ()  # re-rated by annotate.judge before the fix
    recritique: bool = False  # critiques and overall scores written anew by annotate.judge
    # The judge, thresholds, re-asks and sampling: `params:annotate`'s.
    annotate: AnnotateParams | None = None


def parse_ultrafeedback_fix(
    block_values: Any, annotate: Any, endpoints: Mapping[str, Any] | None, prompt_templates: Any
) -> UltraFeedbackFixParams:
    """Read `params:ultrafeedback_fix` and the annotate block it judges with.

    Args:
        block_values: the block.
        annotate: the `annotate` block.
        endpoints: the `endpoints` block (None: none defined).
        prompt_templates: the `prompt_templates` folder (None: the package's templates).

    Returns:
        The checked parameters.
    """
    defaults = defaults_of(UltraFeedbackFixParams)
    allowed = [name for name in defaults if name != "annotate"]
    block = Block(block_values, "ultrafeedback_fix", allowed, defaults)
    path = block.text("records_path", nullable=True)
    if path is None:
        raise ConfigError(
            "ultrafeedback_fix.records_path is required: a Parquet or JSON Lines file of "
            "openbmb/UltraFeedback records, or a folder of Parquet files "
            "(--params ultrafeedback_fix.records_path=<file or folder>)"
        )
    if not Path(path).exists():
        raise ConfigError(f"ultrafeedback_fix.records_path: {path} does not exist")
    rejudge = block.raw("rejudge_aspects")
    if isinstance(rejudge, str) or not isinstance(rejudge, list | tuple):
        raise ConfigError(f"ultrafeedback_fix.rejudge_aspects must be a list, got {rejudge!r}")
    for aspect in rejudge:
        get_aspect(aspect)
        if aspect not in ULTRAFEEDBACK_ASPECTS:
            raise ConfigError(
                f"ultrafeedback_fix.rejudge_aspects: {aspect!r} is not one of the published "
                f"aspects {', '.join(ULTRAFEEDBACK_ASPECTS)}"
            )
    return UltraFeedbackFixParams(
        records_path=path,
        judge_model=block.text("judge_model"),
        reannotate=block.boolean("reannotate"),
        rejudge_aspects=tuple(rejudge),
        recritique=block.boolean("recritique"),
        annotate=parse_annotate(annotate, endpoints, prompt_templates),
    )
