"""Length-controlled win rates in the form of AlpacaEval's `length_controlled_minimal`,
fitted by unpenalised maximum likelihood (Newton's method, a batch at a time) with
clustered bootstrap intervals, and the style features that `stats.style_control` controls
for. Not AlpacaEval 2's leaderboard figure (`length_controlled_v1`) nor fitted as AlpacaEval
fits it (L1-penalised, cross-validated): `stats.alpaca_eval` gives those, under its names.

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
from collections.abc import Iterator

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
    newton_cluster_sums,
    one_step_estimates,
    one_step_method,
)
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    ResampledTotals,
    check_bootstrap,
    cluster_ids,
    percentile_interval,
)
from llm_feedback.stats.ranking import oriented_batches, win_rates
from llm_feedback.storage.schema import LENGTH_CONTROLLED_COLUMN_TYPES

STYLE_FEATURES = ("length", "headers", "bold", "list_items")


def length_controlled_win_rates(
    pairs: pd.DataFrame | Battles,
    baseline: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    raw: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Raw and length-controlled win rate of each model against `baseline`; `raw`: the
    `ranking.win_rates` of the same battles and bootstrap, when the caller has them (they
    are not made again).

    The form of AlpacaEval's `length_controlled_minimal`: per model, a logistic regression
    (binomial GLM, the outcome 0 / 0.5 / 1 as a fractional response, i.e. ties half) of
    the model's preference over the baseline on a model term and tanh(d / sd(d)), d the
    length difference (model - baseline) and sd its standard deviation over that model's
    battles, fitted by maximum likelihood without penalty (so a model whose outcomes
    separate has no finite fit: NaN; AlpacaEval's L1-penalised fit, `stats.alpaca_eval`,
    stays finite). The LC win rate is
    the preference predicted with the length term at zero (equal lengths): expit(model
    term). length_coefficient is the length term's coefficient (log-odds per unit of the
    squashed difference): how much length explained. No instruction-difficulty term (see
    `stats.alpaca_eval.length_controlled` for AlpacaEval's `length_controlled_noreg`).

    The battles are read a batch at a time (`stats.battles`): the fits are Newton's method
    with each step's sums added over the batches (`_LengthFits`). Every interval is a
    clustered bootstrap (`n_resamples`, `seed`) over the instances that met the baseline,
    the raw and the controlled figures from the same resamples; the fits' replicates are
    one-step estimates (`stats.glm_bootstrap`).

    Columns: model, baseline, n_battles, win_rate, win_rate_ci_low, win_rate_ci_high,
    win_rate_method, lc_win_rate, lc_win_rate_ci_low, lc_win_rate_ci_high, length_coefficient,
    length_coefficient_ci_low, length_coefficient_ci_high, lc_method.

    Args:
        pairs: the battles, with `length_a` / `length_b`, or a `Battles`.
        baseline: the baseline model.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.
        raw: `ranking.win_rates` of the same battles and bootstrap, if made.

    Returns:
        One row per model that met the baseline (columns above).
    """
    check_bootstrap(n_resamples, confidence)
    battles = Battles.of(pairs)
    require_columns(battles, ["length_a", "length_b"], "pairs")
    if raw is None:
        raw = win_rates(
            battles, baseline, n_resamples=n_resamples, seed=seed, confidence=confidence
        )
    if raw.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype=t) for c, t in LENGTH_CONTROLLED_COLUMN_TYPES.items()}
        )
    fits = _LengthFits(battles, baseline, list(raw["model"]))
    params = fits.fit()
    replicates = fits.one_step_replicates(params, n_resamples, seed)
    rows = []
    for i, model in enumerate(fits.models):
        width = fits.widths[i]
        low, high = percentile_interval(replicates[i], confidence)
        has_length = width == 2
        rows.append(
            {
                "model": model,
                "lc_win_rate": expit(params[i][0]),
                "lc_win_rate_ci_low": expit(low[0]),
                "lc_win_rate_ci_high": expit(high[0]),
                "length_coefficient": params[i][1] if has_length else np.nan,
                "length_coefficient_ci_low": low[1] if has_length else np.nan,
                "length_coefficient_ci_high": high[1] if has_length else np.nan,
                "lc_method": one_step_method(n_resamples),
            }
        )
    table = raw.rename(columns={"ci_low": "win_rate_ci_low", "ci_high": "win_rate_ci_high"}).rename(
        columns={"method": "win_rate_method"}
    )
    return (
        table.merge(pd.DataFrame(rows), on="model")
        .loc[:, list(LENGTH_CONTROLLED_COLUMN_TYPES)]
        .astype(LENGTH_CONTROLLED_COLUMN_TYPES)
    )


class _LengthFits:
    """Every model's length-control fit against the baseline, over the battles a batch at a
    time. A first pass takes each model's spread of length differences (about its first
    difference, so that equal differences give exactly 0: without length variation the
    length term is not identified and left out)."""

    def __init__(self, battles: Battles, baseline: str, models: list[str]) -> None:
        self.battles, self.baseline, self.models = battles, baseline, models
        self.code = {model: i for i, model in enumerate(models)}
        count, shift, total, squares = (np.zeros(len(models)) for _ in range(4))
        shifted = np.zeros(len(models), dtype=bool)
        for codes, _, difference, _ in self._batches():
            first = pd.Series(difference).groupby(codes).first()
            fresh = first.index[~shifted[first.index]]
            shift[fresh], shifted[fresh] = first.loc[fresh].to_numpy(), True
            centred = difference - shift[codes]
            count += np.bincount(codes, minlength=len(models))
            total += np.bincount(codes, centred, len(models))
            squares += np.bincount(codes, centred**2, len(models))
        mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
        variance = np.divide(squares, count, out=np.zeros_like(total), where=count > 0) - mean**2
        self.spread = np.sqrt(np.maximum(variance, 0.0))
        self.widths = np.where(self.spread > 0, 2, 1)
        self.count = count

    def _batches(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, pd.Series]]:
        """(model codes, score, length difference, instance) of each batch's battles
        against the baseline."""
        for oriented in oriented_batches(self.battles, self.baseline, ["length"]):
            codes = oriented["model"].map(self.code).to_numpy()
            score = oriented["score"].to_numpy()
            yield codes, score, oriented["length_difference"].to_numpy(), oriented["instance"]

    def _squashed(self, codes: np.ndarray, difference: np.ndarray) -> np.ndarray:
        """tanh(difference / the model's spread); 0 for a model without spread."""
        spread = self.spread[codes]
        safe = np.where(spread > 0, spread, 1.0)
        return np.where(spread > 0, np.tanh(difference / safe), 0.0)

    def fit(self) -> np.ndarray:
        """(models, 2) maximum-likelihood coefficients by Newton's method, every model's
        step taken in the same pass; a model's row is NaN where it has no more battles
        than coefficients, its information is singular or its fit diverges (a model
        winning every battle has no finite MLE). Written by hand: statsmodels' GLM needs
        every row at once."""
        n = len(self.models)
        params = np.zeros((n, 2))
        failed = self.count <= self.widths
        done = failed.copy()
        for _ in range(MAX_STEPS):
            gradient, information = self._newton_sums(np.nan_to_num(params))
            for i in np.flatnonzero(~done):
                k = self.widths[i]
                if np.linalg.cond(information[i, :k, :k]) > SINGULAR:
                    failed[i] = done[i] = True
                    continue
                step = np.linalg.solve(information[i, :k, :k], gradient[i, :k])
                params[i, :k] += step
                if np.abs(params[i]).max() > DIVERGED:
                    failed[i] = done[i] = True
                elif np.abs(step).max() < STEP_TOLERANCE:
                    done[i] = True
            if done.all():
                break
        failed |= ~done
        params[failed] = np.nan
        return params

    def _newton_sums(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per model, the score vector (models, 2) and the information (models, 2, 2) at
        `params`, summed over the batches (the second entries 0 for a model without the
        length term)."""
        n = len(self.models)
        gradient, information = np.zeros((n, 2)), np.zeros((n, 2, 2))
        for codes, score, difference, _ in self._batches():
            squashed = self._squashed(codes, difference)
            p = expit(params[codes, 0] + params[codes, 1] * squashed)
            residual, curvature = score - p, p * (1 - p)
            gradient[:, 0] += np.bincount(codes, residual, n)
            gradient[:, 1] += np.bincount(codes, residual * squashed, n)
            cross = np.bincount(codes, curvature * squashed, n)
            information[:, 0, 0] += np.bincount(codes, curvature, n)
            information[:, 0, 1] += cross
            information[:, 1, 0] += cross
            information[:, 1, 1] += np.bincount(codes, curvature * squashed**2, n)
        return gradient, information

    def one_step_replicates(
        self, params: np.ndarray, n_resamples: int, seed: int
    ) -> list[np.ndarray]:
        """Per model, its (n_resamples, width) one-step bootstrap estimates, every model's
        Newton sums weighed by the same resamples of instances in one accumulator."""
        sizes = [k + k * (k + 1) // 2 for k in self.widths]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        totals = ResampledTotals(n_resamples, seed, int(offsets[-1]))
        safe = np.nan_to_num(params)  # an undefined fit: its sums are unused (NaN estimates)
        for codes, score, difference, instance in self._batches():
            local, instances = pd.factorize(instance)
            squashed = self._squashed(codes, difference)
            sums = np.zeros((len(instances), offsets[-1]))
            for i in np.unique(codes):
                mine = codes == i
                k = self.widths[i]
                design = np.column_stack([np.ones(mine.sum()), squashed[mine]])[:, :k]
                sums[:, offsets[i] : offsets[i + 1]] = newton_cluster_sums(
                    score[mine], design, safe[i, :k], local[mine], len(instances)
                )
            totals.add(cluster_ids(pd.Series(instances)), sums)
        return [
            one_step_estimates(
                params[i, : self.widths[i]], totals.totals[:, offsets[i] : offsets[i + 1]]
            )
            for i in range(len(self.models))
        ]


# Markdown elements counted for style control, as Arena-Hard's `utils/add_markdown_info.py`
# counts them (commit 196f6b8): on the text with every fenced code block's content removed
# (a `#` comment in code is no header), each pattern counted on its own.
_FENCED = re.compile(r"```([^`]*)```")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_BOLD = (re.compile(r"\*\*[^*\n]+\*\*"), re.compile(r"__[^_\n]+__"))
_LIST_ITEM = (re.compile(r"^\s*\d+\.\s", re.MULTILINE), re.compile(r"^\s*[-*+]\s", re.MULTILINE))


def without_code(text: str) -> str:
    """`text` with the content of its fenced code blocks taken out (every occurrence of
    it, the fences left: what Arena-Hard counts Markdown on).

    Args:
        text: a Markdown answer.

    Returns:
        The text without its code blocks' content.
    """
    for content in _FENCED.findall(text):
        if content:
            text = text.replace(content, "")
    return text


def markdown_counts(text: str) -> dict[str, int]:
    """Arena-Hard's Markdown counts of one answer: headers (lines of 1-6 `#` then a
    space), bold (`**...**` and `__...__` spans, each kind counted separately) and
    list_items (ordered `1. ` and unordered `- `, `* `, `+ ` lines), code blocks removed
    first (`without_code`).

    Args:
        text: a Markdown answer.

    Returns:
        {headers, bold, list_items}.
    """
    prose = without_code(text)
    return {
        "headers": len(_HEADER.findall(prose)),
        "bold": sum(len(pattern.findall(prose)) for pattern in _BOLD),
        "list_items": sum(len(pattern.findall(prose)) for pattern in _LIST_ITEM),
    }


def style_features(texts: pd.Series) -> pd.DataFrame:
    """Per text: length (characters) and `markdown_counts` (headers, bold, list_items,
    counted as Arena-Hard counts them). A missing text counts 0 everywhere.

    Args:
        texts: the answers.

    Returns:
        One row per text: length and the Markdown counts.
    """
    text = texts.fillna("").astype(str)
    counts = pd.DataFrame(
        [markdown_counts(value) for value in text],
        index=texts.index,
        columns=["headers", "bold", "list_items"],
    )
    return counts.assign(length=text.str.len())[list(STYLE_FEATURES)].astype("float64")
