"""The datasets' columns: keys, order and dtypes, one place.

`<DATASET>_COLUMN_TYPES` maps the columns of the catalog dataset `<dataset>`, in their
order, to the pandas dtype its producer gives them, so that the Parquet schema does not
depend on which values happened to occur; `..._KEY` tuples name the columns that tell one
row from another; `..._COLUMNS` tuples list columns without dtypes. The dtype strings are
the producers' own ("string" in the generate, annotate and evaluate tables, "str" in the
report tables) and are not unified here.

These are not the JSON schemas that judges' structured replies follow: those are the
`..._REPLY_SCHEMA` constants and `..._reply_schema()` functions next to their prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# --- keys ---------------------------------------------------------------------------------

# One completion: a row of `completions` and `overall_scores`, and the completion an
# `aspect_annotations` or `critiques` row is about.
COMPLETION_KEY = ("prompt_id", "completion_idx")
# What tells one sample (and its judge call) from another.
EVAL_SAMPLE_KEY = ("instance_id", "turn", "model", "replicate")

# --- sample: raw_prompts, sampled_prompts -------------------------------------------------

RAW_PROMPTS_REQUIRED_COLUMNS: tuple[str, ...] = ("source", "instruction")
ANSWER_LIST_COLUMNS: tuple[str, ...] = ("correct_answers", "incorrect_answers")
RAW_PROMPTS_COLUMNS: tuple[str, ...] = (
    "prompt_id",
    "source",
    "instruction",
    *ANSWER_LIST_COLUMNS,
    "reference_answer",
)
SAMPLED_PROMPTS_COLUMNS: tuple[str, ...] = (
    "prompt_id",
    "completion_idx",
    "source",
    "instruction",
    *ANSWER_LIST_COLUMNS,
    "reference_answer",
    "world_knowledge",
    "model",
    "principle",
    "system_prompt",
)

# --- generate: completions ----------------------------------------------------------------

COMPLETIONS_COLUMN_TYPES = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "source": "string",
    "instruction": "string",
    "world_knowledge": "string",
    "model": "string",
    "principle": "string",
    "system_prompt": "string",
    "endpoint": "string",
    "backend": "string",
    "response": "string",
    "finish_reason": "string",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "latency_s": "float64",
    "cached": "bool",
    "error": "string",
}

# --- annotate: aspect_annotations, critiques, ultrafeedback -------------------------------

# `overall_scores` has no dtype map of its own: `annotation.score_fix` builds it from
# `completions` and `critiques` by merges, keyed by `COMPLETION_KEY`.

# `types` holds Python lists of strings (Parquet list<string>).
ASPECT_ANNOTATIONS_COLUMN_TYPES: Mapping[str, Any] = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "aspect": "string",
    "shuffle_idx": "int64",
    "position": "int64",
    "rating": "Float64",
    "is_na": "bool",
    "rationale": "string",
    "types": "object",
    "type_rationale": "string",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "parse_error": "string",  # why the rating is null (call error or parse failure)
    "reasks": "int64",
    "judge_model": "string",
    "judge_endpoint": "string",  # the endpoint's name in parameters.yml
    "judge_backend": "string",  # local | openai | azure | vllm | ...
    "suspected_injection": "bool",  # the completion imitates a judge's answer format
    "raw_reply": "string",
    "prompt_tokens": "float64",  # this row's share of its call's tokens
    "completion_tokens": "float64",
}

CRITIQUES_COLUMN_TYPES: Mapping[str, Any] = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "critique": "string",
    "overall_score": "Float64",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "parse_error": "string",
    "reasks": "int64",
    "judge_model": "string",
    "judge_endpoint": "string",
    "judge_backend": "string",
    "suspected_injection": "bool",
    "raw_reply": "string",
}

# One record per prompt; `models` and `completions` are nested lists, left as Python
# objects (Parquet list<> and list<struct>), not cast.
ULTRAFEEDBACK_COLUMN_TYPES: Mapping[str, Any] = {
    "prompt_id": "string",
    "source": "string",
    "instruction": "string",
    "models": "object",
    "completions": "object",
}

# --- evaluate: eval_samples, eval_judgments, eval_metrics ---------------------------------

# Input columns of `eval_samples`: the required ones (plus `reference` in the reference
# modes) and the first exchange of a two-turn conversation.
EVAL_SAMPLES_REQUIRED_COLUMNS = ("instance_id", "question", "response", "model")
EVAL_SAMPLES_PRIOR_COLUMNS = ("prior_question", "prior_response", "prior_reference")

EVAL_SAMPLES_COLUMN_TYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "weight": "float64",
    "question": "string",
    "response": "string",
    "reference": "string",
    "prior_question": "string",
    "prior_response": "string",
    "prior_reference": "string",
}
EVAL_JUDGMENTS_COLUMN_TYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "weight": "float64",
    "mode": "string",
    "criterion": "string",
    "response": "string",
    "score": "float64",
    "correct": "boolean",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "success": "bool",
    "extracted_final_answer": "string",
    "reasoning": "string",
    "confidence": "float64",
    "raw_response": "string",
    "prompt": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",
}
# `eval_judgments` in the pairwise mode.
EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES = {
    "instance_id": "string",
    "turn": "int64",
    "replicate": "int64",
    "mode": "string",
    "model_a": "string",
    "model_b": "string",
    "verdict_a_first": "string",  # both verdicts say "A" when model_a's response won
    "verdict_b_first": "string",
    "outcome": "string",
    "consistent": "boolean",
    "score_a": "float64",
    "score_b": "float64",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "success": "bool",
    "raw_response_a_first": "string",
    "raw_response_b_first": "string",
    "prompt_a_first": "string",
    "prompt_b_first": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",  # both orders together
}
EVAL_METRICS_COLUMN_TYPES = {
    "mode": "string",
    "model": "string",
    "metric": "string",
    "criterion": "string",
    "k": "Int64",
    "value": "float64",
    "n": "int64",
    "n_missing": "int64",
}

# --- report: metrics tables, preference_pairs, pair_drops ---------------------------------

MODEL_ASPECT_METRICS_COLUMN_TYPES = {
    "model": "str",
    "aspect": "str",
    "n_rated": "int64",
    "n_na": "int64",
    "n_failed": "int64",
    "mean_rating": "float64",
    "mean_rating_0_100": "float64",
    "std_error": "float64",
}
MODEL_SCORE_METRICS_COLUMN_TYPES = {
    "model": "str",
    "n": "int64",
    "mean_overall_original": "float64",
    "mean_overall_fixed": "float64",
    "mean_fine_grained": "float64",
    "n_paired": "int64",
    "pearson_overall_vs_fine_grained": "float64",
    "spearman_overall_vs_fine_grained": "float64",
}
JUDGE_HEALTH_COLUMN_TYPES = {"metric": "str", "scope": "str", "value": "float64"}
POSITION_CONSISTENCY_COLUMN_TYPES = {
    "aspect": "str",
    "n_compared": "int64",
    "share_changed": "float64",
    "mean_abs_change": "float64",
}
RATING_BY_POSITION_COLUMN_TYPES = {
    "aspect": "str",
    "position": "int64",
    "n_rated": "int64",
    "mean_rating": "float64",
}
COST_TABLE_COLUMN_TYPES = {
    "stage": "str",
    "endpoint": "str",
    "model": "str",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    "estimated_cost": "float64",
    "priced": "bool",
}

PREFERENCE_PAIRS_COLUMN_TYPES = {
    "prompt_id": "str",
    "prompt": "str",
    "chosen": "object",
    "rejected": "object",
    "score_chosen": "float64",
    "score_rejected": "float64",
    "model_chosen": "str",
    "model_rejected": "str",
    "completion_idx_chosen": "int64",
    "completion_idx_rejected": "int64",
    "score_kind": "str",
}
PAIR_DROPS_COLUMN_TYPES = {"reason": "str", "n_prompts": "int64"}
