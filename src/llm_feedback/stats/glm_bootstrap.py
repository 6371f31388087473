"""Logistic (binomial GLM) fits and their clustered bootstrap, as the length-controlled win
rates and the style-controlled ranking use them.

The fits are Newton's method with each step's sums added a batch of battles at a time
(statsmodels' GLM needs every row at once: a million prompts' battles would take
gigabytes); their stopping rules are here. Refitting per resample is too slow at our
scale (a 64k-row fit takes ~0.13 s, so 1,000 resamples of three models ~7 minutes), so
each resample's estimate is the one-step bootstrap of Moulton and Zeger (1991; Davison
and Hinkley 1997, section 7.2): one Newton step from the full-sample estimate under the
resample's weights,

    beta_r = beta + I_r(beta)^-1 U_r(beta),

with U_r and I_r the score vector and the information of the resample. Both are sums over
rows, hence over clusters, so every resample's are a matrix product of the per-cluster
sums with the resample weights (`resampled_newton_totals`): the same resamples,
with the instance as the unit, as every other interval. It differs from a full refit by
O(1/n), against an interval width of O(1/sqrt(n)) (checked in tests/stats).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from llm_feedback.stats.intervals import ResampledTotals, bootstrap_method

# Newton's method: steps until the largest is below STEP_TOLERANCE; a fit that has not
# converged by MAX_STEPS, or whose log-odds pass DIVERGED (odds of e^30), is separated
# (a model winning every battle) and has no finite MLE; an information matrix whose
# condition number passes SINGULAR is not inverted.
STEP_TOLERANCE, MAX_STEPS, DIVERGED, SINGULAR = 1e-10, 100, 30.0, 1e12


def one_step_method(n_resamples: int) -> str:
    """The `method` label of a one-step clustered bootstrap of a fit.

    Args:
        n_resamples: the bootstrap's resamples.

    Returns:
        The label.
    """
    return f"{bootstrap_method(n_resamples)}-one-step"


def newton_cluster_sums(
    response: np.ndarray,
    design: np.ndarray,
    params: np.ndarray,
    cluster_codes: np.ndarray,
    n_clusters: int,
) -> np.ndarray:
    """(n_clusters, k + k (k + 1) / 2) per-cluster sums of each row's score x (y - p) and
    of the upper triangle of its information p (1 - p) x x' at `params`: what
    `one_step_estimates` needs, for any resample, after a product with its counts. Summed
    a column at a time, so that memory stays that of one column of rows.

    Args:
        response: each row's response.
        design: the design matrix (rows x k).
        params: the full-sample fit.
        cluster_codes: each row's cluster, 0 to n_clusters - 1.
        n_clusters: how many clusters.

    Returns:
        The per-cluster sums.
    """
    k = design.shape[1]
    p = expit(design @ params)
    residual, curvature = response - p, p * (1 - p)
    rows, columns = np.triu_indices(k)
    values = [design[:, i] * residual for i in range(k)]
    values += [design[:, i] * design[:, j] * curvature for i, j in zip(rows, columns, strict=True)]
    return np.column_stack(
        [np.bincount(cluster_codes, weights=v, minlength=n_clusters) for v in values]
    )


# Rows whose Newton sums are made at once: the sums of a million clusters would otherwise
# be held whole (a style-control fit has ~230 of them per cluster).
NEWTON_BLOCK_ROWS = 65_536


def resampled_newton_totals(
    response: np.ndarray,
    design: np.ndarray,
    params: np.ndarray,
    cluster: np.ndarray,
    *,
    n_resamples: int,
    seed: int | np.random.Generator = 0,
    totals: ResampledTotals | None = None,
) -> np.ndarray:
    """Each resample's totals of `newton_cluster_sums` (`cluster`: each row's cluster id,
    `intervals.cluster_ids`), made a block of rows at a time: the per-cluster sums are
    never held for all clusters at once. `totals`: an accumulator to add these rows to
    (a fit whose rows come a batch at a time), returned as it stands.

    Args:
        response: each row's response.
        design: the design matrix (rows x k).
        params: the full-sample fit.
        cluster: each row's cluster id.
        n_resamples: how many resamples.
        seed: the resampling seed, or a generator.
        totals: an accumulator to add to (None: a new one).

    Returns:
        (n_resamples, k + k (k + 1) / 2) totals.
    """
    k = design.shape[1]
    totals = totals or ResampledTotals(n_resamples, seed, k + k * (k + 1) // 2)
    for start in range(0, len(response), NEWTON_BLOCK_ROWS):
        block = slice(start, start + NEWTON_BLOCK_ROWS)
        local, clusters = pd.factorize(cluster[block])
        sums = newton_cluster_sums(response[block], design[block], params, local, len(clusters))
        totals.add(np.asarray(clusters, dtype="uint64"), sums)
    return totals.totals


def one_step_estimates(params: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """(n_resamples, k) one-step estimates from the resampled totals of
    `newton_cluster_sums`; NaN where a resample's information is singular (e.g. no row
    of a model drawn) or the full-sample fit is undefined.

    Args:
        params: the full-sample fit.
        totals: the resampled totals.

    Returns:
        The estimates, one row per resample.
    """
    k = len(params)
    estimates = np.full((len(totals), k), np.nan)
    if np.isnan(params).any():
        return estimates
    score = totals[:, :k]
    rows, columns = np.triu_indices(k)
    information = np.empty((len(totals), k, k))
    information[:, rows, columns] = information[:, columns, rows] = totals[:, k:]
    scale = np.abs(information).max(axis=(1, 2))
    # A well-conditioned information matrix is inverted; the rest stay NaN.
    with np.errstate(divide="ignore", invalid="ignore"):
        usable = (scale > 0) & (np.linalg.cond(information) < SINGULAR)
    if usable.any():
        steps = np.linalg.solve(information[usable], score[usable][:, :, None])[:, :, 0]
        estimates[usable] = params + steps
    return estimates
