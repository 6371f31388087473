"""Prediction-powered estimates: a biased judge's own interval misses the human value while
the corrected one covers it; a perfect judge makes the corrected interval narrower than the
labels' alone; TPR/TNR, Wilson and Rogan-Gladen on counts worked by hand; the weighted
estimate from an uncertainty-drawn slice is unbiased; what cannot be estimated is a row
with a status."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.core.errors import ConfigError
from llm_feedback.stats.prediction_powered import (
    COLUMNS,
    ESTIMATORS,
    JUDGE,
    LABELS_ONLY,
    OK,
    PREDICTION_POWERED,
    ROGAN_GLADEN,
    WEIGHTED,
    binary_estimates,
    mean_estimates,
    select_for_labels,
    weighted_estimate,
)

pytest.importorskip("ppi_py", reason="the ppi extra (ppi-python) is not installed")


def by_estimator(frame: pd.DataFrame, metric: str | None = None) -> dict[str, pd.Series]:
    rows = frame if metric is None else frame[frame["metric"] == metric]
    return {row["estimator"]: row for _, row in rows.iterrows()}


def covers(row: pd.Series, truth: float) -> bool:
    return row["ci_low"] <= truth <= row["ci_high"]


def biased_rater(rng: np.random.Generator, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """(human ratings, judge ratings): the judge half a point high, noisy."""
    human = rng.normal(3.0, 1.0, n_items)
    return human, human + 0.5 + rng.normal(0, 0.6, n_items)


def test_a_biased_judge_misses_and_the_corrected_interval_covers():
    rng = np.random.default_rng(1)
    hits = {JUDGE: 0, PREDICTION_POWERED: 0, LABELS_ONLY: 0}
    repetitions = 150
    for _ in range(repetitions):
        human, judge = biased_rater(rng, 2000)
        labelled = rng.choice(len(human), 100, replace=False)
        rows = by_estimator(mean_estimates(judge, judge[labelled], human[labelled]))
        for name in hits:
            hits[name] += covers(rows[name], human.mean())
    assert hits[JUDGE] == 0
    assert hits[PREDICTION_POWERED] / repetitions >= 0.9
    assert hits[LABELS_ONLY] / repetitions >= 0.9


def test_rows_name_their_estimator_and_counts():
    rng = np.random.default_rng(2)
    human, judge = biased_rater(rng, 500)
    frame = mean_estimates(judge, judge[:40], human[:40], metric="mean_rating")
    assert tuple(frame.columns) == COLUMNS
    assert set(frame["estimator"]) <= set(ESTIMATORS)
    rows = by_estimator(frame)
    assert rows[JUDGE]["estimate"] == pytest.approx(judge.mean())
    assert (rows[JUDGE]["n_judged"], rows[JUDGE]["n_labels"]) == (500, 0)
    assert (rows[PREDICTION_POWERED]["n_judged"], rows[PREDICTION_POWERED]["n_labels"]) == (500, 40)
    assert rows[LABELS_ONLY]["estimate"] == pytest.approx(human[:40].mean())
    assert (frame["status"] == OK).all() and (frame["metric"] == "mean_rating").all()


def test_a_perfect_judge_narrows_the_interval_to_about_the_judged_mean():
    rng = np.random.default_rng(3)
    human = rng.normal(3.0, 1.0, 5000)
    rows = by_estimator(mean_estimates(human, human[:50], human[:50]))
    powered, alone = rows[PREDICTION_POWERED], rows[LABELS_ONLY]
    assert powered["estimate"] == pytest.approx(human.mean(), abs=1e-9)
    assert (powered["ci_high"] - powered["ci_low"]) < (alone["ci_high"] - alone["ci_low"]) / 5


def test_unreadable_judge_values_and_missing_labels_are_left_out():
    judged = np.array([1.0, np.nan, 3.0, 4.0, 5.0, np.nan])
    rows = by_estimator(mean_estimates(judged, [1.0, 3.0, np.nan, 4.0], [2.0, 3.0, 4.0, np.nan]))
    assert rows[JUDGE]["n_judged"] == 4
    assert rows[JUDGE]["estimate"] == pytest.approx(13 / 4)
    assert rows[LABELS_ONLY]["n_labels"] == 2


def test_too_few_labels_is_a_status_not_a_crash():
    frame = mean_estimates([1.0, 2.0, 3.0], [1.0], [2.0])
    rows = by_estimator(frame)
    assert rows[JUDGE]["status"] == OK
    for name in (PREDICTION_POWERED, LABELS_ONLY):
        assert rows[name]["status"] == "too_few_labels"
        assert np.isnan(rows[name]["estimate"])


def test_binary_rates_wilson_and_rogan_gladen_worked_by_hand():
    # Labelled: 10 positives, 8 judged positive; 10 negatives, 7 judged negative.
    gold = np.array([1] * 10 + [0] * 10, dtype=float)
    judge_on_labelled = np.array([1] * 8 + [0] * 2 + [0] * 7 + [1] * 3, dtype=float)
    # The judge says positive on 45 of 100 items.
    judged = np.array([1] * 45 + [0] * 55, dtype=float)
    frame = binary_estimates(judged, judge_on_labelled, gold)
    tpr = by_estimator(frame, "tpr")[LABELS_ONLY]
    tnr = by_estimator(frame, "tnr")[LABELS_ONLY]
    assert tpr["estimate"] == pytest.approx(0.8) and tnr["estimate"] == pytest.approx(0.7)
    assert (tpr["ci_low"], tpr["ci_high"]) == pytest.approx(
        proportion_confint(8, 10, alpha=0.05, method="wilson")
    )
    assert (tpr["n_labels"], tnr["n_labels"]) == (10, 10)
    rate = by_estimator(frame, "positive_rate")
    assert (rate[JUDGE]["ci_low"], rate[JUDGE]["ci_high"]) == pytest.approx(
        proportion_confint(45, 100, alpha=0.05, method="wilson")
    )
    corrected = rate[ROGAN_GLADEN]
    assert corrected["estimate"] == pytest.approx((0.45 + 0.7 - 1) / (0.8 + 0.7 - 1))
    assert corrected["ci_low"] < corrected["estimate"] < corrected["ci_high"]


def test_a_judge_no_better_than_chance_cannot_be_corrected():
    gold = np.array([1, 1, 0, 0], dtype=float)
    judge = np.array([0, 1, 1, 0], dtype=float)  # TPR 0.5, TNR 0.5
    corrected = by_estimator(binary_estimates(judge, judge, gold), "positive_rate")[ROGAN_GLADEN]
    assert corrected["status"] == "judge_uninformative"
    assert np.isnan(corrected["estimate"])
    with pytest.raises(ConfigError, match="0/1"):
        binary_estimates([0.0, 2.0], [0.0], [1.0])


def test_selection_follows_uncertainty_within_the_budget():
    rng = np.random.default_rng(4)
    uncertainty = np.r_[np.full(900, 0.1), np.full(100, 5.0)]
    selected, probabilities = select_for_labels(uncertainty, 60, rng)
    assert probabilities.sum() == pytest.approx(60)
    assert probabilities.max() <= 1
    assert probabilities[-1] > 5 * probabilities[0]
    # Past certainty: the surplus is spread over the others, the budget kept.
    _, capped = select_for_labels(np.r_[np.full(10, 100.0), np.ones(90)], 30, rng)
    assert capped[:10] == pytest.approx(np.ones(10))
    assert capped.sum() == pytest.approx(30)
    assert selected.dtype == bool
    with pytest.raises(ConfigError, match="label budget"):
        select_for_labels(uncertainty, 0, rng)


def test_the_weighted_estimate_from_an_uncertainty_drawn_slice_is_unbiased():
    rng = np.random.default_rng(5)
    n_items = 3000
    # The judge errs more where it is unsure, and people rate those items higher: a slice
    # drawn where the judge is unsure is not a uniform one.
    unsure = rng.random(n_items)
    human = rng.normal(2.5 + unsure, 1.0, n_items)
    judge = human + 0.5 + rng.normal(0, 0.1 + 2 * unsure, n_items)
    estimates, naive, hits, repetitions = [], [], 0, 300
    for _ in range(repetitions):
        selected, probabilities = select_for_labels(unsure, 150, rng)
        row = weighted_estimate(judge, np.where(selected, human, np.nan), selected, probabilities)
        row = row.iloc[0]
        assert row["selection"] == WEIGHTED and row["estimator"] == PREDICTION_POWERED
        estimates.append(row["estimate"])
        naive.append(human[selected].mean())
        hits += covers(row, human.mean())
    spread = np.std(estimates) / np.sqrt(repetitions)
    assert abs(np.mean(estimates) - human.mean()) < 3 * spread
    assert hits / repetitions >= 0.9
    # Unweighted, the same labels are pulled towards the unsure items.
    assert np.mean(naive) - human.mean() > 0.08


def test_a_drawn_item_left_unlabelled_is_a_status():
    selected = np.array([True, True, True, False])
    row = weighted_estimate(
        [1.0, 2.0, 3.0, 4.0], [1.0, np.nan, 3.0, np.nan], selected, [0.5, 0.5, 0.5, 0.5]
    ).iloc[0]
    assert row["status"] == "labels_missing" and np.isnan(row["estimate"])
