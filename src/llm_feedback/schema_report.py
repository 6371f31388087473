"""Column types of the report pipeline's metric tables, the cost table and the run plan
(`schema.py` imports them, so that every table is found in one module)."""

from __future__ import annotations

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
# `model_ranking`: Bradley-Terry scores from annotate's per-prompt scores turned into pairs
# (llm_feedback.stats.comparison), with counts and raw and length-controlled win rates
# against `baseline` (none on the baseline's own row) and the style-controlled score.
MODEL_RANKING_COLUMN_TYPES = {
    "model": "str",
    "score": "float64",  # Elo-like: 1000 + 400 * centred log-strength / ln 10
    "ci_low": "float64",
    "ci_high": "float64",
    "rank": "int64",
    "n_battles": "int64",
    "method": "str",
    "resamples": "int64",
    "baseline": "str",
    "wins": "Int64",
    "ties": "Int64",
    "losses": "Int64",
    "win_rate": "float64",  # (wins + ties / 2) / battles against the baseline
    "win_rate_ci_low": "float64",
    "win_rate_ci_high": "float64",
    "win_rate_method": "str",
    # The form of AlpacaEval's length_controlled_minimal, fitted without penalty
    "lc_win_rate": "float64",
    "lc_win_rate_ci_low": "float64",
    "lc_win_rate_ci_high": "float64",
    "length_coefficient": "float64",
    "length_coefficient_ci_low": "float64",
    "length_coefficient_ci_high": "float64",
    "lc_method": "str",
    # After Arena-Hard's style control: the Bradley-Terry score with length and Markdown counts
    # as covariates (their coefficients: `style_coefficients`), same scale as `score`.
    "style_controlled_score": "float64",
    "style_controlled_score_ci_low": "float64",
    "style_controlled_score_ci_high": "float64",
    "style_method": "str",
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
    "completion_tokens": "int64",
    "estimated_cost": "float64",
    "priced": "bool",
    "usage_estimated": "bool",  # some replies had no usage: their tokens are estimated
    # Stage `unseen`: calls sent whose reply never arrived (a killed run), at most this cost.
    "unseen_calls": "int64",
}

# `run_plan`: one row per stage, endpoint and model (llm_feedback.planning).
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
