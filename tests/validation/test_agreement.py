"""Several annotators per item: majority gold with ties, annotator agreement checked by hand
and against scikit-learn / statsmodels / the project's own agreement module, and the judge
compared with each annotator as well as with the majority."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from llm_feedback import agreement as project_agreement
from llm_feedback.validation.agreement import (
    annotation_table,
    annotator_agreement,
    majority_label,
    metrics_against_annotators,
)
from llm_feedback.validation.baselines import both_orders
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
    assert fleiss_by_hand == pytest.approx(project_agreement.fleiss_kappa(complete))
    for first, second in (("ann1", "ann2"), ("ann1", "ann3"), ("ann2", "ann3")):
        both = table[[first, second]].dropna()
        expected = cohen_kappa_score(both[first], both[second])
        assert rows[("cohen_kappa", f"{first}~{second}")] == pytest.approx(expected)
        assert expected == pytest.approx(project_agreement.cohen_kappa(both[first], both[second]))
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
