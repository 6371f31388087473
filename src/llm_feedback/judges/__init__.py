"""The judge layer: judge kinds, their requests and readers, metrics, and the `Judge`.

Each judge kind is one module of `judges/kinds/` (template, reply schema, reader, columns;
registered by name), built from the shared pieces in `requests.py` and `reading.py`.
Builders return `ChatRequest`s, readers read reply texts and metrics summarise parsed
judgments, all without calling a model; `Judge` sends the requests to an endpoint and
returns typed `Judgment`s (its lmms-eval compatible dict methods, `lmms_eval_compat/`, are
an adapter over them).
"""

from llm_feedback.engine import Reading
from llm_feedback.judges.answers import exact_match, is_unknown_reference, normalize_answer
from llm_feedback.judges.judge import Judge
from llm_feedback.judges.judgment import (
    JudgeTask,
    Judgment,
    PairJudgment,
    combine_orders,
    one_order,
)
from llm_feedback.judges.kinds import (
    PAIRWISE,
    POINTWISE,
    Asking,
    JudgeItem,
    JudgeKind,
    KindOptions,
    get_kind,
    kind_names,
    load_kind,
    register_kind,
    unregister_kind,
)
from llm_feedback.judges.kinds.binary import (
    BINARY_FORMATS,
    BINARY_OUTPUT_FORMATS,
    build_binary_request,
    parse_binary,
)
from llm_feedback.judges.kinds.grading import (
    ReferenceGrading,
    build_reference_grading_request,
    parse_reference_grading,
)
from llm_feedback.judges.kinds.pairwise import (
    PAIRWISE_OUTPUTS,
    PairwiseReply,
    build_pairwise_request,
    build_pairwise_requests_both_orders,
    pairwise_reply_schema,
    parse_pairwise,
)
from llm_feedback.judges.kinds.reference_scale import ReferenceScale, reference_scale_kind
from llm_feedback.judges.kinds.rubric import (
    OVERALL_CRITERION,
    build_rubric_request,
    parse_rubric_scores,
    rubric_reply_schema,
)
from llm_feedback.judges.kinds.score_0_5 import build_score_0_5_request
from llm_feedback.judges.kinds.single_1_10 import (
    build_multi_turn_rating_request,
    build_single_rating_request,
    parse_bracket_rating,
)
from llm_feedback.judges.metrics import (
    aggregate_scores,
    is_position_consistent,
    normalised_mean,
    pairwise_outcome,
    pairwise_win_rates,
    pass_at_k,
    pass_at_k_table,
    weighted_accuracy,
)
from llm_feedback.judges.reading import ParseResult, parse_rating
from llm_feedback.judges.requests import (
    JUDGE_SAMPLING,
    JUDGE_SYSTEM_PROMPT,
    fenced_values,
    judge_request,
    render_template,
    template_fields,
)
from llm_feedback.replies.status import CALL_FAILED, PARSE_STATUSES

__all__ = [
    "BINARY_FORMATS",
    "BINARY_OUTPUT_FORMATS",
    "CALL_FAILED",
    "JUDGE_SAMPLING",
    "JUDGE_SYSTEM_PROMPT",
    "OVERALL_CRITERION",
    "PAIRWISE",
    "PAIRWISE_OUTPUTS",
    "PARSE_STATUSES",
    "POINTWISE",
    "Asking",
    "Judge",
    "JudgeItem",
    "JudgeKind",
    "JudgeTask",
    "Judgment",
    "KindOptions",
    "PairJudgment",
    "PairwiseReply",
    "ParseResult",
    "Reading",
    "ReferenceGrading",
    "ReferenceScale",
    "aggregate_scores",
    "build_binary_request",
    "build_multi_turn_rating_request",
    "build_pairwise_request",
    "build_pairwise_requests_both_orders",
    "build_reference_grading_request",
    "build_rubric_request",
    "build_score_0_5_request",
    "build_single_rating_request",
    "combine_orders",
    "exact_match",
    "fenced_values",
    "get_kind",
    "is_position_consistent",
    "is_unknown_reference",
    "judge_request",
    "kind_names",
    "load_kind",
    "normalised_mean",
    "normalize_answer",
    "one_order",
    "pairwise_outcome",
    "pairwise_reply_schema",
    "pairwise_win_rates",
    "parse_binary",
    "parse_bracket_rating",
    "parse_pairwise",
    "parse_rating",
    "parse_reference_grading",
    "parse_rubric_scores",
    "pass_at_k",
    "pass_at_k_table",
    "reference_scale_kind",
    "register_kind",
    "render_template",
    "rubric_reply_schema",
    "template_fields",
    "unregister_kind",
    "weighted_accuracy",
]
