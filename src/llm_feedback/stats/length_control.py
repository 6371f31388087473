"""Length-controlled win rates (AlpacaEval 2) and style-controlled Bradley-Terry scores
(Arena-Hard), both fitted with statsmodels' binomial GLM.

The pairwise table is `llm_feedback.stats.ranking`'s (instance, model_a, model_b, outcome)
with, per side, the covariates: `length_a`, `length_b` for length control; every
`STYLE_FEATURES` name with `_a` / `_b` for style control (see `style_features`).

Intervals are clustered bootstrap percentile intervals with the instance as the unit (both
orders of a pair and every battle of a prompt move together), each resample's fit the
one-step estimate of `stats.glm_bootstrap`; the length-controlled win rates share their
resamples with the raw ones (same instances, seed and number of resamples).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.special import expit

from llm_feedback.errors import require_columns
from llm_feedback.stats.glm_bootstrap import (
    binomial_fit,
    one_step_estimates,
    one_step_method,
    resampled_newton_totals,
)
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    check_bootstrap,
    percentile_interval,
)
from llm_feedback.stats.ranking import (
    ELO_BASE,
    ELO_CENTRE,
    ELO_SCALE,
    RANKING_COLUMNS,
    check_pairs,
    oriented_against,
    win_rates,
)

STYLE_FEATURES = ("length", "headers", "bold", "list_items")

LC_COLUMNS = {
    "model": "str",
    "baseline": "str",
    "n_battles": "int64",
    "win_rate": "float64",
    "win_rate_ci_low": "float64",
    "win_rate_ci_high": "float64",
    "win_rate_method": "str",
    "lc_win_rate": "float64",
    "lc_win_rate_ci_low": "float64",
    "lc_win_rate_ci_high": "float64",
    "length_coefficient": "float64",
    "length_coefficient_ci_low": "float64",
    "length_coefficient_ci_high": "float64",
    "lc_method": "str",
}


def length_controlled_win_rates(
    pairs: pd.DataFrame,
    baseline: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Raw and length-controlled win rate of each model against `baseline`.

    AlpacaEval 2's method: per model, a logistic regression (binomial GLM, the outcome
    0 / 0.5 / 1 as a fractional response, i.e. ties half) of the model's preference over
    the baseline on a model term and tanh(d / sd(d)), d the length difference (model -
    baseline) and sd its standard deviation over that model's battles. The LC win rate is
    the preference predicted with the length term at zero (equal lengths): expit(model
    term). length_coefficient is the length term's coefficient (log-odds per unit of the
    squashed difference): how much length explained. AlpacaEval's instruction-difficulty
    term is left out: it comes from a fit over its leaderboard's many models, which a run
    comparing a few models does not have.

    Every interval is a clustered bootstrap (`n_resamples`, `seed`) over the instances
    that met the baseline, the raw and the controlled figures from the same resamples;
    the fits' replicates are one-step estimates (`stats.glm_bootstrap`).

    Columns: model, baseline, n_battles, win_rate, win_rate_ci_low, win_rate_ci_high,
    win_rate_method, lc_win_rate, lc_win_rate_ci_low, lc_win_rate_ci_high, length_coefficient,
    length_coefficient_ci_low, length_coefficient_ci_high, lc_method.
    """
    check_bootstrap(n_resamples, confidence)
    pairs = check_pairs(pairs)
    require_columns(pairs, ["length_a", "length_b"], "pairs")
    raw = win_rates(pairs, baseline, n_resamples=n_resamples, seed=seed, confidence=confidence)
    if raw.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in LC_COLUMNS.items()})
    oriented = oriented_against(pairs, baseline)
    length_a = pairs["length_a"].to_numpy(dtype="float64")[oriented["row"]]
    length_b = pairs["length_b"].to_numpy(dtype="float64")[oriented["row"]]
    model_is_a = pairs["model_a"].to_numpy()[oriented["row"]] == oriented["model"].to_numpy()
    oriented["length_difference"] = np.where(model_is_a, length_a - length_b, length_b - length_a)
    # The instances as `win_rates` numbers them, so that both draw the same resamples.
    oriented["cluster"] = pd.factorize(oriented["instance"])[0]

    rows = []
    for _, battles in oriented.groupby("model"):
        model, params, totals = _length_fit(battles, n_resamples, seed)
        replicates = one_step_estimates(params, totals)
        low, high = percentile_interval(replicates, confidence)
        has_length = len(params) == 2
        rows.append(
            {
                "model": model,
                "lc_win_rate": expit(params[0]),
                "lc_win_rate_ci_low": expit(low[0]),
                "lc_win_rate_ci_high": expit(high[0]),
                "length_coefficient": params[1] if has_length else np.nan,
                "length_coefficient_ci_low": low[1] if has_length else np.nan,
                "length_coefficient_ci_high": high[1] if has_length else np.nan,
                "lc_method": one_step_method(n_resamples),
            }
        )
    table = raw.rename(columns={"ci_low": "win_rate_ci_low", "ci_high": "win_rate_ci_high"}).rename(
        columns={"method": "win_rate_method"}
    )
    return table.merge(pd.DataFrame(rows), on="model").loc[:, list(LC_COLUMNS)].astype(LC_COLUMNS)


def _length_fit(
    battles: pd.DataFrame, n_resamples: int, seed: int
) -> tuple[str, np.ndarray, np.ndarray]:
    """One model's (name, coefficients, resampled Newton totals) against the baseline."""
    difference = battles["length_difference"].to_numpy()
    spread = difference.std()
    design = np.ones((len(battles), 1))
    if spread > 0:  # without length variation the length term is not identified
        design = np.column_stack([design[:, 0], np.tanh(difference / spread)])
    score = battles["score"].to_numpy()
    params = binomial_fit(score, design)
    codes = battles["cluster"].to_numpy()
    safe = np.nan_to_num(params)  # undefined fit: the sums are unused (NaN replicates)
    totals = resampled_newton_totals(score, design, safe, codes, n_resamples=n_resamples, seed=seed)
    return str(battles["model"].iloc[0]), params, totals


# Markdown elements counted for style control, as Arena-Hard counts them.
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s", re.MULTILINE)


def style_features(texts: pd.Series) -> pd.DataFrame:
    """Per text: length (characters), headers (Markdown `#` lines), bold (`**...**` or
    `__...__` spans) and list_items (lines starting with -, *, + or a number and . or )).
    A missing text counts 0 everywhere."""
    text = texts.fillna("").astype(str)
    return pd.DataFrame(
        {
            "length": text.str.len(),
            "headers": text.str.count(_HEADER),
            "bold": text.str.count(_BOLD),
            "list_items": text.str.count(_LIST_ITEM),
        },
        index=texts.index,
    ).astype("float64")


STYLE_COEFFICIENT_COLUMNS = ("feature", "coefficient", "ci_low", "ci_high", "method")


class StyleControl(NamedTuple):
    scores: pd.DataFrame  # RANKING_COLUMNS: the style-controlled Bradley-Terry scores
    coefficients: pd.DataFrame  # STYLE_COEFFICIENT_COLUMNS, one row per feature (NaN if
    # the feature never differs between the two answers of a battle)


def style_controlled_ranking(
    pairs: pd.DataFrame,
    features: tuple[str, ...] = STYLE_FEATURES,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> StyleControl:
    """Bradley-Terry scores with style covariates, as Arena-Hard's style control.

    The Bradley-Terry design (+1 for A, -1 for B; the first model, alphabetically, as the
    reference) gets one column per feature: the normalised difference (A - B) / (A + B)
    (0 when both are 0), divided by its standard deviation so coefficients are per standard
    deviation. Not centred, so that swapping A and B negates every column and the model
    stays symmetric. Scores are on `bradley_terry`'s Elo-like scale (centred log-
    strengths); a feature's coefficient is the log-odds gained per standard deviation of
    its normalised difference. Intervals: clustered bootstrap by instance (`n_resamples`,
    `seed`; one-step estimates, `stats.glm_bootstrap`), the same resamples as
    `bradley_terry`'s.
    """
    check_bootstrap(n_resamples, confidence)
    pairs = check_pairs(pairs)
    columns = [f"{feature}_{side}" for feature in features for side in ("a", "b")]
    require_columns(pairs, columns, "pairs")
    models = sorted(set(pairs["model_a"]) | set(pairs["model_b"]))
    if not models:
        empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in RANKING_COLUMNS.items()})
        return StyleControl(empty, pd.DataFrame(columns=list(STYLE_COEFFICIENT_COLUMNS)))
    n_models, rows = len(models), np.arange(len(pairs))
    codes = [
        pd.Categorical(pairs[side], categories=models).codes for side in ("model_a", "model_b")
    ]
    strengths = np.zeros((len(pairs), n_models))
    strengths[rows, codes[0]] = 1.0
    strengths[rows, codes[1]] = -1.0
    style, varied = [], []
    for feature in features:
        a = pairs[f"{feature}_a"].to_numpy(dtype="float64")
        b = pairs[f"{feature}_b"].to_numpy(dtype="float64")
        total = a + b
        difference = np.divide(a - b, total, out=np.zeros_like(total), where=total != 0)
        spread = difference.std()
        # A feature that never differs (no Markdown in any answer) is not identified.
        varied.append(bool(spread > 0))
        if spread > 0:
            style.append(difference / spread)
    design = np.column_stack([strengths[:, 1:], *style])
    outcome = pairs["outcome"].to_numpy()
    params = binomial_fit(outcome, design)
    clusters = pd.factorize(pairs["instance"])[0]
    totals = resampled_newton_totals(
        outcome, design, np.nan_to_num(params), clusters, n_resamples=n_resamples, seed=seed
    )
    replicates = one_step_estimates(params, totals)

    # Centred log-strengths are a linear map of the fitted ones (reference fixed at 0).
    to_centred = np.eye(n_models)[:, 1:] - 1.0 / n_models
    to_elo = ELO_SCALE / np.log(ELO_BASE)
    score = ELO_CENTRE + to_elo * (to_centred @ params[: n_models - 1])
    low, high = percentile_interval(
        ELO_CENTRE + to_elo * replicates[:, : n_models - 1] @ to_centred.T, confidence
    )
    method = one_step_method(n_resamples)
    scores = pd.DataFrame(
        {
            "model": models,
            "score": score,
            "ci_low": low,
            "ci_high": high,
            "rank": pd.Series(score)
            .rank(ascending=False, method="min", na_option="bottom")
            .to_numpy(),
            "n_battles": sum(np.bincount(c, minlength=n_models) for c in codes),
            "method": f"bradley-terry-style-control, {method}",
            "resamples": n_resamples,
        }
    )
    scores = scores.sort_values(["rank", "model"]).astype(RANKING_COLUMNS).reset_index(drop=True)
    coefficients = pd.DataFrame(
        {"feature": list(features), "coefficient": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    )
    if style:
        fitted = coefficients.index[varied]
        style_low, style_high = percentile_interval(replicates[:, n_models - 1 :], confidence)
        coefficients.loc[fitted, "coefficient"] = params[n_models - 1 :]
        coefficients.loc[fitted, "ci_low"], coefficients.loc[fitted, "ci_high"] = (
            style_low,
            style_high,
        )
    coefficients["method"] = method
    return StyleControl(scores, coefficients)
