"""Rater agreement against values worked out by hand and against scikit-learn / statsmodels
on fixed data (Cohen's and Fleiss' kappa, Spearman's rho, the exact-match share, the rows of
a panel), several annotators per item (majority gold with ties), and the judge compared with
each annotator as well as with the majority."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from llm_feedback.validation import kappa
from llm_feedback.validation.agreement import (
    agreement_rows,
    annotation_table,
    annotator_agreement,
    exact_match_share,
    majority_label,
    metrics_against_annotators,
    spearman,
)
from llm_feedback.validation.baselines import both_orders
from llm_feedback.validation.kappa import cohen_kappa
from llm_feedback.validation.metrics import metric_value

LABELS = {  # three annotators, ties among the labels, one item the third did not label
    "i1": ["A", "A", "A"],
    "i2": ["A", "A", "B"],
    "i3": ["B", "B", "tie"],
    "i4": ["A", "B", "tie"],
    "i5": ["B", "B", "B"],
    "i6": ["A", "B", None],
}


def pairs() -> pd.DataFrame:
    rows = []
    for instance, labels in LABELS.items():
        kept = [(f"ann{n}", label) for n, label in enumerate(labels, 1) if label is not None]
        gold_labels = [label for _, label in kept]
        rows.append(
            {
                "instance_id": instance,
                "category": None,
                "model_a": "m1",
                "model_b": "m2",
                "gold": majority_label(gold_labels),
                "gold_labels": gold_labels,
                "gold_annotators": [name for name, _ in kept],
                "len_a": 10,
                "len_b": 20,
            }
        )
    return pd.DataFrame(rows)


def test_majority_with_ties() -> None:
    assert majority_label(["A", "A", "B"]) == "A"
    assert majority_label(["A", "B", "tie"]) == "tie"  # no label has a majority
    assert majority_label(["A", "B"]) == "tie"
    assert majority_label(["tie", "tie", "A"]) == "tie"
    assert majority_label(["B", None, None]) == "B"
    assert majority_label([None]) is None
    assert pairs()["gold"].tolist() == ["A", "A", "B", "tie", "B", "tie"]


def test_annotator_agreement_by_hand_and_by_the_libraries() -> None:
    table = annotation_table(pairs())
    assert table.loc["i6", "ann3"] is None
    rows = annotator_agreement(table).set_index(["metric", "raters"])["value"]
    # ann1 ~ ann2 over six items: p_o = 4/6, p_e = 4/6 * 2/6 + 2/6 * 4/6.
    p_o, p_e = Fraction(4, 6), Fraction(4, 6) * Fraction(2, 6) * 2
    assert rows[("cohen_kappa", "ann1~ann2")] == pytest.approx(float((p_o - p_e) / (1 - p_e)))
    assert rows[("exact_match_share", "ann1~ann2")] == pytest.approx(4 / 6)
    # Fleiss over the five items all three labelled, categories A, B, tie.
    per_item = [Fraction(6, 6), Fraction(2, 6), Fraction(2, 6), Fraction(0), Fraction(6, 6)]
    shares = [Fraction(6, 15), Fraction(7, 15), Fraction(2, 15)]
    p_bar, p_chance = sum(per_item) / 5, sum(s * s for s in shares)
    fleiss_by_hand = float((p_bar - p_chance) / (1 - p_chance))
    assert rows[("fleiss_kappa", "ann1~ann2~ann3")] == pytest.approx(fleiss_by_hand)
    complete = table.dropna()
    counts, _ = aggregate_raters(complete.to_numpy().astype(str))
    assert fleiss_by_hand == pytest.approx(fleiss_kappa(counts))
    for first, second in (("ann1", "ann2"), ("ann1", "ann3"), ("ann2", "ann3")):
        both = table[[first, second]].dropna()
        expected = cohen_kappa_score(both[first], both[second])
        assert rows[("cohen_kappa", f"{first}~{second}")] == pytest.approx(expected)
    everyone = "ann1~ann2~ann3"
    assert rows[("majority_tie_share", everyone)] == pytest.approx(2 / 6)  # i4, i6
    assert rows[("label_tie_share", everyone)] == pytest.approx(2 / 17)
    assert rows[("unanimous_share", everyone)] == pytest.approx(2 / 6)  # i1, i5


def test_judge_against_the_majority_and_each_annotator() -> None:
    instances = pairs()
    verdicts = both_orders(instances).assign(verdict="A")  # a judge that always says A
    table = metrics_against_annotators(verdicts, instances, resamples=100, judge="always_a")
    assert set(table["gold_source"]) == {"majority", "ann1", "ann2", "ann3"}
    for source, labels in {
        "majority": instances["gold"].tolist(),
        "ann1": [labels[0] for labels in LABELS.values()],
        "ann2": [labels[1] for labels in LABELS.values()],
        "ann3": [labels[2] for labels in LABELS.values() if labels[2] is not None],
    }.items():
        rows = table[table["gold_source"] == source]
        share_a = np.mean([label == "A" for label in labels])
        assert metric_value(rows, "accuracy") == pytest.approx(share_a), source
        n = rows.set_index("metric").loc["accuracy_both_orders"]
        assert n["n"] == len(labels)


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
    assert kappa.fleiss_kappa(verdicts) == pytest.approx(1 / 3)
    # With two raters Fleiss' kappa pools both raters' shares for chance agreement.
    two = verdicts[["a", "b"]]
    # p_o = 3/4 = 48/64; 5 of 8 verdicts are yes: P_e = 25/64 + 9/64 = 34/64;
    # kappa = (48/64 - 34/64) / (1 - 34/64) = 14/30 = 7/15.
    assert kappa.fleiss_kappa(two) == pytest.approx(7 / 15)


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
    assert math.isnan(kappa.fleiss_kappa(pd.DataFrame({"a": [], "b": []})))


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


def test_kappas_are_the_libraries_on_fixed_data():
    rng = np.random.default_rng(7)
    labels = np.array(["A", "B", "tie"], dtype=object)
    verdicts = pd.DataFrame({rater: rng.choice(labels, size=40) for rater in ("a", "b", "c", "d")})
    for first, second in (("a", "b"), ("b", "c"), ("a", "d")):
        expected = cohen_kappa_score(verdicts[first], verdicts[second])
        assert cohen_kappa(verdicts[first], verdicts[second]) == pytest.approx(expected)
    counts, _ = aggregate_raters(verdicts.to_numpy().astype(str))
    assert kappa.fleiss_kappa(verdicts) == pytest.approx(fleiss_kappa(counts))
    # Verdicts read as numbers: a judge's float column (it has NaNs) and another's ints are
    # the same categories, 1.0 being 1.
    x, y = pd.Series([1, 0, 1, 1, 0, 1]), pd.Series([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    assert cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y.astype(int)))
    both = pd.DataFrame({"x": x, "y": y, "z": [1, 1, 1, 1, 0, 1]})
    counts, _ = aggregate_raters(both.astype(int).to_numpy())
    assert kappa.fleiss_kappa(both) == pytest.approx(fleiss_kappa(counts))
    # One category everywhere: chance agreement is 1, NaN rather than the libraries' warning.
    assert math.isnan(kappa.fleiss_kappa(pd.DataFrame({"a": ["A"] * 3, "b": ["A"] * 3})))


def test_one_kappa_the_libraries_in_validation_kappa() -> None:
    # Every kappa of the package comes from validation/kappa.py: no other module calls the
    # libraries' kappas or writes one out by hand (a chance-agreement formula).
    package = Path(kappa.__file__).parents[1]
    calls = re.compile(r"cohen_kappa_score|cohens_kappa|inter_rater\.fleiss_kappa|\bp_e\b")
    elsewhere = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path != Path(kappa.__file__) and calls.search(path.read_text(encoding="utf-8"))
    ]
    assert elsewhere == []
