"""Metrics against hand-computed values and on edge cases."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.judges.metrics import (
    aggregate_scores,
    is_position_consistent,
    normalised_mean,
    pairwise_outcome,
    pairwise_win_rates,
    pass_at_k,
    pass_at_k_table,
    weighted_accuracy,
)


@pytest.fixture(autouse=True)
def _no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize(
    ("k", "expected"),
    # n=5, c=2: 1 - C(3,k)/C(5,k) = 1 - 3/5, 1 - 3/10, 1 - 1/10, then no all-wrong draw.
    [(1, 0.4), (2, 0.7), (3, 0.9), (4, 1.0), (5, 1.0)],
)
def test_pass_at_k_hand_computed(k: int, expected: float) -> None:
    assert pass_at_k(5, 2, k) == pytest.approx(expected)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert math.isnan(pass_at_k(5, 2, 6))
    assert math.isnan(pass_at_k(0, 0, 1))
    assert pass_at_k(np.int64(4), np.int64(1), 2) == pytest.approx(0.5)
    # Large n stays finite where C(n, k) would be astronomically large.
    assert pass_at_k(10_000, 1, 5_000) == pytest.approx(0.5)
    for n, c, k in [(3, 4, 1), (3, -1, 1), (3, 1, 0)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def _replicates() -> pd.DataFrame:
    rows = [
        # model m1: instance q1 has 5 replicates with 2 correct, q2 only 2 (1 correct).
        *[("m1", "q1", value) for value in (1, 0, 1, 0, 0)],
        ("m1", "q2", True),
        ("m1", "q2", False),
        # model m2: one instance, 3 replicates, one unparsed judgment.
        ("m2", "q1", 1.0),
        ("m2", "q1", np.nan),
        ("m2", "q1", 0.0),
    ]
    return pd.DataFrame(rows, columns=["model", "instance_id", "correct"])


def test_pass_at_k_table_per_model_and_k() -> None:
    table = pass_at_k_table(_replicates(), "instance_id", "correct")
    m1 = table[table["model"] == "m1"].set_index("k")
    assert list(m1.index) == [1, 2, 3, 4, 5]
    assert m1.loc[1, "pass_at_k"] == pytest.approx((0.4 + 0.5) / 2)
    assert m1.loc[2, "pass_at_k"] == pytest.approx((0.7 + 1.0) / 2)
    # From k=3 on, q2 (2 replicates) has no estimate and is reported, not averaged.
    assert m1.loc[3, "pass_at_k"] == pytest.approx(0.9)
    assert (m1.loc[3, "n_instances"], m1.loc[3, "n_instances_too_few"]) == (1, 1)
    m2 = table[table["model"] == "m2"].set_index("k")
    # The unparsed judgment counts as incorrect: n=3, c=1.
    assert m2.loc[1, "pass_at_k"] == pytest.approx(1 / 3)
    assert m2.loc[1, "n_missing"] == 1
    assert table.dtypes["pass_at_k"] == "float64" and table.dtypes["k"] == "int64"


def test_pass_at_k_table_excluding_missing_and_explicit_ks() -> None:
    table = pass_at_k_table(_replicates(), "instance_id", "correct", ks=[1, 3], missing="exclude")
    m2 = table[table["model"] == "m2"].set_index("k")
    assert m2.loc[1, "pass_at_k"] == pytest.approx(0.5)  # n=2, c=1
    assert math.isnan(m2.loc[3, "pass_at_k"])
    assert (m2.loc[3, "n_instances"], m2.loc[3, "n_instances_too_few"]) == (0, 1)


def test_pass_at_k_table_empty_and_bad_input() -> None:
    empty = pass_at_k_table(_replicates().iloc[:0], "instance_id", "correct")
    assert empty.empty and list(empty.columns)[:3] == ["model", "k", "pass_at_k"]
    with pytest.raises(InputError, match="instance"):
        pass_at_k_table(_replicates(), "instance", "correct")
    bad = _replicates()
    bad.loc[3, "correct"] = 2
    with pytest.raises(InputError, match="row 3"):
        pass_at_k_table(bad, "instance_id", "correct")
    with pytest.raises(ConfigError):
        pass_at_k_table(_replicates(), "instance_id", "correct", missing="drop")


def test_normalised_mean() -> None:
    assert normalised_mean([0, 5, 4, 3], 0, 5) == pytest.approx(60.0)  # mean 3 x 20
    assert normalised_mean([1, 10], 1, 10) == pytest.approx(50.0)
    assert normalised_mean(pd.Series([4, None], dtype="Int64"), 0, 5) == pytest.approx(80.0)
    assert math.isnan(normalised_mean([], 0, 5))
    assert math.isnan(normalised_mean([np.nan], 0, 5))
    with pytest.raises(InputError):
        normalised_mean([6], 0, 5)
    with pytest.raises(ConfigError):
        normalised_mean([1], 5, 0)


def test_weighted_accuracy() -> None:
    assert weighted_accuracy([1, 0, 1], [0.5, 0.3, 0.2]) == pytest.approx(0.7)
    assert weighted_accuracy([True, False], [1, 1]) == pytest.approx(0.5)
    # A response without a judgment drops out together with its weight.
    assert weighted_accuracy([1, np.nan, 0], [1, 5, 3]) == pytest.approx(0.25)
    assert math.isnan(weighted_accuracy([1, 0], [0, 0]))
    assert math.isnan(weighted_accuracy([], []))
    with pytest.raises(InputError, match="length"):
        weighted_accuracy([1, 0], [1])
    with pytest.raises(InputError, match="non-negative"):
        weighted_accuracy([1, 0], [1, -1])


@pytest.mark.parametrize(
    ("ab", "ba", "outcome", "consistent"),
    [
        ("A", "B", "A", True),  # A wins shown first and shown second
        ("B", "A", "B", True),
        ("tie", "tie", "tie", True),
        ("A", "A", "tie", False),  # the first position always won: position bias
        ("B", "B", "tie", False),
        ("A", "tie", "tie", False),
        (None, "A", None, None),
        ("B", float("nan"), None, None),
    ],
)
def test_pairwise_outcome_combines_both_orders(
    ab: object, ba: object, outcome: str | None, consistent: bool | None
) -> None:
    assert pairwise_outcome(ab, ba) == outcome
    assert is_position_consistent(ab, ba) == consistent


def test_pairwise_outcome_rejects_unknown_verdicts() -> None:
    with pytest.raises(InputError):
        pairwise_outcome("C", "A")


def test_pairwise_win_rates_count_ties_half() -> None:
    comparisons = pd.DataFrame(
        {
            "model_a": ["x", "x", "y", "x"],
            "model_b": ["y", "z", "z", "y"],
            "outcome": ["A", "tie", "B", None],
        }
    )
    rates = pairwise_win_rates(comparisons).set_index("model")
    assert rates.loc["x", ["n", "wins", "losses", "ties", "n_missing"]].tolist() == [2, 1, 0, 1, 1]
    assert rates.loc["x", "win_rate"] == pytest.approx(0.75)
    assert rates.loc["y", "win_rate"] == pytest.approx(0.0)
    assert rates.loc["z", "win_rate"] == pytest.approx(0.75)  # a win and a tie
    empty = pairwise_win_rates(comparisons.iloc[:0])
    assert empty.empty


def test_aggregate_scores_counts_missing_as_zero_by_default(caplog) -> None:
    frame = pd.DataFrame({"model": ["a", "a", "a", "b"], "rating": [5.0, 4.0, None, 2.0]})
    table = aggregate_scores(frame, "rating", "score_0_5").set_index("model")
    assert table.loc["a", ["n", "n_valid", "n_missing"]].tolist() == [3, 2, 1]
    assert table.loc["a", "mean"] == pytest.approx(3.0)
    assert table.loc["a", "normalised_mean"] == pytest.approx(60.0)
    assert table.loc["b", "normalised_mean"] == pytest.approx(40.0)
    assert "could not be parsed" in caplog.text
    excluded = aggregate_scores(frame, "rating", "score_0_5", missing="exclude").set_index("model")
    assert excluded.loc["a", "mean"] == pytest.approx(4.5)
    assert excluded.loc["a", "n_missing"] == 1


def test_aggregate_scores_scales_and_edges() -> None:
    frame = pd.DataFrame({"model": ["a", "a"], "rating": [1, 10]})
    assert aggregate_scores(frame, "rating", "single_1_10")["normalised_mean"][0] == 50.0
    # With "zero", an unparsed 1-10 rating gets zero credit: the scale minimum.
    missing = pd.DataFrame({"model": ["a", "a"], "rating": [10, None]})
    assert aggregate_scores(missing, "rating", "single_1_10")["normalised_mean"][0] == 50.0
    only_missing = pd.DataFrame({"model": ["a"], "rating": [np.nan]})
    excluded = aggregate_scores(only_missing, "rating", low=1, high=3, missing="exclude")
    assert math.isnan(excluded["mean"][0]) and math.isnan(excluded["normalised_mean"][0])
    assert aggregate_scores(frame.iloc[:0], "rating", "single_1_10").empty
    with pytest.raises(InputError, match="row 1"):
        aggregate_scores(frame, "rating", "score_0_5")
    with pytest.raises(ConfigError, match="mode"):
        aggregate_scores(frame, "rating", "rubric")
    with pytest.raises(InputError, match="score"):
        aggregate_scores(frame, "score", "single_1_10")
