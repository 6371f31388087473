"""Model comparison from pairwise outcomes: win/tie/loss against a baseline and a
Bradley-Terry ranking, each with a clustered bootstrap interval.

Pairwise input (`pairs`): one row per judged battle, columns
  instance: the resampling unit (prompt or question id): every battle of an instance, in
    either order, enters a bootstrap resample together;
  model_a, model_b: the two models compared;
  outcome: model_a's result, 1 (A won), 0.5 (tie), 0 (B won); any number in [0, 1] (a
    probability-weighted verdict) is accepted. A missing or non-numeric outcome (a verdict
    the judge did not give) makes the battle `unreadable`: it is left out of every figure
    and counted (`n_unreadable` beside the Bradley-Terry scores), never refused.
A tie counts half a win for each side, in the win rates (win_rate = (wins + ties / 2) /
battles) and in the Bradley-Terry fit (half an observation A-beats-B, half B-beats-A).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from llm_feedback.core.errors import InputError, require_columns
from llm_feedback.stats.battles import Battles
from llm_feedback.stats.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    GroupedMeans,
    ResampledTotals,
    bootstrap_method,
    check_bootstrap,
    cluster_ids,
    percentile_interval,
)
from llm_feedback.storage.schema import RANKING_COLUMN_TYPES

PAIRWISE_COLUMNS = ("instance", "model_a", "model_b", "outcome")
# Elo-like scale, as Chatbot Arena and Arena-Hard publish: 400 points for a factor of 10 in
# the odds, centred on 1000 for the mean model.
ELO_SCALE, ELO_BASE, ELO_CENTRE = 400.0, 10.0, 1000.0

WIN_RATE_COLUMNS = {
    "model": "str",
    "baseline": "str",
    "n_battles": "int64",
    "wins": "int64",
    "ties": "int64",
    "losses": "int64",
    "win_rate": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "method": "str",
}


# The status of a battle in `check_pairs`: its outcome read, or none to read.
READ, UNREADABLE = "ok", "unreadable"


def check_pairs(pairs: pd.DataFrame, dataset: str = "pairs") -> pd.DataFrame:
    """The pairwise table with its outcome as float and a status per row: `ok`, or
    `unreadable` where the outcome is missing or no number (NaN then); self-battles and
    numbers outside [0, 1] are refused by row.

    Args:
        pairs: battles in the layout of this module (`PAIRWISE_COLUMNS`).
        dataset: the table's name in an error message.

    Returns:
        `pairs` with `outcome` as float64 and a `status` column.
    """
    require_columns(pairs, PAIRWISE_COLUMNS, dataset)
    outcome = pd.to_numeric(pairs["outcome"], errors="coerce").to_numpy(
        dtype="float64", na_value=np.nan
    )
    readable = ~np.isnan(outcome)
    bad = np.flatnonzero(readable & ~((outcome >= 0) & (outcome <= 1)))
    if len(bad):
        raise InputError(
            f"{dataset}: row {bad[0]} has outcome {outcome[bad[0]]:g}; "
            "expected 1 (A won), 0.5 (tie) or 0 (B won)"
        )
    same = np.flatnonzero(pairs["model_a"].to_numpy() == pairs["model_b"].to_numpy())
    if len(same):
        raise InputError(
            f"{dataset}: row {same[0]} compares {pairs['model_a'].iloc[same[0]]!r} with itself"
        )
    return pairs.assign(outcome=outcome, status=np.where(readable, READ, UNREADABLE))


def readable_pairs(pairs: pd.DataFrame, dataset: str = "pairs") -> pd.DataFrame:
    """The battles of `check_pairs` with an outcome, renumbered from 0: what every figure
    is computed from.

    Args:
        pairs: battles in the layout of this module.
        dataset: the table's name in an error message.

    Returns:
        The readable rows, `outcome` as float64.
    """
    checked = check_pairs(pairs, dataset)
    return checked[checked["status"] == READ].reset_index(drop=True)


def win_rates(
    pairs: pd.DataFrame | Battles,
    baseline: str,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Each model's wins, ties and losses against `baseline` (battles with other opponents
    are left out) and its win rate (ties half) with a clustered bootstrap interval, the
    battles read a batch at a time.

    Columns: model, baseline, n_battles, wins, ties, losses, win_rate, ci_low, ci_high,
    method. One row per model that met the baseline, sorted by model.

    Args:
        pairs: the battles, or a `Battles`.
        baseline: the baseline model.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The table (columns above).
    """
    means = GroupedMeans(
        "score", "instance", ["model"], n_resamples=n_resamples, seed=seed, confidence=confidence
    )
    counts = None
    for oriented in oriented_batches(pairs, baseline):
        means.add(oriented)
        score = oriented["score"]
        tally = (
            oriented.assign(wins=score == 1, ties=(score > 0) & (score < 1), losses=score == 0)
            .groupby("model")[["wins", "ties", "losses"]]
            .sum()
        )
        counts = tally if counts is None else counts.add(tally, fill_value=0)
    if counts is None:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in WIN_RATE_COLUMNS.items()})
    table = (
        means.result()
        .rename(columns={"n": "n_battles", "estimate": "win_rate"})
        .merge(counts, left_on="model", right_index=True)
    )
    table["baseline"] = baseline
    return table.loc[:, list(WIN_RATE_COLUMNS)].astype(WIN_RATE_COLUMNS).reset_index(drop=True)


def oriented_batches(
    pairs: pd.DataFrame | Battles, baseline: str, differences: Sequence[str] = ()
) -> Iterator[pd.DataFrame]:
    """The battles against `baseline` a batch at a time, each as `oriented_against` sees
    them, with per name c of `differences` a column `c_difference`: the model's `c_a` or
    `c_b` less the baseline's.

    Args:
        pairs: the battles, or a `Battles`.
        baseline: the baseline model.
        differences: columns whose model-minus-baseline difference to add.

    Returns:
        The oriented battles, a batch at a time.
    """
    for rows in Battles.of(pairs).batches():
        batch = readable_pairs(rows)
        oriented = oriented_against(batch, baseline)
        if oriented.empty:
            continue
        row = oriented["row"].to_numpy()
        model_is_a = batch["model_a"].to_numpy()[row] == oriented["model"].to_numpy()
        for name in differences:
            side_a = batch[f"{name}_a"].to_numpy(dtype="float64")[row]
            side_b = batch[f"{name}_b"].to_numpy(dtype="float64")[row]
            oriented[f"{name}_difference"] = np.where(model_is_a, side_a - side_b, side_b - side_a)
        yield oriented


def oriented_against(pairs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Battles against `baseline` seen from the other model: instance, model, score (the
    model's outcome, 1 win, 0.5 tie, 0 loss) and the row's position in `pairs` (`row`).

    Args:
        pairs: the battles.
        baseline: the baseline model.

    Returns:
        The oriented battles.
    """
    as_a = pairs["model_b"].to_numpy() == baseline
    as_b = pairs["model_a"].to_numpy() == baseline
    outcome = pairs["outcome"].to_numpy(dtype="float64")
    rows = np.flatnonzero(as_a | as_b)
    return pd.DataFrame(
        {
            "instance": pairs["instance"].to_numpy()[rows],
            "model": np.where(as_a, pairs["model_a"], pairs["model_b"])[rows],
            "score": np.where(as_a, outcome, 1 - outcome)[rows],
            "row": rows,
        }
    )


def bradley_terry(
    pairs: pd.DataFrame | Battles,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Bradley-Terry ranking of every model in `pairs` by maximum likelihood, with a
    clustered bootstrap percentile interval on each score.

    P(A beats B) = 1 / (1 + 10 ** ((score_B - score_A) / 400)): scores are on the Elo-like
    scale (log-strength beta as 1000 + 400 * beta / ln 10, the betas centred on their mean,
    so 1000 is the average model and a 400-point gap is 10:1 odds). Fitted as a logistic
    regression without penalty on the +1 (A) / -1 (B) design, a battle contributing
    weight `outcome` to "A won" and 1 - outcome to "B won" (ties half each way). Battles
    are aggregated per ordered model pair (a batch at a time, `stats.battles`), so each
    bootstrap fit has at most n_models * (n_models - 1) * 2 rows whatever the number of
    battles. A model that wins
    (or loses) every battle of a resample has no finite MLE: its fit stops at lbfgs'
    iteration limit and its interval reaches far out, which says as much.

    Columns: model, score, ci_low, ci_high, rank (1 = highest score), n_battles, method,
    resamples (`RANKING_COLUMN_TYPES`), and n_unreadable: the model's battles left out for want
    of an outcome (`check_pairs`; a model with none readable has no row).

    Args:
        pairs: the battles, or a `Battles`.
        n_resamples: bootstrap resamples of each interval.
        seed: the bootstrap's seed.
        confidence: the intervals' confidence level.

    Returns:
        The ranking (columns above).
    """
    check_bootstrap(n_resamples, confidence)
    matchups: dict[tuple[str, str], int] = {}  # (model_a, model_b) -> its column pair
    won_lost, battles_of = np.zeros(0), pd.Series(dtype="int64")
    unreadable_of = pd.Series(dtype="int64")
    totals = ResampledTotals(n_resamples, seed)
    for rows in Battles.of(pairs).batches():
        checked = check_pairs(rows)
        unread = checked[checked["status"] == UNREADABLE]
        sides = pd.concat([unread["model_a"], unread["model_b"]]).value_counts()
        unreadable_of = unreadable_of.add(sides, fill_value=0)
        batch = checked[checked["status"] == READ].reset_index(drop=True)
        if batch.empty:
            continue
        keys = list(zip(batch["model_a"], batch["model_b"], strict=True))
        for key in dict.fromkeys(keys):
            matchups.setdefault(key, len(matchups))
        column = np.array([matchups[key] for key in keys])
        codes, instances = pd.factorize(batch["instance"])
        width = 2 * len(matchups)
        outcome = batch["outcome"].to_numpy()
        # Per instance and model pair: the weight of "A won" and of "B won".
        cell = codes * width + 2 * column
        size = len(instances) * width
        sums = (
            np.bincount(cell, outcome, size) + np.bincount(cell + 1, 1 - outcome, size)
        ).reshape(len(instances), width)
        totals.add(cluster_ids(instances), sums)
        grown = np.zeros(width)
        grown[: len(won_lost)] = won_lost
        won_lost = grown + sums.sum(axis=0)
        sides = pd.concat([batch["model_a"], batch["model_b"]]).value_counts()
        battles_of = battles_of.add(sides, fill_value=0)
    if not matchups:
        empty = pd.DataFrame({c: pd.Series(dtype=t) for c, t in RANKING_COLUMN_TYPES.items()})
        return empty.assign(n_unreadable=pd.Series(dtype="int64"))
    models = sorted(battles_of.index)
    code = {model: i for i, model in enumerate(models)}
    design = np.zeros((len(matchups), len(models)))
    for (model_a, model_b), j in matchups.items():
        design[j, code[model_a]], design[j, code[model_b]] = 1.0, -1.0

    beta = _fit_strengths(design, won_lost[0::2], won_lost[1::2])
    resampled = totals.totals
    # One BLAS thread: a fit of a few dozen rows is ~10x slower when BLAS spins up threads.
    with threadpool_limits(limits=1):
        replicates = [_fit_strengths(design, row[0::2], row[1::2]) for row in resampled]
    low, high = percentile_interval(_to_elo(np.vstack(replicates)), confidence)
    score = _to_elo(beta)
    table = ranking_table(
        models,
        score,
        (low, high),
        battles_of.reindex(models).to_numpy(dtype="int64"),
        method=f"bradley-terry-mle, {bootstrap_method(n_resamples)}",
        n_resamples=n_resamples,
    )
    unreadable = table["model"].map(unreadable_of).fillna(0)
    return table.assign(n_unreadable=unreadable.astype("int64"))


def ranking_table(
    models: list[str],
    score: np.ndarray,
    interval: tuple[np.ndarray, np.ndarray],
    n_battles: np.ndarray,
    *,
    method: str,
    n_resamples: int,
) -> pd.DataFrame:
    """`RANKING_COLUMN_TYPES` of scored models, best first (rank 1 = the highest score, ties
    sharing the better rank; an undefined score ranks last).

    Args:
        models: the models' names.
        score: their scores.
        interval: (lows, highs) of their scores.
        n_battles: their battles.
        method: the interval's method label.
        n_resamples: the bootstrap's resamples.

    Returns:
        The ranking, best first.
    """
    table = pd.DataFrame(
        {
            "model": models,
            "score": score,
            "ci_low": interval[0],
            "ci_high": interval[1],
            "rank": pd.Series(score)
            .rank(ascending=False, method="min", na_option="bottom")
            .to_numpy(),
            "n_battles": n_battles,
            "method": method,
            "resamples": n_resamples,
        }
    )
    return table.sort_values(["rank", "model"]).astype(RANKING_COLUMN_TYPES).reset_index(drop=True)


def _fit_strengths(design: np.ndarray, won: np.ndarray, lost: np.ndarray) -> np.ndarray:
    """Centred log-strengths from aggregated battles: logistic regression of "A won" on the
    +1/-1 design, each model pair once as a win row (weight `won`) and once as a loss row."""
    weights = np.concatenate([won, lost])
    keep = weights > 0
    if not keep.any():  # a resample that weighs no battle: nothing to fit
        return np.full(design.shape[1], np.nan)
    features = np.vstack([design, design])[keep]
    labels = np.concatenate([np.ones(len(won)), np.zeros(len(lost))])[keep]
    if len(np.unique(labels)) < 2:  # one class only: no fit, every strength undefined
        return np.full(design.shape[1], np.nan)
    # C=inf: no penalty (scikit-learn's spelling since 1.8). lbfgs started at 0 never leaves
    # the sum-to-zero subspace (each design row sums to 0), so the fit is identified.
    model = LogisticRegression(C=np.inf, fit_intercept=False, max_iter=1000, tol=1e-8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # separation: see bradley_terry
        model.fit(features, labels, sample_weight=weights[keep])
    beta = model.coef_[0]
    return beta - beta.mean()


def _to_elo(beta: np.ndarray) -> np.ndarray:
    return ELO_CENTRE + ELO_SCALE * beta / np.log(ELO_BASE)
