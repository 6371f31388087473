"""Judge-made means and rates corrected by a human-labelled slice, with honest intervals.

A judge scored every item (N of them); people labelled a slice of n. Three estimates of
what people would say on all N, each a row named by its `estimator`:

- `judge`: the judge's own mean (its interval covers sampling noise only: a judge with a
  bias misses the human value however many items it judges);
- `prediction_powered`: PPI++ (Angelopoulos, Duchi & Zrnic 2023), the judge's mean on all
  items plus its measured error on the labelled slice, power-tuned so that it is never much
  wider than the labels alone (computed by `ppi-python`);
- `labels_only`: the mean of the human labels (the classical interval).

The intervals that labels limit use Student's t with n - 1 degrees of freedom rather than
the normal quantile (a refinement for small slices; the judge-only one stays normal).

The labelled slice must be drawn uniformly at random from the judged items (what these
estimators assume), or, for a review queue ordered by how much a label is worth, drawn
with recorded probabilities (`select_for_labels`), in which case `weighted_estimate`
weights each label by its inverse probability (active statistical inference, Zrnic &
Candès 2024) and stays unbiased. For a binary judge (pass/fail, "output_1 is better"),
`binary_estimates` adds its true positive and true negative rates with Wilson intervals
and the Rogan-Gladen correction of its positive rate.

Items whose judge value or label is missing (an unreadable verdict, a label not given)
are left out of the set they are missing from, and the counts used are in `n_judged` and
`n_labels`. An estimate that cannot be made is a row with a `status` and no value.

`ppi-python` is the `ppi` extra (it brings numba): `pip install -e ".[ppi]"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm, t
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.core.errors import ConfigError

JUDGE, PREDICTION_POWERED, LABELS_ONLY, ROGAN_GLADEN = (
    "judge",
    "prediction_powered",
    "labels_only",
    "rogan_gladen",
)
ESTIMATORS = (JUDGE, PREDICTION_POWERED, LABELS_ONLY, ROGAN_GLADEN)
# How the labelled items were chosen: uniformly at random, or with recorded probabilities.
UNIFORM, WEIGHTED = "uniform", "probability_weighted"
OK = "ok"
COLUMNS = (
    "metric",
    "estimator",
    "selection",
    "estimate",
    "ci_low",
    "ci_high",
    "n_judged",
    "n_labels",
    "status",
)
DEFAULT_CONFIDENCE = 0.95
# The least labels an interval is given from (a standard deviation needs two).
MIN_LABELS = 2
# The share of the label budget spread uniformly by `select_for_labels`: it bounds every
# item's weight, which keeps the weighted estimate's variance in check.
DEFAULT_UNIFORM_SHARE = 0.2


def _ppi() -> Any:
    try:
        import ppi_py
    except ImportError as error:
        raise ConfigError(
            f'prediction-powered estimates need the ppi extra: pip install -e ".[ppi]" ({error})'
        ) from None
    return ppi_py


def _row(metric: str, estimator: str, selection: str, **values: Any) -> dict[str, Any]:
    row = dict.fromkeys(COLUMNS, np.nan)
    row |= {"metric": metric, "estimator": estimator, "selection": selection, "status": OK}
    return row | values


def _floats(values: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype="float64").reshape(-1)


def _z(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must be between 0 and 1, got {confidence}")
    return float(norm.ppf(0.5 + confidence / 2))


def _labels_alpha(confidence: float, n_labels: int) -> float:
    """The normal error level whose interval is Student's t's with n_labels - 1 degrees of
    freedom: the labelled slice limits these intervals, and at 30 labels the normal one
    is 4% too narrow (ppi-python's intervals are normal: they take this level)."""
    return float(2 * norm.sf(t.ppf(0.5 + confidence / 2, n_labels - 1)))


def _normal_row(
    metric: str, estimator: str, selection: str, *, estimate: float, se: float, z: float, **counts
) -> dict[str, Any]:
    return _row(
        metric,
        estimator,
        selection,
        estimate=estimate,
        ci_low=estimate - z * se,
        ci_high=estimate + z * se,
        **counts,
    )


def _labelled_pairs(judge: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(judge) != len(gold):
        raise ConfigError(
            f"labelled judge values and labels differ in length ({len(judge)} and {len(gold)})"
        )
    both = np.isfinite(judge) & np.isfinite(gold)
    return judge[both], gold[both]


def mean_estimates(
    judged: Sequence[float] | np.ndarray,
    labelled_judge: Sequence[float] | np.ndarray,
    labelled_gold: Sequence[float] | np.ndarray,
    *,
    metric: str = "mean",
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """The judge-only, prediction-powered and labels-only estimates of a mean (a rate when
    the values are 0/1) with their intervals.

    Args:
        judged: the judge's value on every item (the labelled ones included).
        labelled_judge: the judge's value on each labelled item.
        labelled_gold: the human label of each labelled item, in the same order.
        metric: the name the rows give the quantity (e.g. "win_rate", "mean_rating").
        confidence: the intervals' coverage.

    Returns:
        One row per estimator (`COLUMNS`).
    """
    z = _z(confidence)
    judged = _floats(judged)
    judged = judged[np.isfinite(judged)]
    yhat, y = _labelled_pairs(_floats(labelled_judge), _floats(labelled_gold))
    n_judged, n = len(judged), len(y)
    counts = {"n_judged": n_judged, "n_labels": n}
    if n_judged >= MIN_LABELS:
        se = judged.std() / np.sqrt(n_judged)
        judge = _normal_row(
            metric,
            JUDGE,
            UNIFORM,
            estimate=judged.mean(),
            se=se,
            z=z,
            n_judged=n_judged,
            n_labels=0,
        )
    else:
        judge = _row(metric, JUDGE, UNIFORM, n_judged=n_judged, n_labels=0, status="no_judgments")
    if n < MIN_LABELS:
        powered = _row(metric, PREDICTION_POWERED, UNIFORM, **counts, status="too_few_labels")
        alone = _row(metric, LABELS_ONLY, UNIFORM, n_judged=0, n_labels=n, status="too_few_labels")
        return pd.DataFrame([judge, powered, alone], columns=list(COLUMNS))
    ppi = _ppi()
    alpha = _labels_alpha(confidence, n)
    low, high = ppi.classical_mean_ci(y, alpha=alpha)
    alone = _row(
        metric,
        LABELS_ONLY,
        UNIFORM,
        estimate=float(y.mean()),
        ci_low=float(low),
        ci_high=float(high),
        n_judged=0,
        n_labels=n,
    )
    if n_judged < MIN_LABELS:
        powered = _row(metric, PREDICTION_POWERED, UNIFORM, **counts, status="no_judgments")
        return pd.DataFrame([judge, powered, alone], columns=list(COLUMNS))
    # lam=None: PPI++'s power tuning (lam=1 is plain PPI, lam=0 the labels alone).
    low, high = ppi.ppi_mean_ci(y, yhat, judged, alpha=alpha)
    estimate = ppi.ppi_mean_pointestimate(y, yhat, judged)
    powered = _row(
        metric,
        PREDICTION_POWERED,
        UNIFORM,
        estimate=float(np.squeeze(estimate)),
        ci_low=float(np.squeeze(low)),
        ci_high=float(np.squeeze(high)),
        **counts,
    )
    return pd.DataFrame([judge, powered, alone], columns=list(COLUMNS))


def _wilson(count: float, total: float, alpha: float) -> tuple[float, float]:
    low, high = proportion_confint(count, total, alpha=alpha, method="wilson")
    return float(low), float(high)


def binary_estimates(
    judged: Sequence[float] | np.ndarray,
    labelled_judge: Sequence[float] | np.ndarray,
    labelled_gold: Sequence[float] | np.ndarray,
    *,
    metric: str = "positive_rate",
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """A binary judge's (0/1 values) positive rate, judge-only, prediction-powered,
    labels-only and Rogan-Gladen-corrected, and its TPR and TNR on the labelled slice.

    The judge-only rate has Wilson's interval; TPR and TNR (metrics `tpr`, `tnr`, estimator
    `labels_only`) have Wilson's intervals; the Rogan-Gladen rate, (q + TNR - 1) /
    (TPR + TNR - 1) with q the judge's rate, has a delta-method interval (written here: no
    library offers one), clipped to [0, 1]; a judge no better than chance (TPR + TNR <= 1)
    gets status `judge_uninformative`.

    Args:
        judged: the judge's 0/1 value on every item (the labelled ones included).
        labelled_judge: the judge's value on each labelled item.
        labelled_gold: the human 0/1 label of each labelled item, in the same order.
        metric: the name the rate rows give the quantity.
        confidence: the intervals' coverage.

    Returns:
        The rate's rows (`mean_estimates`, the judge's interval Wilson's), the Rogan-Gladen
        row, then the `tpr` and `tnr` rows.
    """
    alpha = 1 - confidence
    z = _z(confidence)
    frame = mean_estimates(
        judged, labelled_judge, labelled_gold, metric=metric, confidence=confidence
    )
    all_judged = _floats(judged)
    all_judged = all_judged[np.isfinite(all_judged)]
    yhat, y = _labelled_pairs(_floats(labelled_judge), _floats(labelled_gold))
    values = np.concatenate([all_judged, yhat, y])
    if not np.isin(values, (0.0, 1.0)).all():
        raise ConfigError("binary estimates need 0/1 judge values and labels")
    n_judged = len(all_judged)
    if n_judged:
        judge = frame["estimator"] == JUDGE
        frame.loc[judge, ["ci_low", "ci_high"]] = _wilson(all_judged.sum(), n_judged, alpha)
    positives, negatives = y == 1, y == 0
    rates = []
    for name, mask, hit in (("tpr", positives, 1.0), ("tnr", negatives, 0.0)):
        total = int(mask.sum())
        if total == 0:
            rates.append(
                _row(name, LABELS_ONLY, UNIFORM, n_judged=0, n_labels=0, status="no_labels")
            )
            continue
        count = float((yhat[mask] == hit).sum())
        low, high = _wilson(count, total, alpha)
        rates.append(
            _row(
                name,
                LABELS_ONLY,
                UNIFORM,
                estimate=count / total,
                ci_low=low,
                ci_high=high,
                n_judged=0,
                n_labels=total,
            )
        )
    tpr, tnr = rates[0]["estimate"], rates[1]["estimate"]
    youden = tpr + tnr - 1
    counts = {"n_judged": n_judged, "n_labels": len(y)}
    if not n_judged or not np.isfinite(youden):
        corrected = _row(metric, ROGAN_GLADEN, UNIFORM, **counts, status="too_few_labels")
    elif youden <= 0:
        corrected = _row(metric, ROGAN_GLADEN, UNIFORM, **counts, status="judge_uninformative")
    else:
        q = all_judged.mean()
        rate = (q + tnr - 1) / youden
        variance = (
            q * (1 - q) / n_judged
            + rate**2 * tpr * (1 - tpr) / positives.sum()
            + (1 - rate) ** 2 * tnr * (1 - tnr) / negatives.sum()
        ) / youden**2
        se = float(np.sqrt(variance))
        corrected = _row(
            metric,
            ROGAN_GLADEN,
            UNIFORM,
            estimate=float(np.clip(rate, 0, 1)),
            ci_low=float(np.clip(rate - z * se, 0, 1)),
            ci_high=float(np.clip(rate + z * se, 0, 1)),
            **counts,
        )
    return pd.concat(
        [frame, pd.DataFrame([corrected, *rates], columns=list(COLUMNS))], ignore_index=True
    )


def select_for_labels(
    uncertainty: Sequence[float] | np.ndarray,
    budget: float,
    rng: np.random.Generator,
    *,
    uniform_share: float = DEFAULT_UNIFORM_SHARE,
) -> tuple[np.ndarray, np.ndarray]:
    """Items to label, drawn each with its own probability, higher where the judge is less
    sure, `budget` labels expected (Poisson sampling, as active inference needs).

    Args:
        uncertainty: how unsure the judge is of each item (>= 0; e.g. one minus its
            probability margin, or the spread of its shuffles or panel); a missing value
            counts as the most unsure seen.
        budget: the expected number of labels.
        rng: the random generator the draw is made with.
        uniform_share: the budget's share spread uniformly over all items.

    Returns:
        (selected, probabilities): a boolean mask of the items drawn and every item's
        probability of being drawn (to record beside the labels and weight them by).
    """
    u = _floats(uncertainty)
    n_items = len(u)
    if not 0 < budget <= n_items:
        raise ConfigError(f"label budget must be between 0 and {n_items} items, got {budget}")
    if not 0 <= uniform_share <= 1:
        raise ConfigError(f"uniform_share must be between 0 and 1, got {uniform_share}")
    u = np.where(np.isfinite(u), u, np.nanmax(u) if np.isfinite(u).any() else 1.0)
    if (u < 0).any():
        raise ConfigError("uncertainty must be >= 0")
    shape = u / u.sum() if u.sum() > 0 else np.full(n_items, 1 / n_items)
    probabilities = budget * ((1 - uniform_share) * shape + uniform_share / n_items)
    # Items past certainty are labelled for sure; their excess goes to the others.
    for _ in range(n_items):
        over = probabilities > 1
        if not over.any():
            break
        excess = (probabilities[over] - 1).sum()
        probabilities[over] = 1
        rest = probabilities < 1
        probabilities[rest] += excess * probabilities[rest] / probabilities[rest].sum()
    return rng.random(n_items) < probabilities, probabilities


def weighted_estimate(
    judged: Sequence[float] | np.ndarray,
    gold: Sequence[float] | np.ndarray,
    selected: Sequence[bool] | np.ndarray,
    probabilities: Sequence[float] | np.ndarray,
    *,
    metric: str = "mean",
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """The prediction-powered mean from labels drawn with known probabilities (active
    statistical inference, Zrnic & Candès 2024): each item's judge value plus, where it was
    labelled, its error weighted by one over its probability (Horvitz-Thompson, unbiased),
    power-tuned as PPI++ is. Written here: ppi-python has no estimator for labels drawn with
    unequal probabilities.

    Args:
        judged: the judge's value on every item.
        gold: the human label of every item (NaN where not labelled).
        selected: whether each item was drawn for labelling.
        probabilities: each item's probability of being drawn (as `select_for_labels`
            recorded it).
        metric: the name the row gives the quantity.
        confidence: the interval's coverage.

    Returns:
        One `prediction_powered` row, selection `probability_weighted`; a drawn item left
        unlabelled makes the row's status `labels_missing` (the weights would no longer
        make it unbiased).
    """
    _z(confidence)  # refuses a confidence outside (0, 1) before any work
    f, y = _floats(judged), _floats(gold)
    xi = np.asarray(selected, dtype=bool).reshape(-1)
    pi = _floats(probabilities)
    if not len(f) == len(y) == len(xi) == len(pi):
        raise ConfigError("judged, gold, selected and probabilities differ in length")
    if ((pi <= 0) | (pi > 1))[xi].any():
        raise ConfigError("a drawn item's probability must be in (0, 1]")
    readable = np.isfinite(f)
    f, y, xi, pi = f[readable], y[readable], xi[readable], pi[readable]
    n_labels = int((xi & np.isfinite(y)).sum())
    counts = {"n_judged": len(f), "n_labels": n_labels}
    if (xi & ~np.isfinite(y)).any():
        return pd.DataFrame(
            [_row(metric, PREDICTION_POWERED, WEIGHTED, **counts, status="labels_missing")],
            columns=list(COLUMNS),
        )
    if n_labels < MIN_LABELS:
        return pd.DataFrame(
            [_row(metric, PREDICTION_POWERED, WEIGHTED, **counts, status="too_few_labels")],
            columns=list(COLUMNS),
        )
    weight = np.where(xi, 1 / np.where(xi, pi, 1), 0.0)
    # Z(lam) = lam * judge * (1 - weight) + label * weight; lam minimises its variance.
    tuned = f * (1 - weight)
    labelled = np.where(xi, y, 0.0) * weight
    covariance = np.cov(tuned, labelled)
    spread = covariance[0, 0]
    lam = float(np.clip(-covariance[0, 1] / spread, 0, 1)) if spread > 0 else 1.0
    values = lam * tuned + labelled
    se = values.std(ddof=1) / np.sqrt(len(values))
    z = float(norm.isf(_labels_alpha(confidence, n_labels) / 2))
    row = _normal_row(
        metric, PREDICTION_POWERED, WEIGHTED, estimate=float(values.mean()), se=se, z=z, **counts
    )
    return pd.DataFrame([row], columns=list(COLUMNS))
