"""A binary judge's TPR and TNR with Wilson intervals over items (`validation.binary_rates`),
as card rows the judge gate can require."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from llm_feedback.params.report import JudgeRequirement, parse_report
from llm_feedback.validation.binary_rates import BINARY_METRICS, pairwise_rates, pointwise_rates
from llm_feedback.validation.card import CARD_METRICS, card_frame
from llm_feedback.validation.gate import JudgeRequirementError, check_requirements
from llm_feedback.validation.identity import judge_identity

IDENTITY = judge_identity("local", "judge-1", "template", {"temperature": 0})


def verdicts() -> pd.DataFrame:
    """Ten items in both orders: gold A on i0-i5, B on i6-i9. On gold-A items the judge is
    right in both orders on i0-i3, in one on i4 (a tie in the other), in none on i5
    (unreadable swapped); on gold-B items right in both on i6-i7, in one on i8, none on i9."""
    says = {
        "i0": ("A", "A"),
        "i1": ("A", "A"),
        "i2": ("A", "A"),
        "i3": ("A", "A"),
        "i4": ("A", "tie"),
        "i5": ("B", None),
        "i6": ("B", "B"),
        "i7": ("B", "B"),
        "i8": ("A", "B"),
        "i9": ("A", "A"),
    }
    rows = []
    for number, (item, (original, swapped)) in enumerate(says.items()):
        gold = "A" if number < 6 else "B"
        category = "easy" if number % 2 == 0 else "hard"
        for order, verdict in (("original", original), ("swapped", swapped)):
            rows.append(
                {
                    "instance_id": item,
                    "order": order,
                    "verdict": verdict,
                    "gold": gold,
                    "category": category,
                }
            )
    return pd.DataFrame(rows)


def test_pairwise_rates_count_each_item_once_with_wilson_intervals():
    table = pairwise_rates(verdicts(), judge="j")
    overall = table[table["category"].isna()].set_index("metric")
    # Items' shares right: gold A 1, 1, 1, 1, 0.5, 0 (a tie and an unreadable are misses).
    assert overall.loc["tpr", "value"] == pytest.approx(4.5 / 6)
    assert overall.loc["tpr", "n"] == 6
    low, high = proportion_confint(4.5, 6, method="wilson")
    assert (overall.loc["tpr", "ci_low"], overall.loc["tpr", "ci_high"]) == pytest.approx(
        (low, high)
    )
    assert overall.loc["tnr", "value"] == pytest.approx(2.5 / 4) and overall.loc["tnr", "n"] == 4
    assert overall.loc["tnr", "ci_method"].startswith("wilson")
    easy = table[table["category"] == "easy"].set_index("metric")
    # Easy: i0, i2, i4 (gold A: 1, 1, 0.5) and i6, i8 (gold B: 1, 0.5).
    assert easy.loc["tpr", "value"] == pytest.approx(2.5 / 3)
    assert easy.loc["tnr", "value"] == pytest.approx(1.5 / 2)


def test_pairwise_rates_take_probabilities_and_leave_gold_ties_out():
    frame = verdicts().drop(columns="verdict").assign(p_a=0.8, p_b=0.2, p_tie=0.0)
    frame.loc[frame["instance_id"] == "i0", "gold"] = "tie"
    overall = pairwise_rates(frame).query("category.isna()").set_index("metric")
    assert overall.loc["tpr", "value"] == pytest.approx(0.8) and overall.loc["tpr", "n"] == 5
    assert overall.loc["tnr", "value"] == pytest.approx(0.2)


def test_pointwise_rates_only_for_a_pass_fail_scale():
    scores = pd.DataFrame(
        {
            "instance_id": ["a", "b", "c", "d", "e", "f"],
            "score": [1.0, 1.0, 0.0, np.nan, 0.0, 1.0],
            "gold_score": [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        }
    )
    overall = pointwise_rates(scores).set_index("metric")
    assert overall.loc["tpr", "value"] == pytest.approx(2 / 4)  # unreadable d is a miss
    assert overall.loc["tnr", "value"] == pytest.approx(1 / 2)
    assert pointwise_rates(scores.assign(gold_score=[5.0, 4, 3, 2, 1, 1])).empty


def test_the_gate_requires_tpr_and_tnr_lower_bounds():
    assert set(BINARY_METRICS) <= set(CARD_METRICS)
    table = pairwise_rates(verdicts(), judge="judge-1")
    card = card_frame(IDENTITY, "set", {"argmax": table}, None, created_at="t")
    tnr_low = float(card.query("metric == 'tnr' and category.isna()")["ci_low"].iloc[0])
    with pytest.raises(JudgeRequirementError) as raised:
        check_requirements(
            card, IDENTITY, [JudgeRequirement("tpr", 0.3), JudgeRequirement("tnr", 0.5)]
        )
    message = str(raised.value)
    assert f"falls short: tnr lower bound {tnr_low:.3f} < 0.5, tnr (argmax) 0.625" in message
    assert "report.judge_requirement requires tnr lower bound >= 0.5" in message
    met = check_requirements(card, IDENTITY, [JudgeRequirement("tpr", 0.3)])
    assert met[0].startswith("Requirement met: tpr lower bound >= 0.3 (tpr (argmax) 0.750")
    both = parse_report(
        {
            "judge_requirement": [
                {"metric": "tpr", "min_lower_bound": 0.7},
                {"metric": "tnr", "min_lower_bound": 0.7},
            ]
        }
    )
    assert [item.metric for item in both.judge_requirement] == ["tpr", "tnr"]
