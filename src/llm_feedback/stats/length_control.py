"""Length-controlled win rates (AlpacaEval 2), fitted with statsmodels' binomial GLM, and
the style features that `stats.style_control` controls for.

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

import numpy as np
import pandas as pd
from scipy.special import expit

from llm_feedback.errors import require_columns
from llm_feedback.stats.battles import Battles
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
    cluster_ids,
    percentile_interval,
)
from llm_feedback.stats.ranking import (
    PAIRWISE_COLUMNS,
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
    pairs: pd.DataFrame | Battles,
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
    require_columns(Battles.of(pairs), ["length_a", "length_b"], "pairs")
    pairs = check_pairs(
        Battles.of(pairs).involving(baseline, [*PAIRWISE_COLUMNS, "length_a", "length_b"])
    )
    raw = win_rates(pairs, baseline, n_resamples=n_resamples, seed=seed, confidence=confidence)
    if raw.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in LC_COLUMNS.items()})
    oriented = oriented_against(pairs, baseline)
    length_a = pairs["length_a"].to_numpy(dtype="float64")[oriented["row"]]
    length_b = pairs["length_b"].to_numpy(dtype="float64")[oriented["row"]]
    model_is_a = pairs["model_a"].to_numpy()[oriented["row"]] == oriented["model"].to_numpy()
    oriented["length_difference"] = np.where(model_is_a, length_a - length_b, length_b - length_a)
    # The instances' ids, as `win_rates` weighs them: both draw the same resamples.
    oriented["cluster"] = cluster_ids(oriented["instance"])

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
