"""Pure-Python UltraFeedback annotation: aspect rubrics and judge requests, reply parsers,
shuffled presentation orders, critiques, the overall-score fix and the UltraFeedback export.

Nothing here calls a model; callers send the `ChatRequest`s and hand the replies back.
"""

from llm_feedback.annotation.aspects import (
    ASPECTS,
    DEFAULT_ASPECTS,
    NOT_APPLICABLE,
    AspectSpec,
    aspect_reply_schema,
    build_aspect_request,
    get_aspect,
)
from llm_feedback.annotation.critique import (
    CRITIQUE_REPLY_SCHEMA,
    RESCORE_REPLY_SCHEMA,
    CritiqueParse,
    build_critique_request,
    build_rescore_request,
    parse_critique_reply,
    parse_overall_score,
    parse_rescore_reply,
)
from llm_feedback.annotation.export import (
    to_public,
    to_ultrafeedback_records,
    ultrafeedback_export,
    ultrafeedback_frame,
)
from llm_feedback.annotation.parsing import AspectRating, parse_aspect_reply
from llm_feedback.annotation.score_fix import (
    FIX_ACTIONS,
    apply_reannotated_scores,
    collect_scores,
    fine_grained_scores,
    fix_counts,
    pending_reannotation,
    plan_score_fix,
    validate_thresholds,
)
from llm_feedback.annotation.shuffle import positions_by_completion, shuffle_orders
from llm_feedback.annotation.tables import (
    AspectJudgement,
    CritiqueJudgement,
    aspect_annotations_frame,
    critiques_frame,
)

__all__ = [
    "ASPECTS",
    "CRITIQUE_REPLY_SCHEMA",
    "DEFAULT_ASPECTS",
    "FIX_ACTIONS",
    "NOT_APPLICABLE",
    "RESCORE_REPLY_SCHEMA",
    "AspectJudgement",
    "AspectRating",
    "AspectSpec",
    "CritiqueJudgement",
    "CritiqueParse",
    "apply_reannotated_scores",
    "aspect_annotations_frame",
    "aspect_reply_schema",
    "build_aspect_request",
    "build_critique_request",
    "build_rescore_request",
    "collect_scores",
    "critiques_frame",
    "fine_grained_scores",
    "fix_counts",
    "get_aspect",
    "parse_aspect_reply",
    "parse_critique_reply",
    "parse_overall_score",
    "parse_rescore_reply",
    "pending_reannotation",
    "plan_score_fix",
    "positions_by_completion",
    "shuffle_orders",
    "to_public",
    "to_ultrafeedback_records",
    "ultrafeedback_export",
    "ultrafeedback_frame",
    "validate_thresholds",
]
