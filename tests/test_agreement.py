"""Agreement statistics against values worked out by hand."""

import math

import pandas as pd
import pytest

from llm_feedback.agreement import (
    agreement_rows,
    cohen_kappa,
    exact_match_share,
    fleiss_kappa,
    spearman,
)


def test_cohen_kappa_of_two_raters_by_hand():
    # Ten items; rater a says yes to items 1-6, rater b to items 1-4, 7 and 8.
    a = pd.Series(["yes"] * 6 + ["no"] * 4)
    b = pd.Series(["yes"] * 4 + ["no"] * 2 + ["yes"] * 2 + ["no"] * 2)
    # Same verdict on items 1-4 (yes) and 9-10 (no): p_o = 6/10.
    # Both say yes 6 times in 10: p_e = 0.6 * 0.6 + 0.4 * 0.4 = 0.52.
    # kappa = (0.6 - 0.52) / (1 - 0.52) = 0.08 / 0.48 = 1/6.
    assert exact_match_share(a, b) == pytest.approx(0.6)
    assert cohen_kappa(a, b) == pytest.approx(1 / 6)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    # Opposite verdicts on a 50/50 split: p_o = 0, p_e = 0.5, kappa = -1.
    flipped = pd.Series(["yes", "no", "yes", "no"])
    assert cohen_kappa(flipped, flipped.map({"yes": "no", "no": "yes"})) == pytest.approx(-1.0)


def test_fleiss_kappa_of_three_raters_by_hand():
    verdicts = pd.DataFrame(
        {
            "a": ["yes", "yes", "no", "yes"],
            "b": ["yes", "yes", "no", "no"],
            "c": ["yes", "no", "no", "no"],
        }
    )
    # Per item (m = 3 raters), P_i = (sum_c n_ic^2 - 3) / 6:
    #   yes,yes,yes -> (9 - 3) / 6 = 1;   yes,yes,no -> (4 + 1 - 3) / 6 = 1/3
    #   no,no,no    -> 1;                 yes,no,no  -> 1/3
    # P = (1 + 1/3 + 1 + 1/3) / 4 = 2/3. Six of 12 verdicts are yes: P_e = 0.5^2 + 0.5^2 = 0.5.
    # kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert fleiss_kappa(verdicts) == pytest.approx(1 / 3)
    # With two raters Fleiss' kappa pools both raters' shares for chance agreement.
    two = verdicts[["a", "b"]]
    # p_o = 3/4 = 48/64; 5 of 8 verdicts are yes: P_e = 25/64 + 9/64 = 34/64;
    # kappa = (48/64 - 34/64) / (1 - 34/64) = 14/30 = 7/15.
    assert fleiss_kappa(two) == pytest.approx(7 / 15)


def test_spearman_ranks_with_ties_share_the_mean_rank():
    # No ties: d = (0, 1, -1, 0), rho = 1 - 6 * 2 / (4 * (16 - 1)) = 0.8.
    assert spearman(pd.Series([1, 2, 3, 4]), pd.Series([1, 3, 2, 4])) == pytest.approx(0.8)
    # y's ties rank (1.5, 1.5, 3, 4): Pearson of (1, 2, 3, 4) and (1.5, 1.5, 3, 4).
    x, y = pd.Series([1.0, 2.0, 3.0, 4.0]), pd.Series([5.0, 5.0, 7.0, 9.0])
    ranks = [1.5, 1.5, 3.0, 4.0]
    mean = sum(ranks) / 4
    covariance = sum((r - 2.5) * (s - mean) for r, s in zip([1, 2, 3, 4], ranks, strict=True))
    spread = math.sqrt(sum((r - 2.5) ** 2 for r in [1, 2, 3, 4]))
    spread *= math.sqrt(sum((s - mean) ** 2 for s in ranks))
    assert spearman(x, y) == pytest.approx(covariance / spread)


def test_undefined_statistics_are_nan_not_errors():
    empty = pd.Series([], dtype=object)
    assert math.isnan(cohen_kappa(empty, empty))
    assert math.isnan(exact_match_share(empty, empty))
    # One category only: chance agreement is 1 and kappa 0/0.
    same = pd.Series([1.0, 1.0, 1.0])
    assert math.isnan(cohen_kappa(same, same))
    assert math.isnan(spearman(pd.Series([1, 2]), pd.Series([2, 1])))  # under 3 pairs
    assert math.isnan(spearman(same, pd.Series([1.0, 2.0, 3.0])))  # a constant rater
    assert math.isnan(fleiss_kappa(pd.DataFrame({"a": [], "b": []})))


def test_agreement_rows_compare_the_items_both_raters_rated():
    ratings = pd.DataFrame(
        {
            "a": [1.0, 0.0, 1.0, None, 1.0],
            "b": [1.0, 0.0, 0.0, 1.0, None],
            "c": [1.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    rows = agreement_rows(ratings, ["a", "b", "c"], categorical=True)
    found = {(row["raters"], row["statistic"]): (row["value"], row["n"]) for row in rows}
    assert set(found) == {
        *(
            (pair, statistic)
            for pair in ("a~b", "a~c", "b~c")
            for statistic in ("cohen_kappa", "exact_match_share")
        ),
        ("a~b~c", "fleiss_kappa"),
    }
    assert found[("a~b", "exact_match_share")] == (pytest.approx(2 / 3), 3)
    assert found[("b~c", "exact_match_share")] == (pytest.approx(2 / 4), 4)  # items 1 and 4
    assert found[("a~b~c", "fleiss_kappa")][1] == 3  # the items all three rated

    scores = agreement_rows(ratings[["a", "b"]], ["a", "b"], categorical=False)
    assert [row["statistic"] for row in scores] == ["spearman", "exact_match_share"]
