"""Length-controlled win rates (AlpacaEval 2) and style-controlled Bradley-Terry scores
(Arena-Hard), both fitted with statsmodels' binomial GLM.

The pairwise table is `llm_feedback.stats.ranking`'s (instance, model_a, model_b, outcome)
with, per side, the covariates: `length_a`, `length_b` for length control; every
`STYLE_FEATURES` name with `_a` / `_b` for style control (see `style_features`).

Intervals are Wald intervals from the cluster-robust (sandwich) covariance with the
instance as cluster, so both orders of a pair and every battle of a prompt count as one
unit, as in the clustered bootstrap. One fit instead of one per resample keeps a 100k-
battle table fast; `length_controlled_win_rates(..., interval="bootstrap")` refits per
clustered bootstrap resample where a percentile interval is wanted.
"""

from __future__ import annotations

import re
import warnings
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy.special import expit
from scipy.stats import norm
from statsmodels.tools.sm_exceptions import PerfectSeparationWarning

from llm_feedback.errors import ConfigError, require_columns
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    bootstrap_method,
    bootstrap_replicates,
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

WALD_METHOD = "wald-cluster"
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
    interval: Literal["wald-cluster", "bootstrap"] = "wald-cluster",
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

    Raw win rates carry a clustered bootstrap interval (`n_resamples`, `seed`); the LC win
    rate and the coefficient a cluster-robust Wald interval, or with interval="bootstrap"
    percentile intervals of a refit per clustered bootstrap resample (slower).

    Columns: model, baseline, n_battles, win_rate, win_rate_ci_low, win_rate_ci_high,
    win_rate_method, lc_win_rate, lc_win_rate_ci_low, lc_win_rate_ci_high, length_coefficient,
    length_coefficient_ci_low, length_coefficient_ci_high, lc_method.
    """
    if interval not in ("wald-cluster", "bootstrap"):
        raise ConfigError(f"interval: expected 'wald-cluster' or 'bootstrap', got {interval!r}")
    pairs = check_pairs(pairs)
    require_columns(pairs, ["length_a", "length_b"], "pairs")
    raw = win_rates(pairs, baseline, n_resamples=n_resamples, seed=seed, confidence=confidence)
    oriented = oriented_against(pairs, baseline)
    length_a = pairs["length_a"].to_numpy(dtype="float64")[oriented["row"]]
    length_b = pairs["length_b"].to_numpy(dtype="float64")[oriented["row"]]
    model_is_a = pairs["model_a"].to_numpy()[oriented["row"]] == oriented["model"].to_numpy()
    oriented["length_difference"] = np.where(model_is_a, length_a - length_b, length_b - length_a)

    rows = []
    for model, battles in oriented.groupby("model", sort=True):
        fit = _length_fit(battles, n_resamples, seed, confidence, interval)
        rows.append({"model": model, **fit})
    controlled = pd.DataFrame(rows)
    table = raw.rename(columns={"ci_low": "win_rate_ci_low", "ci_high": "win_rate_ci_high"}).rename(
        columns={"method": "win_rate_method"}
    )
    if controlled.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in LC_COLUMNS.items()})
    return table.merge(controlled, on="model").loc[:, list(LC_COLUMNS)].astype(LC_COLUMNS)


def _length_fit(
    battles: pd.DataFrame, n_resamples: int, seed: int, confidence: float, interval: str
) -> dict[str, float | str]:
    difference = battles["length_difference"].to_numpy()
    spread = difference.std()
    squashed = np.tanh(difference / spread) if spread > 0 else np.zeros_like(difference)
    design = np.column_stack([np.ones(len(battles)), squashed])
    score = battles["score"].to_numpy()
    clusters = pd.factorize(battles["instance"])[0]
    z = norm.ppf(0.5 + confidence / 2)
    if spread == 0:  # no length variation: the length term is not identified
        design = design[:, :1]
    params, covariance = _glm(score, design, clusters)
    if interval == "bootstrap":
        replicates = bootstrap_replicates(
            clusters,
            lambda weights: _glm(score, design, None, weights)[0],
            n_resamples,
            seed,
        )
        low, high = percentile_interval(replicates, confidence)
        method = bootstrap_method(n_resamples)
    else:
        half = z * np.sqrt(np.clip(np.diag(covariance), 0, None))
        low, high = params - half, params + half
        method = WALD_METHOD
    has_length = design.shape[1] == 2
    return {
        "lc_win_rate": expit(params[0]),
        "lc_win_rate_ci_low": expit(low[0]),
        "lc_win_rate_ci_high": expit(high[0]),
        "length_coefficient": params[1] if has_length else np.nan,
        "length_coefficient_ci_low": low[1] if has_length else np.nan,
        "length_coefficient_ci_high": high[1] if has_length else np.nan,
        "lc_method": method,
    }


def _glm(
    response: np.ndarray,
    design: np.ndarray,
    clusters: np.ndarray | None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Binomial GLM (fractional response allowed: a tie is 0.5) by statsmodels' IRLS;
    cluster-robust covariance when `clusters` is given. A perfectly separated sample
    (a model winning every battle) has no finite MLE, and a singular design (e.g. every
    length difference of one sign with every outcome equal) no unique one: NaN parameters."""
    size = design.shape[1]
    if len(response) <= size:  # no residual degree of freedom: nothing to estimate
        return np.full(size, np.nan), np.full((size, size), np.nan)
    model = sm.GLM(response, design, family=sm.families.Binomial(), freq_weights=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        try:
            if clusters is None:
                fit = model.fit()
            elif len(np.unique(clusters)) < 2:  # no spread between clusters to measure
                fit = model.fit()
                return np.asarray(fit.params), np.full((size, size), np.nan)
            else:
                fit = model.fit(cov_type="cluster", cov_kwds={"groups": clusters})
        except (PerfectSeparationWarning, np.linalg.LinAlgError):
            return np.full(size, np.nan), np.full((size, size), np.nan)
    return np.asarray(fit.params), np.asarray(fit.cov_params())


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


class StyleControl(NamedTuple):
    scores: pd.DataFrame  # RANKING_COLUMNS: the style-controlled Bradley-Terry scores
    coefficients: pd.DataFrame  # feature, coefficient, ci_low, ci_high, method


def style_controlled_ranking(
    pairs: pd.DataFrame,
    features: tuple[str, ...] = STYLE_FEATURES,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> StyleControl:
    """Bradley-Terry scores with style covariates, as Arena-Hard's style control.

    The Bradley-Terry design (+1 for A, -1 for B; the first model, alphabetically, as the
    reference) gets one column per feature: the normalised difference (A - B) / (A + B)
    (0 when both are 0), divided by its standard deviation so coefficients are per standard
    deviation. Not centred, so that swapping A and B negates every column and the model
    stays symmetric. Scores are on `bradley_terry`'s Elo-like scale (centred log-
    strengths); a feature's coefficient is the log-odds gained per standard deviation of
    its normalised difference. Intervals: cluster-robust Wald (instance as cluster).
    """
    pairs = check_pairs(pairs)
    columns = [f"{feature}_{side}" for feature in features for side in ("a", "b")]
    require_columns(pairs, columns, "pairs")
    models = sorted(set(pairs["model_a"]) | set(pairs["model_b"]))
    n_models, rows = len(models), np.arange(len(pairs))
    strengths = np.zeros((len(pairs), n_models))
    strengths[rows, pd.Categorical(pairs["model_a"], categories=models).codes] = 1.0
    strengths[rows, pd.Categorical(pairs["model_b"], categories=models).codes] = -1.0
    style = []
    for feature in features:
        a = pairs[f"{feature}_a"].to_numpy(dtype="float64")
        b = pairs[f"{feature}_b"].to_numpy(dtype="float64")
        total = a + b
        difference = np.divide(a - b, total, out=np.zeros_like(total), where=total != 0)
        spread = difference.std()
        style.append(difference / spread if spread > 0 else difference)
    design = np.column_stack([strengths[:, 1:], *style])
    clusters = pd.factorize(pairs["instance"])[0]
    params, covariance = _glm(pairs["outcome"].to_numpy(), design, clusters)

    # Centred log-strengths are a linear map of the fitted ones (reference fixed at 0).
    to_centred = np.eye(n_models)[:, 1:] - 1.0 / n_models
    beta = to_centred @ params[: n_models - 1]
    beta_covariance = to_centred @ covariance[: n_models - 1, : n_models - 1] @ to_centred.T
    z = norm.ppf(0.5 + confidence / 2)
    half = z * np.sqrt(np.clip(np.diag(beta_covariance), 0, None))
    to_elo = ELO_SCALE / np.log(ELO_BASE)
    score = ELO_CENTRE + to_elo * beta
    codes = [
        pd.Categorical(pairs[side], categories=models).codes for side in ("model_a", "model_b")
    ]
    scores = pd.DataFrame(
        {
            "model": models,
            "score": score,
            "ci_low": score - to_elo * half,
            "ci_high": score + to_elo * half,
            "rank": pd.Series(score)
            .rank(ascending=False, method="min", na_option="bottom")
            .to_numpy(),
            "n_battles": sum(np.bincount(c, minlength=n_models) for c in codes),
            "method": f"bradley-terry-style-control, {WALD_METHOD}",
            "resamples": 0,
        }
    )
    scores = scores.sort_values(["rank", "model"]).astype(RANKING_COLUMNS).reset_index(drop=True)
    style_half = z * np.sqrt(np.clip(np.diag(covariance)[n_models - 1 :], 0, None))
    coefficients = pd.DataFrame(
        {
            "feature": list(features),
            "coefficient": params[n_models - 1 :],
            "ci_low": params[n_models - 1 :] - style_half,
            "ci_high": params[n_models - 1 :] + style_half,
            "method": WALD_METHOD,
        }
    )
    return StyleControl(scores, coefficients)
