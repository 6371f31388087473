"""The datasets' columns: keys, order and dtypes, one place.

`<DATASET>_COLUMN_TYPES` maps the columns of the catalog dataset `<dataset>`, in their
order, to the pandas dtype its producer gives them, so that the Parquet schema does not
depend on which values happened to occur; `..._KEY` tuples name the columns that tell one
row from another; `..._COLUMNS` tuples list columns without dtypes. The dtype strings are
the producers' own ("string" in the generate, annotate and evaluate tables, "str" in the
report tables) and are not unified here.

The outputs other tools read (`ultrafeedback`, `preference_pairs`) are defined by an Arrow
schema instead, `<DATASET>_ARROW_SCHEMA`, written with the types of the public Hugging Face
datasets they follow (`string`, not `large_string`; `list<struct<content, role>>` chat
messages), so that `datasets` loads them with the public features and
`concatenate_datasets` accepts them. Their pandas dtypes are derived from it
(`pandas_dtypes`), and `SchemaFrame` carries the schema to `to_parquet`: Kedro's
ParquetDataset calls `frame.to_parquet(...)`, and a pyarrow schema cannot be given in the
catalog's YAML.

These are not the JSON schemas that judges' structured replies follow: those are the
`..._REPLY_SCHEMA` constants and `..._reply_schema()` functions next to their prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

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
    "ensemble_member": "int64",
    "weight": "float64",
    "category": "string",
    "level": "string",
    "question": "string",
    "response": "string",
    "reference": "string",
    "prior_question": "string",
    "prior_response": "string",
    "prior_reference": "string",
    "runtime_s": "float64",  # seconds it took to generate the response, when known
    "recorded_score": "float64",  # a score recorded elsewhere (e.g. GPT-4's), to agree with
    # tuples of checked `backends.media.Media`; in memory only, between the nodes
    "images": "object",
    "audio": "object",
}
# Columns the evaluate nodes add to the samples between them (not the user's own).
EVAL_SAMPLES_INTERNAL_COLUMNS = ("generation_error",)
# What `eval_judgments` keeps of a row's attachments: sources (paths or URLs, "inline" for a
# data: URI) and SHA-256 hashes ("" for a URL), never the bytes. Lists of strings.
EVAL_MEDIA_COLUMN_TYPES = {
    "images": "object",
    "image_sha256": "object",
    "audio": "object",
    "audio_sha256": "object",
}
# The probability verdict beside the argmax one (`evaluation.probabilities`): NaN, and
# `logprobs_usable` False, where the judge's reply had no usable token probabilities.
EVAL_SCORE_PROBABILITY_COLUMN_TYPES = {
    "expected_score": "float64",  # the scale's numbers weighted by their probabilities
    "logprobs_usable": "bool",
}
EVAL_PAIR_PROBABILITY_COLUMN_TYPES = {
    "prob_margin_a_first": "float64",  # P(A) - P(B) with model_a's response shown first
    "prob_margin_b_first": "float64",  # P(A) - P(B) with model_b's response shown first
    "p_tie_a_first": "float64",
    "p_tie_b_first": "float64",
    "prob_margin": "float64",  # their mean: the order-averaged verdict, > 0 favours A
    "logprobs_usable": "bool",  # every order's verdict token had probabilities
}
EVAL_JUDGMENTS_COLUMN_TYPES = {
    "instance_id": "string",
    "turn": "int64",
    "model": "string",
    "replicate": "int64",
    "ensemble_member": "int64",
    "weight": "float64",
    "category": "string",
    "level": "string",
    "mode": "string",
    "criterion": "string",
    "response": "string",
    "runtime_s": "float64",
    "score": "float64",
    **EVAL_SCORE_PROBABILITY_COLUMN_TYPES,
    "recorded_score": "float64",
    "correct": "boolean",
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "success": "bool",
    "extracted_final_answer": "string",
    "reasoning": "string",
    "confidence": "float64",
    "raw_reply": "string",
    "prompt": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",
    # the response (or the first-turn one shown with it) addresses the evaluator or carries a
    # verdict: judged again without those spans, the lower verdict kept (evaluation.differential)
    "suspected_injection": "bool",
    **EVAL_MEDIA_COLUMN_TYPES,
}
# `eval_judgments` in the pairwise mode.
EVAL_PAIRWISE_JUDGMENTS_COLUMN_TYPES = {
    "instance_id": "string",
    "turn": "int64",
    "replicate": "int64",
    "category": "string",
    "level": "string",
    "mode": "string",
    "model_a": "string",
    "model_b": "string",
    "verdict_a_first": "string",  # both verdicts say "A" when model_a's response won
    "verdict_b_first": "string",
    "outcome": "string",
    "consistent": "boolean",
    "score_a": "float64",
    "score_b": "float64",
    **EVAL_PAIR_PROBABILITY_COLUMN_TYPES,
    "parse_status": "string",  # a word of llm_feedback.replies.status
    "success": "bool",
    "raw_reply_a_first": "string",
    "raw_reply_b_first": "string",
    "prompt_a_first": "string",
    "prompt_b_first": "string",
    "judge_model": "string",
    "cached": "bool",
    "error": "string",
    "reasks": "int64",  # both orders together
    # either response is suspected of injection: the pair is judged again without those
    # spans, and the outcome worse for the flagged response kept (evaluation.differential)
    "suspected_injection": "bool",
    **EVAL_MEDIA_COLUMN_TYPES,
}
EVAL_METRICS_COLUMN_TYPES = {
    "mode": "string",
    # The samples' benchmark (`evaluation.benchmarks`): metrics are computed per benchmark.
    "benchmark": "string",
    "model": "string",
    "metric": "string",
    # Metrics of one category or level of eval_samples; both null: over all samples.
    "category": "string",
    "level": "string",
    "raters": "string",  # agreement metrics: the compared raters joined by "~"
    "criterion": "string",
    "k": "Int64",
    "value": "float64",
    "n": "int64",
    "n_missing": "int64",
    # The value's 95% interval and how it was computed (the judge validation rows; null
    # where a metric has none).
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "string",
    # How a model's figure was estimated: `judge` (the judge's own), `prediction_powered`
    # (corrected by a slice of gold scores) or `labels_only` (the slice alone; see
    # `evaluation.corrected`), with the gold scores used; null on agreement and validation
    # rows.
    "estimator": "string",
    "n_labels": "Int64",
}

# Gold labels a pairwise sample may carry (the same on both rows of an instance; see
# `validation.formats`): kept through to `eval_judgments`, where the judge is validated.
EVAL_GOLD_COLUMN_TYPES = {
    "gold": "string",  # "A" | "B" | "tie": the annotators' majority
    "gold_labels": "object",  # every annotator's label (pointwise: score), a list
    "gold_annotators": "object",  # their names, a list
}
# Pairwise verdicts recorded elsewhere (`evaluation.recorded`), the same on both rows of a
# pair and kept through to `eval_judgments` as they are: no judge is called for them.
EVAL_RECORDED_COLUMN_TYPES = {
    "preference": "float64",  # AlpacaEval's scale: 1 = A better, 2 = B better, 1.5 a draw
    "recorded_verdict_a_first": "string",  # Arena-Hard's level (A>>B .. B>>A), A shown first
    "recorded_verdict_b_first": "string",  # the swapped game's level, read from A's side
    "recorded_by": "string",  # the judge that recorded them
    "prompt_key": "string",  # the prompt the pair answers (pairs of one prompt share it)
}
# Columns of a pair rather than of one response: kept once, not as `_a` / `_b`.
# The benchmark (`evaluation.benchmarks`) is a pair's too.
EVAL_INSTANCE_COLUMNS = (*EVAL_GOLD_COLUMN_TYPES, *EVAL_RECORDED_COLUMN_TYPES, "benchmark")

# --- judge validation: judge_validation, eval_annotator_agreement --------------------------

# What a judge is (`validation.identity.judge_identity`): the card's key and its parts.
JUDGE_IDENTITY_COLUMNS = (
    "judge_key",
    "judge_endpoint",
    "judge_model",
    "judge_model_file",  # the weights behind the name: GGUF sha256, Azure deployment, or ""
    "prompt_template_sha256",
    "sampling",  # the decoding settings, sorted JSON
    "task",  # what the judge is asked (stage or mode, scale, reply format), sorted JSON
)
JUDGE_VALIDATION_COLUMN_TYPES = {
    **dict.fromkeys(JUDGE_IDENTITY_COLUMNS, "string"),
    "validation_set": "string",
    "kind": "string",  # "judge" | "baseline"
    "judge": "string",  # the judge's model, or the baseline's name
    "verdict_source": "string",  # "argmax" | "logprobs" | "logprobs_calibrated"; baselines null
    "metric": "string",
    "category": "string",
    "value": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "string",
    "resamples": "int64",
    "n": "int64",
    "position_bias": "float64",  # P(first) - P(second) over both orders; NaN without logprobs
    "usable_probability_share": "float64",  # calls whose verdict token had probabilities
    "created_at": "string",  # ISO 8601, UTC
}
# The annotators' agreement with each other (`validation.agreement.annotator_agreement`),
# with the judge and validation set it was measured for; empty with one annotator.
EVAL_ANNOTATOR_AGREEMENT_COLUMN_TYPES = {
    "judge_key": "string",
    "validation_set": "string",
    "metric": "string",  # cohen_kappa, exact_match_share, fleiss_kappa, *_tie_share, ...
    "raters": "string",  # the annotators joined by "~"
    "value": "float64",
    "n": "int64",
}

# --- report: metric tables, costs and the run plan ---------------------------------------

MODEL_ASPECT_METRICS_COLUMN_TYPES = {
    "model": "str",
    "aspect": "str",
    "n_rated": "int64",
    "n_na": "int64",
    "n_failed": "int64",
    "mean_rating": "float64",
    "mean_rating_0_100": "float64",
    "std_error": "float64",
    "ci_low": "float64",  # interval of mean_rating (bootstrap over prompts)
    "ci_high": "float64",
    "ci_method": "str",
}
SOURCE_ASPECT_METRICS_COLUMN_TYPES = {"source": "str", **MODEL_ASPECT_METRICS_COLUMN_TYPES}
MODEL_SCORE_METRICS_COLUMN_TYPES = {
    "model": "str",
    "n": "int64",
    "mean_overall_original": "float64",
    "mean_overall_fixed": "float64",
    "mean_fine_grained": "float64",
    "n_paired": "int64",
    "pearson_overall_vs_fine_grained": "float64",
    "spearman_overall_vs_fine_grained": "float64",
    # <column>_ci_low / _ci_high: each mean's and correlation's interval.
    **{
        f"{column}_{bound}": "float64"
        for column in (
            "mean_overall_original",
            "mean_overall_fixed",
            "mean_fine_grained",
            "pearson_overall_vs_fine_grained",
            "spearman_overall_vs_fine_grained",
        )
        for bound in ("ci_low", "ci_high")
    },
    "ci_method": "str",
}
JUDGE_HEALTH_COLUMN_TYPES = {
    "metric": "str",
    "scope": "str",
    "value": "float64",
    "ci_low": "float64",  # Wilson interval of a rate; NaN for counts
    "ci_high": "float64",
    "ci_method": "str",
}
POSITION_CONSISTENCY_COLUMN_TYPES = {
    "aspect": "str",
    "n_compared": "int64",
    "share_changed": "float64",
    "mean_abs_change": "float64",
    "share_changed_ci_low": "float64",
    "share_changed_ci_high": "float64",
    "mean_abs_change_ci_low": "float64",
    "mean_abs_change_ci_high": "float64",
    "ci_method": "str",
}
SHUFFLE_AGREEMENT_COLUMN_TYPES = {
    "aspect": "str",
    "raters": "str",
    "statistic": "str",
    "value": "float64",
    "n": "int64",
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "str",
}
RATING_BY_POSITION_COLUMN_TYPES = {
    "aspect": "str",
    "position": "int64",
    "n_rated": "int64",
    "mean_rating": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "str",
}
# The Bradley-Terry table of `stats.ranking.bradley_terry` (and of the style-controlled
# fit): each model's score and bootstrap interval, rank and battles.
RANKING_COLUMN_TYPES = {
    "model": "str",
    "score": "float64",  # Elo-like: 1000 + 400 * centred log-strength / ln 10
    "ci_low": "float64",
    "ci_high": "float64",
    "rank": "int64",
    "n_battles": "int64",
    "method": "str",
    "resamples": "int64",
}
_WIN_RATE_COLUMN_TYPES = {
    "win_rate": "float64",  # (wins + ties / 2) / battles against the baseline
    "win_rate_ci_low": "float64",
    "win_rate_ci_high": "float64",
    "win_rate_method": "str",
}
# The form of AlpacaEval's length_controlled_minimal, fitted without penalty
_LENGTH_CONTROLLED_COLUMN_TYPES = {
    "lc_win_rate": "float64",
    "lc_win_rate_ci_low": "float64",
    "lc_win_rate_ci_high": "float64",
    "length_coefficient": "float64",
    "length_coefficient_ci_low": "float64",
    "length_coefficient_ci_high": "float64",
    "lc_method": "str",
}
# The table of `stats.length_control.length_controlled_win_rates`: each model's raw and
# length-controlled win rates against the baseline.
LENGTH_CONTROLLED_COLUMN_TYPES = {
    "model": "str",
    "baseline": "str",
    "n_battles": "int64",
    **_WIN_RATE_COLUMN_TYPES,
    **_LENGTH_CONTROLLED_COLUMN_TYPES,
}
# `model_ranking`: Bradley-Terry scores from annotate's per-prompt scores turned into pairs
# (llm_feedback.stats.comparison), with counts and raw and length-controlled win rates
# against `baseline` (none on the baseline's own row) and the style-controlled score.
MODEL_RANKING_COLUMN_TYPES = {
    **RANKING_COLUMN_TYPES,
    "baseline": "str",
    "wins": "Int64",
    "ties": "Int64",
    "losses": "Int64",
    **_WIN_RATE_COLUMN_TYPES,
    **_LENGTH_CONTROLLED_COLUMN_TYPES,
    # After Arena-Hard's style control: the Bradley-Terry score with length and Markdown counts
    # as covariates (their coefficients: `style_coefficients`), same scale as `score`.
    "style_controlled_score": "float64",
    "style_controlled_score_ci_low": "float64",
    "style_controlled_score_ci_high": "float64",
    "style_method": "str",
}
# `eval_model_ranking`: from pairwise judgments, each model's Bradley-Terry score (Elo-like
# scale, 1000 = the average model) with its bootstrap interval, its wins / ties / losses
# against the baseline and its raw and length-controlled (the form of AlpacaEval's
# length_controlled_minimal) win rates against it (ties half), and its style-controlled
# score (coefficients: `eval_style_coefficients`).
# The columns of the annotate report's `model_ranking` (llm_feedback.stats.comparison);
# the baseline's own row has no counts or win rates. Empty unless pairwise, 2+ models.
# The same columns, with the evaluate tables' "string" dtype for text.
EVAL_MODEL_RANKING_COLUMN_TYPES = {
    name: "string" if dtype == "str" else dtype
    for name, dtype in MODEL_RANKING_COLUMN_TYPES.items()
}
# `style_coefficients` (annotate) and `eval_style_coefficients` (evaluate): the style
# covariates' coefficients in the style-controlled Bradley-Terry fit, log-odds per standard
# deviation of the normalised difference (A - B) / (A + B); NaN for a feature that never
# differs between the two answers.
STYLE_COEFFICIENTS_COLUMN_TYPES = {
    "feature": "str",  # length, headers, bold, list_items
    "coefficient": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "str",
}
# `judge_bias`: position slope, rating-length Spearman and self-preference per aspect.
JUDGE_BIAS_COLUMN_TYPES = {
    "diagnostic": "str",
    "scope": "str",
    "n": "int64",
    "estimate": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "str",
}
RATING_BY_LENGTH_COLUMN_TYPES = {
    "aspect": "str",
    "length_bin": "int64",
    "length_low": "int64",  # characters
    "length_high": "int64",
    "n": "int64",
    "estimate": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "ci_method": "str",
}
COST_TABLE_COLUMN_TYPES = {
    "stage": "str",
    "endpoint": "str",
    "model": "str",
    "mode": "str",  # online | batch (Batch API rows, at the batch price)
    "prompt_tokens": "int64",
    # Of prompt_tokens, served and written by the provider's prompt cache (0: none reported)
    "cached_prompt_tokens": "int64",
    "cache_write_tokens": "int64",
    "completion_tokens": "int64",
    "estimated_cost": "float64",
    "priced": "bool",
    "cache_pricing": "str",  # how cache tokens were priced (reporting/cache_prices.py)
    "usage_estimated": "bool",  # some replies had no usage: their tokens are estimated
    # Stage `unseen`: calls sent whose reply never arrived (a killed run), at most this cost.
    "unseen_calls": "int64",
}

# `run_plan`: one row per stage, endpoint and model (llm_feedback.runs.plan).
RUN_PLAN_COLUMN_TYPES = {
    "stage": "str",
    "endpoint": "str",
    "backend": "str",
    "model": "str",
    "mode": "str",  # online | batch (priced at the batch rate)
    "calls": "int64",
    "cached_calls": "int64",
    "duplicate_calls": "int64",
    "skipped_too_long": "int64",
    "calls_to_send": "int64",
    "prompt_tokens": "int64",
    "completion_tokens": "int64",
    # The least time its calls take at the endpoint's requests/tokens-per-minute limits
    # (null: no limit configured).
    "minutes_at_limits": "float64",
    "estimated_cost": "float64",
    "priced": "bool",
    "basis": "str",
}


# --- keys ---------------------------------------------------------------------------------

# One completion: a row of `completions` and `overall_scores`, and the completion an
# `aspect_annotations` or `critiques` row is about.
COMPLETION_KEY = ("prompt_id", "completion_idx")
# What tells one sample (and its judge call) from another.
EVAL_SAMPLE_KEY = ("instance_id", "turn", "model", "replicate", "ensemble_member")

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

# Of a row's prompt tokens, those the provider's prompt cache served and wrote (billed
# apart: reporting/cache_prices.py); null where the API did not say. Tables written before
# these columns read as null.
CACHE_TOKEN_COLUMN_TYPES = {
    "cached_prompt_tokens": "float64",
    "cache_write_tokens": "float64",
}

# `correct_answers` / `incorrect_answers` are carried from `sampled_prompts` (Python lists of
# strings, empty when the source has none) for the UltraFeedback export.
COMPLETIONS_COLUMN_TYPES = {
    "prompt_id": "string",
    "completion_idx": "int64",
    "source": "string",
    "instruction": "string",
    "correct_answers": "object",
    "incorrect_answers": "object",
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
    **CACHE_TOKEN_COLUMN_TYPES,
    "latency_s": "float64",
    "cached": "bool",
    "via_batch": "bool",  # answered through a Batch API (priced at the batch rate)
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
    "judge_via_batch": "bool",  # the judge answered through a Batch API
    "suspected_injection": "bool",  # addresses the evaluator or carries a verdict: rated
    # alone, as written and without those spans, the lower rating kept (annotation.isolation)
    # The call's reply, shared by its rows: each distinct reply stored once (Parquet
    # dictionary), as a call rates several completions.
    "raw_reply": "category",
    "prompt_tokens": "float64",  # this row's share of its call's tokens
    "completion_tokens": "float64",
    **CACHE_TOKEN_COLUMN_TYPES,
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
    "judge_via_batch": "bool",
    "suspected_injection": "bool",
    "raw_reply": "string",
}

# One record per prompt. The public openbmb/UltraFeedback features, as its dataset card lists
# them (ratings are strings: "1".."5" or "N/A"; `Type` lists type codes).
_RATED = pa.struct([("Rating", pa.string()), ("Rationale", pa.string())])
_RATED_WITH_TYPES = pa.struct(
    [
        ("Type", pa.list_(pa.string())),
        ("Rationale", pa.string()),
        ("Rating", pa.string()),
        ("Rationale For Rating", pa.string()),
    ]
)


def _annotations(aspects: Mapping[str, bool]) -> pa.StructType:
    """A completion's annotations of `aspects` ({aspect: whether it carries type codes})."""
    return pa.struct(
        [(aspect, _RATED_WITH_TYPES if typed else _RATED) for aspect, typed in aspects.items()]
    )


# The aspects of the public `annotations` struct, in the card's order: the standard four,
# whose public columns every export keeps (null where a run did not rate one).
ULTRAFEEDBACK_ASPECTS: tuple[str, ...] = (
    "instruction_following",
    "honesty",
    "truthfulness",
    "helpfulness",
)
# Whether each public aspect carries type codes (`Type` and two rationales), as published.
ULTRAFEEDBACK_TYPED_ASPECTS: frozenset[str] = frozenset({"truthfulness", "helpfulness"})
ULTRAFEEDBACK_COMPLETION = pa.struct(
    [
        (
            "annotations",
            _annotations(
                {aspect: aspect in ULTRAFEEDBACK_TYPED_ASPECTS for aspect in ULTRAFEEDBACK_ASPECTS}
            ),
        ),
        ("critique", pa.string()),
        ("custom_system_prompt", pa.string()),
        ("fine-grained_score", pa.float64()),
        ("model", pa.string()),
        ("overall_score", pa.float64()),
        ("principle", pa.string()),
        ("response", pa.string()),
    ]
)
ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("instruction", pa.string()),
        ("models", pa.list_(pa.string())),
        ("completions", pa.list_(ULTRAFEEDBACK_COMPLETION)),
        ("correct_answers", pa.list_(pa.string())),
        ("incorrect_answers", pa.list_(pa.string())),
    ]
)
# Ours, as top-level columns: inside `completions` an extra field would make the list's
# type differ from the public one, which `datasets.concatenate_datasets` refuses; extra
# top-level columns it accepts (null in the public rows), and `annotation.export.to_public`
# drops them. `extra_annotations` and `annotation_status` hold one entry per completion, in
# the order of `completions`; a status is the aspect's `parse_status` word.
# `shuffle_ratings` holds, per completion and aspect, every shuffle's rating string in
# shuffle order (the public `Rating` is one shuffle's; see annotation/export.py).
# `extra_annotations` is there only when the run rated an aspect beyond the public four.
ULTRAFEEDBACK_OWN_COLUMNS: tuple[str, ...] = (
    "prompt_id",
    "extra_annotations",
    "annotation_status",
    "shuffle_ratings",
)


def ultrafeedback_arrow_schema(extra_aspects: Mapping[str, bool] | None = None) -> pa.Schema:
    """The export's Arrow schema for a run that rated the public four aspects (or some of
    them) and `extra_aspects` ({aspect: whether it carries type codes}, in export order).

    The public columns are always the same; our own columns hold the public four plus the
    extra aspects, so the schema grows only with the aspects a run rates beyond the four.
    An extra aspect with type codes has the public typed struct (`Type`, `Rationale`,
    `Rating`, `Rationale For Rating`), one without `Rating` and `Rationale`.

    Args:
        extra_aspects: {aspect: whether it has type codes} beyond the public four (None: none).

    Returns:
        The schema.
    """
    extras = dict(extra_aspects or {})
    clash = sorted(set(extras) & set(ULTRAFEEDBACK_ASPECTS))
    if clash:
        raise ValueError(f"{', '.join(clash)}: public aspects, not extra ones")
    aspects = (*ULTRAFEEDBACK_ASPECTS, *extras)
    extra_column = (
        [
            (
                "extra_annotations",
                pa.list_(_annotations(extras)),
            )
        ]
        if extras
        else []
    )
    return pa.schema(
        [
            ("prompt_id", pa.string()),
            *ULTRAFEEDBACK_PUBLIC_ARROW_SCHEMA,
            *extra_column,
            (
                "annotation_status",
                pa.list_(pa.struct([(aspect, pa.string()) for aspect in aspects])),
            ),
            (
                "shuffle_ratings",
                pa.list_(pa.struct([(aspect, pa.list_(pa.string())) for aspect in aspects])),
            ),
        ]
    )


def ultrafeedback_extra_aspects(schema: pa.Schema) -> dict[str, bool]:
    """The extra aspects ({aspect: typed}) of an export's schema (written, or inferred from
    a frame of its records); ValueError when it is not an export's schema.

    Args:
        schema: an export's schema.

    Returns:
        {aspect: typed}.
    """
    extras: dict[str, bool] = {}
    if "extra_annotations" in schema.names:
        entry = schema.field("extra_annotations").type
        if not (pa.types.is_list(entry) and pa.types.is_struct(entry.value_type)):
            raise ValueError("extra_annotations is not a list of structs")
        for aspect in entry.value_type:
            typed = pa.types.is_struct(aspect.type) and "Type" in [f.name for f in aspect.type]
            extras[aspect.name] = typed
    expected = ultrafeedback_arrow_schema(extras).names
    if list(schema.names) != expected:
        raise ValueError(f"columns {list(schema.names)} are not those expected ({expected})")
    return extras


# The schema of an export that rates no aspect beyond the public four.
ULTRAFEEDBACK_ARROW_SCHEMA = ultrafeedback_arrow_schema()

# --- report: preference_pairs, pair_drops, pair_counts ------------------------------------

# Chat messages as the Hugging Face datasets store them.
CHAT_MESSAGES = pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))

# `report.pairs.layout: trl` (default): TRL's conversational preference format with an
# explicit prompt: `prompt` holds the user message, `chosen` / `rejected` the assistant
# message only; `margin` (score_chosen - score_rejected) is the column TRL's RewardTrainer
# reads beside them; `split` ("train" / "test") is the seeded split by prompt, which the
# Hub push publishes as the dataset's splits.
PAIR_SPLITS = ("train", "test")
PREFERENCE_PAIRS_ARROW_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.string()),
        ("prompt", CHAT_MESSAGES),
        ("chosen", CHAT_MESSAGES),
        ("rejected", CHAT_MESSAGES),
        ("score_chosen", pa.float64()),
        ("score_rejected", pa.float64()),
        ("margin", pa.float64()),
        ("source", pa.string()),
        ("model_chosen", pa.string()),
        ("model_rejected", pa.string()),
        ("completion_idx_chosen", pa.int64()),
        ("completion_idx_rejected", pa.int64()),
        ("score_kind", pa.string()),
        ("split", pa.string()),
    ]
)
# `report.pairs.layout: h4`: HuggingFaceH4/ultrafeedback_binarized's features, exactly:
# `prompt` text, `chosen` / `rejected` whole conversations (user + assistant), `messages`
# the chosen one. No `margin` or `split` column (they would stop it concatenating with
# the public data): the Hub push derives its splits from `prompt_id` (reporting.pairs
# .split_of_prompts), with the fraction and seed of the run that wrote it.
PREFERENCE_PAIRS_H4_ARROW_SCHEMA = pa.schema(
    [
        ("prompt", pa.string()),
        ("prompt_id", pa.string()),
        ("chosen", CHAT_MESSAGES),
        ("rejected", CHAT_MESSAGES),
        ("messages", CHAT_MESSAGES),
        ("score_chosen", pa.float64()),
        ("score_rejected", pa.float64()),
    ]
)
PREFERENCE_PAIRS_ARROW_SCHEMAS: Mapping[str, pa.Schema] = {
    "trl": PREFERENCE_PAIRS_ARROW_SCHEMA,
    "h4": PREFERENCE_PAIRS_H4_ARROW_SCHEMA,
}
PAIR_DROPS_COLUMN_TYPES = {"reason": "str", "n_prompts": "int64"}
# One row: how many pairs, from how many prompts, and of them in the test split (the
# report's line, without reading them).
PAIR_COUNTS_COLUMN_TYPES = {
    "pairs": "int64",
    "prompts": "int64",
    "test_pairs": "int64",
    "test_prompts": "int64",
}


# --- Arrow-typed outputs --------------------------------------------------------------------


def pandas_dtypes(schema: pa.Schema) -> dict[str, str]:
    """The in-memory pandas dtype of each column of `schema`: "str" for text, the numpy
    dtype for numbers and booleans, "object" (Python lists and dicts) for nested types.

    Args:
        schema: an Arrow schema.

    Returns:
        Column -> dtype.
    """
    flat = {pa.string(): "str", pa.float64(): "float64", pa.int64(): "int64", pa.bool_(): "bool"}
    return {field.name: flat.get(field.type, "object") for field in schema}


class SchemaFrame(pd.DataFrame):
    """A DataFrame that `to_parquet` writes with `arrow_schema` rather than the types pyarrow
    would infer (`large_string` for pandas' "str", `null` for a column or struct field
    without a value, `list<null>` for lists that are all empty).

    Only the frame itself carries the schema: anything derived from it (a slice, a copy) is
    a plain DataFrame. Build one with `schema_frame`.
    """

    _metadata: ClassVar[list[str]] = ["arrow_schema"]
    arrow_schema: pa.Schema | None = None

    def to_parquet(self, path: Any = None, *args: Any, **kwargs: Any) -> Any:
        """pandas' `to_parquet`, written with the frame's Arrow schema (and no index)
        unless told otherwise; ValueError when the columns do not match it.

        Args:
            path: where to write (pandas' `path`).
            *args: pandas' positional arguments.
            **kwargs: pandas' keyword arguments.

        Returns:
            What pandas' `to_parquet` returns.
        """
        if self.arrow_schema is not None and "schema" not in kwargs:
            if list(self.columns) != self.arrow_schema.names:
                raise ValueError(
                    f"columns {list(self.columns)} do not match the Arrow schema's "
                    f"{self.arrow_schema.names}"
                )
            kwargs["schema"] = self.arrow_schema
            kwargs.setdefault("index", False)
            if any(isinstance(dtype, pd.ArrowDtype) for dtype in self.dtypes):
                return self._write_arrow_backed(path, *args, **kwargs)
        return super().to_parquet(path, *args, **kwargs)

    def _write_arrow_backed(self, path: Any, *args: Any, **kwargs: Any) -> None:
        """Arrow-backed nested columns written as-is, without copying them into Python values.

        pandas would record their dtypes as "list<...>[pyarrow]", which `read_parquet` cannot
        restore: the file records the dtypes of `pandas_dtypes`, as a frame of Python lists
        and dicts does, so it is the same file.
        """
        schema = kwargs.pop("schema")
        if args or kwargs.pop("index") or kwargs.pop("engine", "pyarrow") != "pyarrow":
            raise ValueError("an Arrow-backed SchemaFrame is written by pyarrow, without index")
        table = pa.Table.from_pandas(self, schema=schema, preserve_index=False)
        pq.write_table(table.replace_schema_metadata(pandas_metadata(schema)), path, **kwargs)


def pandas_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """The schema metadata pandas writes for a frame of `pandas_dtypes(schema)` (Python
    values in nested columns), which `read_parquet` reads back to the same dtypes.

    Args:
        schema: an Arrow schema.

    Returns:
        The metadata (its b"pandas" entry).
    """
    described = pa.Table.from_pandas(schema_frame([], schema), schema=schema, preserve_index=False)
    return described.schema.metadata


def schema_frame(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> SchemaFrame:
    """`rows` (dicts of Python values) as a `SchemaFrame` with `schema`'s columns, in its
    order, and the dtypes of `pandas_dtypes(schema)`; empty rows give an empty, typed frame.

    Args:
        rows: the rows.
        schema: the Arrow schema.

    Returns:
        The frame.
    """
    dtypes = pandas_dtypes(schema)
    columns = {
        name: pd.Series([row[name] for row in rows], dtype=dtype) for name, dtype in dtypes.items()
    }
    frame = SchemaFrame(columns)
    frame.arrow_schema = schema
    return frame
