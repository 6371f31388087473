"""Style-controlled Bradley-Terry scores (after Arena-Hard's style control; its own
covariates, token lengths and normalisation are not these) over battles read a
batch at a time (`stats.battles`).

The fit is the binomial GLM's maximum likelihood by Newton's method, each step's score
vector and information summed over the batches (statsmodels' GLM needs every row at once:
a million prompts' battles with their design would take gigabytes). Its intervals are
`stats.glm_bootstrap`'s one-step clustered bootstrap, the per-cluster Newton sums added a
batch at a time as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy.special import expit

from llm_feedback.core.errors import require_columns
from llm_feedback.stats.battles import Battles
from llm_feedback.stats.glm_bootstrap import (
    DIVERGED,
    MAX_STEPS,
    SINGULAR,
    STEP_TOLERANCE,
    one_step_estimates,
    one_step_method,
    resampled_newton_totals,
)
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    ResampledTotals,
    check_bootstrap,
    cluster_ids,
    percentile_interval,
)
from llm_feedback.stats.length_control import STYLE_FEATURES
from llm_feedback.stats.ranking import (
    ELO_BASE,
    ELO_CENTRE,
    ELO_SCALE,
    ranking_table,
    readable_pairs,
)
from llm_feedback.storage.schema import RANKING_COLUMN_TYPES

STYLE_COEFFICIENT_COLUMNS = ("feature", "coefficient", "ci_low", "ci_high", "method")


class StyleControl(NamedTuple):
    scores: pd.DataFrame  # RANKING_COLUMN_TYPES: the style-controlled Bradley-Terry scores
    coefficients: pd.DataFrame  # STYLE_COEFFICIENT_COLUMNS, one row per feature (NaN if
    # the feature never differs between the two answers of a battle)


def style_controlled_ranking(
    pairs: pd.DataFrame | Battles,
    features: tuple[str, ...] = STYLE_FEATURES,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> StyleControl:
    """Bradley-Terry scores with style covariates, after Arena-Hard's style control.

    The Bradley-Terry design (+1 for A, -1 for B; the first model, alphabetically, as the
    reference) gets one column per feature: the normalised difference (A - B) / (A + B)
    (0 when both are 0), divided by its standard deviation so coefficients are per standard
    deviation. Not centred, so that swapping A and B negates every column and the model
    stays symmetric. Scores are on `bradley_terry`'s Elo-like scale (centred log-
    strengths); a feature's coefficient is the log-odds gained per standard deviation of
    its normalised difference. Intervals: clustered bootstrap by instance (`n_resamples`,
    `seed`; one-step estimates, `stats.glm_bootstrap`), the same resamples as
    `bradley_terry`'s.

    Args:
        pairs: the battles, with each feature as `<feature>_a` / `<feature>_b`.
        features: the style features controlled for.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The scores with their intervals and each feature's coefficient.
    """
    check_bootstrap(n_resamples, confidence)
    battles = Battles.of(pairs)
    columns = [f"{feature}_{side}" for feature in features for side in ("a", "b")]
    require_columns(battles, [*columns, "instance", "model_a", "model_b", "outcome"], "pairs")
    models = battles.models()
    if not models:
        empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in RANKING_COLUMN_TYPES.items()})
        return StyleControl(empty, pd.DataFrame(columns=list(STYLE_COEFFICIENT_COLUMNS)))
    design = _Design(battles, models, features)
    params = design.fit()
    totals = ResampledTotals(
        n_resamples, seed, design.width + design.width * (design.width + 1) // 2
    )
    for outcome, rows, ids in design.batches():
        resampled_newton_totals(
            outcome, rows, np.nan_to_num(params), ids, n_resamples=n_resamples, totals=totals
        )
    replicates = one_step_estimates(params, totals.totals)
    n_models = len(models)
    # Centred log-strengths are a linear map of the fitted ones (reference fixed at 0).
    to_centred = np.eye(n_models)[:, 1:] - 1.0 / n_models
    to_elo = ELO_SCALE / np.log(ELO_BASE)
    score = ELO_CENTRE + to_elo * (to_centred @ params[: n_models - 1])
    low, high = percentile_interval(
        ELO_CENTRE + to_elo * replicates[:, : n_models - 1] @ to_centred.T, confidence
    )
    method = one_step_method(n_resamples)
    scores = ranking_table(
        models,
        score,
        (low, high),
        np.array([design.battles_of[model] for model in models]),
        method=f"bradley-terry-style-control, {method}",
        n_resamples=n_resamples,
    )
    coefficients = pd.DataFrame(
        {"feature": list(features), "coefficient": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    )
    if design.spreads:
        fitted = coefficients.index[[feature in design.spreads for feature in features]]
        style_low, style_high = percentile_interval(replicates[:, n_models - 1 :], confidence)
        coefficients.loc[fitted, "coefficient"] = params[n_models - 1 :]
        coefficients.loc[fitted, "ci_low"], coefficients.loc[fitted, "ci_high"] = (
            style_low,
            style_high,
        )
    coefficients["method"] = method
    return StyleControl(scores, coefficients)


class _Design:
    """The style-control design of the battles, a batch at a time: a first pass counts
    each model's battles and each feature's spread (a feature that never differs, e.g. no
    Markdown in any answer, is not identified and left out)."""

    def __init__(self, battles: Battles, models: list[str], features: tuple[str, ...]):
        self.battles, self.features = battles, features
        self.code = {model: i for i, model in enumerate(models)}
        self.battles_of = dict.fromkeys(models, 0)
        moments = {feature: np.zeros(3) for feature in features}
        self.rows = 0
        for rows in battles.batches():
            batch = readable_pairs(rows)
            self.rows += len(batch)
            for side in ("model_a", "model_b"):
                for model, count in batch[side].value_counts().items():
                    self.battles_of[model] += int(count)
            for feature in features:
                difference = _difference(batch, feature)
                moments[feature] += [len(difference), difference.sum(), (difference**2).sum()]
        self.spreads = {}
        for feature, (n, total, squares) in moments.items():
            spread = np.sqrt(max(squares / n - (total / n) ** 2, 0.0)) if n else 0.0
            if spread > 1e-12:
                self.spreads[feature] = spread
        self.width = len(models) - 1 + len(self.spreads)

    def batches(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(outcome, design rows, cluster ids) of each batch."""
        for rows in self.battles.batches():
            batch = readable_pairs(rows)
            if batch.empty:
                continue
            n_models = len(self.code)
            strengths = np.zeros((len(batch), n_models))
            index = np.arange(len(batch))
            strengths[index, batch["model_a"].map(self.code).to_numpy()] = 1.0
            strengths[index, batch["model_b"].map(self.code).to_numpy()] = -1.0
            style = [_difference(batch, f) / spread for f, spread in self.spreads.items()]
            design = np.column_stack([strengths[:, 1:], *style])
            yield batch["outcome"].to_numpy(), design, cluster_ids(batch["instance"])

    def fit(self) -> np.ndarray:
        """The maximum-likelihood coefficients by Newton's method; NaN where there are no
        more battles than coefficients, the information is singular (a feature that only
        ever tells the models apart) or the fit diverges (separation)."""
        params = np.zeros(self.width)
        if self.rows <= self.width:
            return np.full(self.width, np.nan)
        for _ in range(MAX_STEPS):
            score, information = np.zeros(self.width), np.zeros((self.width, self.width))
            for outcome, design, _ in self.batches():
                p = expit(design @ params)
                score += design.T @ (outcome - p)
                information += (design * (p * (1 - p))[:, None]).T @ design
            if np.linalg.cond(information) > SINGULAR:
                return np.full(self.width, np.nan)
            step = np.linalg.solve(information, score)
            params = params + step
            if np.abs(params).max() > DIVERGED:
                return np.full(self.width, np.nan)
            if np.abs(step).max() < STEP_TOLERANCE:
                return params
        return np.full(self.width, np.nan)


def _difference(batch: pd.DataFrame, feature: str) -> np.ndarray:
    a = batch[f"{feature}_a"].to_numpy(dtype="float64")
    b = batch[f"{feature}_b"].to_numpy(dtype="float64")
    total = a + b
    return np.divide(a - b, total, out=np.zeros_like(total), where=total != 0)
