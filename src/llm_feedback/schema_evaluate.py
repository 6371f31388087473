"""The evaluate pipeline's datasets' columns (`eval_samples`, `eval_judgments`,
`eval_metrics`, `judge_validation`, `eval_annotator_agreement`), as `schema.py` describes
them; `schema.py` re-exports every name here."""

from __future__ import annotations

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

# What a judge is (`validation.card.judge_identity`): the card's key and its parts.
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

# `eval_model_ranking`: from pairwise judgments, each model's Bradley-Terry score (Elo-like
# scale, 1000 = the average model) with its bootstrap interval, its wins / ties / losses
# against the baseline and its raw and length-controlled (the form of AlpacaEval's
# length_controlled_minimal) win rates against it (ties half), and its style-controlled
# score (coefficients: `eval_style_coefficients`).
# The columns of the annotate report's `model_ranking` (llm_feedback.stats.comparison);
# the baseline's own row has no counts or win rates. Empty unless pairwise, 2+ models.
EVAL_MODEL_RANKING_COLUMN_TYPES = {
    "model": "string",
    "score": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "rank": "int64",
    "n_battles": "int64",
    "method": "string",
    "resamples": "int64",
    "baseline": "string",
    "wins": "Int64",
    "ties": "Int64",
    "losses": "Int64",
    "win_rate": "float64",
    "win_rate_ci_low": "float64",
    "win_rate_ci_high": "float64",
    "win_rate_method": "string",
    "lc_win_rate": "float64",
    "lc_win_rate_ci_low": "float64",
    "lc_win_rate_ci_high": "float64",
    "length_coefficient": "float64",
    "length_coefficient_ci_low": "float64",
    "length_coefficient_ci_high": "float64",
    "lc_method": "string",
    "style_controlled_score": "float64",
    "style_controlled_score_ci_low": "float64",
    "style_controlled_score_ci_high": "float64",
    "style_method": "string",
}
