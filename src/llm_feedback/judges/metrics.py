"""Judge metrics: pass@k, normalised means, weighted accuracy, pairwise outcomes.

Every function is defined on edge cases: an empty input gives NaN (without numpy's
"mean of empty slice" warning), a zero denominator gives NaN, never ZeroDivisionError.
Bad input (a missing column, a value off the scale) raises `InputError` naming it.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from llm_feedback.core.errors import ConfigError, InputError, require_columns
from llm_feedback.judges.kinds import get_kind, kind_names

logger = logging.getLogger(__name__)

MISSING_POLICIES = ("zero", "exclude")
VERDICTS = ("A", "B", "tie")

PASS_AT_K_COLUMNS = {
    "k": "int64",
    "pass_at_k": "float64",
    "n_instances": "int64",
    "n_instances_too_few": "int64",
    "n_missing": "int64",
}
AGGREGATE_COLUMNS = {
    "n": "int64",
    "n_valid": "int64",
    "n_missing": "int64",
    "mean": "float64",
    "normalised_mean": "float64",
}
WIN_RATE_COLUMNS = {
    "n": "int64",
    "wins": "int64",
    "losses": "int64",
    "ties": "int64",
    "n_missing": "int64",
    "win_rate": "float64",
}


def _require_no_nulls(frame: pd.DataFrame, columns: Iterable[str]) -> None:
    for column in columns:
        nulls = frame.index[frame[column].isna()]
        if len(nulls):
            raise InputError(f"column {column!r} is empty in row {nulls[0]!r}")


def _as_float(values: object, name: str) -> np.ndarray:
    """Numbers (bools, ints, floats, nullable dtypes) as float64 with NaN for missing."""
    try:
        series = values if isinstance(values, pd.Series) else pd.Series(values, dtype="object")
        numbers = pd.to_numeric(series, errors="raise")
        return numbers.to_numpy(dtype="float64", na_value=np.nan)
    except (TypeError, ValueError) as error:
        raise InputError(f"{name} must hold numbers or missing values: {error}") from error


def _check_scale(low: float, high: float) -> None:
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ConfigError(f"a score scale needs finite low < high, got ({low}, {high})")


def _typed(rows: list[dict[str, object]], key: str, schema: dict[str, str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[key, *schema])
    return frame.astype(schema)


# --- pass@k ------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: 1 - C(n-c, k) / C(n, k).

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which never forms the huge binomial
    coefficients. NaN when k > n (the estimator needs at least k samples).

    Args:
        n: the samples.
        c: the correct ones.
        k: the attempts allowed.

    Returns:
        pass@k, or NaN.
    """
    n, c, k = operator.index(n), operator.index(c), operator.index(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if k > n:
        return math.nan
    if n - c < k:  # every draw of k samples holds a correct one
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def _correctness(frame: pd.DataFrame, column: str) -> np.ndarray:
    values = _as_float(frame[column], f"column {column!r}")
    bad = ~np.isnan(values) & ~np.isin(values, (0.0, 1.0))
    if bad.any():
        row = frame.index[np.flatnonzero(bad)[0]]
        raise InputError(f"column {column!r} must be 0/1 or True/False, row {row!r} is not")
    return values


def pass_at_k_table(
    frame: pd.DataFrame,
    instance_col: str,
    correct_col: str,
    ks: Sequence[int] | None = None,
    *,
    model_col: str = "model",
    missing: str = "zero",
) -> pd.DataFrame:
    """pass@k per model over replicated judgments: one row per (model, k).

    Each instance's n is its number of replicate rows, c its number of correct ones. k
    runs over `ks`, by default 1 up to the largest n of the model. An instance with fewer
    than k replicates has no pass@k estimate: it is left out of that k's mean and counted
    in `n_instances_too_few`, next to `n_instances` (those averaged). A missing judgment
    (NaN) counts as incorrect with `missing="zero"` or is dropped with "exclude"; either
    way `n_missing` reports how many there were. Rows judged "invalid" (an unknown
    reference) should be removed before, as they are not replicates.

    Args:
        frame: the replicated judgments.
        instance_col: the column naming each instance.
        correct_col: the 0/1 correctness column.
        ks: the k values (default 1 up to the largest n).
        model_col: the column naming the model.
        missing: "zero" or "exclude" for a missing correctness.

    Returns:
        One row per (model, k).
    """
    if missing not in MISSING_POLICIES:
        raise ConfigError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    if ks is not None and any(operator.index(k) < 1 for k in ks):
        raise ConfigError(f"every k must be >= 1, got {list(ks)}")
    require_columns(frame, (model_col, instance_col, correct_col), "judgments")
    _require_no_nulls(frame, (model_col, instance_col))
    judged = frame[[model_col, instance_col]].copy()
    judged["correct"] = _correctness(frame, correct_col)
    missing_counts = judged["correct"].isna().groupby(judged[model_col], sort=True).sum()
    if missing == "zero":
        judged["correct"] = judged["correct"].fillna(0.0)
    else:
        judged = judged.dropna(subset=["correct"])
    per_instance = judged.groupby([model_col, instance_col], sort=True)["correct"].agg(
        n="count", c="sum"
    )
    rows: list[dict[str, object]] = []
    for model, n_missing in missing_counts.items():
        counts = (
            per_instance.xs(model, level=0)
            if model in per_instance.index.get_level_values(0)
            else per_instance.iloc[:0]
        )
        n_values = counts["n"].to_numpy(dtype=np.int64)
        c_values = counts["c"].to_numpy(dtype=np.int64)
        model_ks = list(ks) if ks is not None else range(1, int(n_values.max(initial=0)) + 1)
        for k in model_ks:
            eligible = n_values >= k
            estimates = [
                pass_at_k(n, c, k)
                for n, c in zip(n_values[eligible], c_values[eligible], strict=True)
            ]
            rows.append(
                {
                    model_col: model,
                    "k": k,
                    "pass_at_k": math.fsum(estimates) / len(estimates) if estimates else math.nan,
                    "n_instances": int(eligible.sum()),
                    "n_instances_too_few": int((~eligible).sum()),
                    "n_missing": int(n_missing),
                }
            )
    return _typed(rows, model_col, PASS_AT_K_COLUMNS)


# --- means and accuracy -----------------------------------------------------------------


def pass_at_k_first_table(
    frame: pd.DataFrame,
    instance_col: str,
    order_col: str,
    correct_col: str,
    ks: Sequence[int] | None = None,
    *,
    model_col: str = "model",
    missing: str = "zero",
) -> pd.DataFrame:
    """pass@k as "solved if any of the first k attempts is correct" (Youtu-agent's), per
    model: one row per (model, k), the columns of `pass_at_k_table`.

    An instance's attempts are its rows in `order_col` order (the replicate). Unlike the
    unbiased estimator, this depends on the order and is not an average over every draw
    of k attempts. An instance with fewer than k attempts is left out of that k (counted
    in `n_instances_too_few`); a missing correctness is a failed attempt with
    `missing="zero"` and no attempt with "exclude", counted in `n_missing` either way.

    Args:
        frame: the replicated judgments.
        instance_col: the column naming each instance.
        order_col: the column ordering each instance's attempts.
        correct_col: the 0/1 correctness column.
        ks: the k values (default 1 up to the largest n).
        model_col: the column naming the model.
        missing: "zero" or "exclude" for a missing correctness.

    Returns:
        One row per (model, k).
    """
    if missing not in MISSING_POLICIES:
        raise ConfigError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    if ks is not None and any(operator.index(k) < 1 for k in ks):
        raise ConfigError(f"every k must be >= 1, got {list(ks)}")
    require_columns(frame, (model_col, instance_col, order_col, correct_col), "judgments")
    attempts = frame[[model_col, instance_col, order_col]].assign(
        correct=_correctness(frame, correct_col)
    )
    attempts = attempts.sort_values([model_col, instance_col, order_col], kind="stable")
    rows: list[dict[str, object]] = []
    for model, model_attempts in attempts.groupby(model_col, sort=True):
        n_missing = int(model_attempts["correct"].isna().sum())
        counted = (
            model_attempts.fillna({"correct": 0.0})
            if missing == "zero"
            else model_attempts.dropna(subset=["correct"])
        )
        histories = [
            group.to_numpy(dtype=bool) for _, group in counted.groupby(instance_col)["correct"]
        ]
        longest = max((len(history) for history in histories), default=0)
        for k in ks if ks is not None else range(1, longest + 1):
            solved = [bool(history[:k].any()) for history in histories if len(history) >= k]
            rows.append(
                {
                    model_col: model,
                    "k": k,
                    "pass_at_k": float(np.mean(solved)) if solved else math.nan,
                    "n_instances": len(solved),
                    "n_instances_too_few": len(histories) - len(solved),
                    "n_missing": n_missing,
                }
            )
    return pd.DataFrame(rows, columns=[model_col, *PASS_AT_K_COLUMNS]).astype(PASS_AT_K_COLUMNS)


def normalised_mean(scores: object, low: float, high: float) -> float:
    """Mean score mapped to 0-100 (low -> 0, high -> 100; x20 on a 0-5 scale).

    Missing values (NaN, None) are ignored; no values left gives NaN.

    Args:
        scores: the scores.
        low: the scale's minimum.
        high: the scale's maximum.

    Returns:
        The mean on 0-100, or NaN.
    """
    _check_scale(low, high)
    values = _as_float(scores, "scores")
    values = values[~np.isnan(values)]
    if values.size == 0:
        return math.nan
    if ((values < low) | (values > high)).any():
        raise InputError(f"scores must lie in [{low}, {high}], got {values.min()}..{values.max()}")
    return float(100.0 * (values.mean() - low) / (high - low))


def weighted_accuracy(correct: object, weights: object) -> float:
    """sum(w * c) / sum(w) over an ensemble of responses with non-negative weights.

    `correct` holds 0/1 (or a fraction per response); a missing correctness drops that
    response and its weight. NaN when nothing is left or the weights sum to zero.

    Args:
        correct: each response's correctness.
        weights: each response's weight.

    Returns:
        The accuracy, or NaN.
    """
    correctness = _as_float(correct, "correct")
    weight = _as_float(weights, "weights")
    if correctness.shape != weight.shape:
        raise InputError(
            f"correct and weights differ in length: {correctness.size} != {weight.size}"
        )
    if np.isnan(weight).any() or (weight < 0).any():
        raise InputError("weights must be non-negative numbers without missing values")
    judged = ~np.isnan(correctness)
    if ((correctness[judged] < 0) | (correctness[judged] > 1)).any():
        raise InputError("correct must lie in [0, 1]")
    total = weight[judged].sum()
    if total == 0:
        return math.nan
    return float(np.dot(weight[judged], correctness[judged]) / total)


def aggregate_scores(
    frame: pd.DataFrame,
    score_col: str,
    mode: str | None = None,
    low: float | None = None,
    high: float | None = None,
    *,
    missing: str = "zero",
    model_col: str = "model",
) -> pd.DataFrame:
    """Per model: rows `n`, `n_valid`, `n_missing`, `mean` and `normalised_mean` (0-100).

    The scale is that of the judge kind `mode` (one with a fixed scale) unless `low` and
    `high` are given. A missing score
    (a reply that could not be parsed) gets zero credit with `missing="zero"`: it counts
    as the scale minimum, 0 on the normalised scale. With "exclude" it is left out of the
    means. It is counted in `n_missing` either way, and logged.

    Args:
        frame: the judgments.
        score_col: the score column.
        mode: the judge kind whose scale applies.
        low: the scale's minimum, if not the kind's.
        high: the scale's maximum, if not the kind's.
        missing: "zero" or "exclude" for a missing score.
        model_col: the column naming the model.

    Returns:
        One row per model.
    """
    if missing not in MISSING_POLICIES:
        raise ConfigError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    if low is None or high is None:
        fixed = [name for name in kind_names() if get_kind(name).fixed_scale]
        if mode not in fixed:
            raise ConfigError(
                f"give low and high, or a mode with a fixed scale {sorted(fixed)}; "
                f"got mode={mode!r}"
            )
        default_low, default_high = get_kind(mode).default_scale
        low = default_low if low is None else low
        high = default_high if high is None else high
    _check_scale(low, high)
    require_columns(frame, (model_col, score_col), "judgments")
    _require_no_nulls(frame, (model_col,))
    scores = pd.Series(_as_float(frame[score_col], f"column {score_col!r}"), index=frame.index)
    off_scale = scores.notna() & ((scores < low) | (scores > high))
    if off_scale.any():
        row = scores.index[off_scale.to_numpy().argmax()]
        raise InputError(
            f"column {score_col!r} row {row!r} holds {scores[row]}, outside [{low}, {high}]"
        )
    rows: list[dict[str, object]] = []
    for model, model_scores in scores.groupby(frame[model_col], sort=True):
        n_missing = int(model_scores.isna().sum())
        counted = model_scores.fillna(low) if missing == "zero" else model_scores.dropna()
        mean = float(counted.mean()) if len(counted) else math.nan
        if n_missing:
            treatment = "count as the scale minimum" if missing == "zero" else "are excluded"
            logger.warning(
                "%d of %d %s scores of model %s could not be parsed and %s",
                n_missing,
                len(model_scores),
                score_col,
                model,
                treatment,
            )
        rows.append(
            {
                model_col: model,
                "n": len(model_scores),
                "n_valid": len(model_scores) - n_missing,
                "n_missing": n_missing,
                "mean": mean,
                "normalised_mean": 100.0 * (mean - low) / (high - low),
            }
        )
    return _typed(rows, model_col, AGGREGATE_COLUMNS)


# --- pairwise ---------------------------------------------------------------------------

_SWAPPED = {"A": "B", "B": "A", "tie": "tie"}


def _verdict(value: object, name: str) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if value not in VERDICTS:
        raise InputError(f"{name} must be one of {VERDICTS} or missing, got {value!r}")
    return str(value)


def pairwise_outcome(verdict_ab: object, verdict_ba: object) -> str | None:
    """Combine a comparison judged in both orders into one outcome for the pair (A, B).

    `verdict_ab` comes from the order (A, B), `verdict_ba` from the swapped order (B, A),
    each "A" (the first shown won), "B" or "tie". Orders that agree give their winner;
    orders that disagree (position bias) give "tie"; a missing verdict gives None.

    Args:
        verdict_ab: the verdict of the order (A, B).
        verdict_ba: the verdict of the order (B, A).

    Returns:
        "A", "B", "tie" or None.
    """
    first = _verdict(verdict_ab, "verdict_ab")
    second = _verdict(verdict_ba, "verdict_ba")
    if first is None or second is None:
        return None
    return first if first == _SWAPPED[second] else "tie"


def is_position_consistent(verdict_ab: object, verdict_ba: object) -> bool | None:
    """Whether both orders picked the same response (or both a tie); None if one is missing.

    Args:
        verdict_ab: the verdict of the order (A, B).
        verdict_ba: the verdict of the order (B, A).

    Returns:
        True, False or None.
    """
    first = _verdict(verdict_ab, "verdict_ab")
    second = _verdict(verdict_ba, "verdict_ba")
    if first is None or second is None:
        return None
    return first == _SWAPPED[second]


def pairwise_win_rates(
    frame: pd.DataFrame,
    model_a_col: str = "model_a",
    model_b_col: str = "model_b",
    outcome_col: str = "outcome",
) -> pd.DataFrame:
    """Per model: comparisons `n`, `wins`, `losses`, `ties`, `n_missing` and `win_rate`.

    `outcome_col` holds "A" (model_a won), "B" or "tie", as `pairwise_outcome` returns;
    win_rate = (wins + ties / 2) / n over the comparisons with an outcome (NaN if none).

    Args:
        frame: one row per comparison.
        model_a_col: the column naming model A.
        model_b_col: the column naming model B.
        outcome_col: the outcome column.

    Returns:
        One row per model.
    """
    require_columns(frame, (model_a_col, model_b_col, outcome_col), "judgments")
    _require_no_nulls(frame, (model_a_col, model_b_col))
    outcomes = [_verdict(value, f"column {outcome_col!r}") for value in frame[outcome_col]]
    # One row per (model, comparison), the outcome seen from that model's side.
    sides = pd.DataFrame(
        {
            "model": [*frame[model_a_col], *frame[model_b_col]],
            "result": [
                *({"A": "win", "B": "loss", "tie": "tie"}.get(o) for o in outcomes),
                *({"A": "loss", "B": "win", "tie": "tie"}.get(o) for o in outcomes),
            ],
        }
    )
    rows: list[dict[str, object]] = []
    for model, results in sides.groupby("model", sort=True)["result"]:
        wins = int((results == "win").sum())
        losses = int((results == "loss").sum())
        ties = int((results == "tie").sum())
        decided = wins + losses + ties
        rows.append(
            {
                "model": model,
                "n": decided,
                "wins": wins,
                "losses": losses,
                "ties": ties,
                "n_missing": int(results.isna().sum()),
                "win_rate": (wins + 0.5 * ties) / decided if decided else math.nan,
            }
        )
    return _typed(rows, "model", WIN_RATE_COLUMNS)
