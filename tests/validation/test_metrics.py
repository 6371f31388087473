"""LLMBar's meta-evaluation metrics: GPT-4 Vanilla's published numbers from its recorded
verdicts, scripted judges with a known bias, the baselines, kappa and the intervals."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from llm_feedback.core.errors import InputError
from llm_feedback.validation.baselines import baseline_metrics, baseline_verdicts, both_orders
from llm_feedback.validation.formats import read_samples
from llm_feedback.validation.kappa import cohen_kappa_of_tables
from llm_feedback.validation.metrics import (
    PAIRWISE_METRICS,
    metric_value,
    pairwise_metrics,
)
from llm_feedback.validation.verdicts import (
    attach_pairs,
    pairs_table,
    verdicts_from_judgments,
    verdicts_from_llmbar,
)
from tests.conftest import SHARED_DATA

NATURAL = SHARED_DATA / "llmbar" / "natural"
VANILLA = NATURAL / "gpt-4" / "vanilla"


def published_share(text: str) -> float:
    """LLMBar's "95 / 100 = 95.0%" or "95.5%" as a share."""
    return float(re.search(r"([\d.]+)%$", text).group(1)) / 100


@pytest.mark.skipif(not (VANILLA / "result.json").is_file(), reason="../shared/data/llmbar absent")
def test_llmbar_gpt4_vanilla_published_numbers_exactly() -> None:
    pairs = pairs_table(read_samples(NATURAL / "dataset.json"))
    verdicts = verdicts_from_llmbar(VANILLA / "result.json", pairs)
    table = pairwise_metrics(verdicts, resamples=500)
    expected = {
        "accuracy_original_order": 0.95,
        "accuracy_swapped_order": 0.96,
        "accuracy": 0.955,
        "accuracy_both_orders": 0.93,
        "positional_agreement": 0.95,
    }
    for metric, value in expected.items():
        assert metric_value(table, metric) == pytest.approx(value, abs=1e-12), metric
    statistics = json.loads((VANILLA / "statistics.json").read_text(encoding="utf-8"))
    published = {
        "accuracy_original_order": "correct_False",
        "accuracy_swapped_order": "correct_True",
        "accuracy": "correct_average",
        "accuracy_both_orders": "correct_both",
        "positional_agreement": "equal",
    }
    for metric, key in published.items():
        assert metric_value(table, metric) == pytest.approx(published_share(statistics[key]))
    assert metric_value(table, "unreadable_count") == 0
    # LLMBar's kappa_agreement is Cohen's kappa of the two orders' verdicts.
    original = verdicts[verdicts["order"] == "original"]["verdict"].tolist()
    swapped = verdicts[verdicts["order"] == "swapped"]["verdict"].tolist()
    assert cohen_kappa_score(original, swapped) == pytest.approx(statistics["kappa_agreement"])


# Ten items with known gold and lengths: gold A on 0-5, B on 6-9; A longer on 0-6, B longer
# on 7-8, the same length on 9.
GOLD = ["A"] * 6 + ["B"] * 4
LEN_A = [50] * 7 + [10, 10, 30]
LEN_B = [20] * 7 + [40, 40, 30]


def scripted_pairs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "instance_id": [f"i{n}" for n in range(10)],
            "category": ["x"] * 5 + ["y"] * 5,
            "model_a": "m1",
            "model_b": "m2",
            "gold": GOLD,
            "gold_labels": [[g] for g in GOLD],
            "gold_annotators": [["gold"]] * 10,
            "len_a": LEN_A,
            "len_b": LEN_B,
        }
    )


def scripted_verdicts(judge) -> pd.DataFrame:
    """The verdicts of `judge(shown_first_len, shown_second_len) -> "first"|"second"|"tie"`
    on both orders, in original labels."""
    skeleton = both_orders(scripted_pairs())
    verdicts = []
    for row in skeleton.itertuples():
        original = row.order == "original"
        shown = (row.len_a, row.len_b) if original else (row.len_b, row.len_a)
        choice = judge(*shown)
        verdicts.append(
            {"first": "A" if original else "B", "second": "B" if original else "A"}.get(
                choice, choice
            )
        )
    return skeleton.assign(verdict=verdicts)


def first_shown(first_len: int, second_len: int) -> str:
    return "first"


def longer_shown(first_len: int, second_len: int) -> str:
    return "first" if first_len > second_len else "second" if second_len > first_len else "tie"


ALWAYS_FIRST_RATES = {
    "accuracy_original_order": 0.6,  # the gold is A on 6 of 10
    "accuracy_swapped_order": 0.4,
    "accuracy": 0.5,
    "accuracy_both_orders": 0.0,
    "positional_agreement": 0.0,
    "first_shown_share": 1.0,
    "gold_first_shown_share": 0.5,
    "longer_share": 9 / 18,  # original: A longer on 7; swapped: B longer on 2
    "gold_longer_share": 16 / 18,  # the gold is the longer one on 8 of the 9 unequal items
    "tie_rate": 0.0,
    "unreadable_share": 0.0,
    "cohen_kappa": 0.0,  # p_o = 0.5 = p_e (0.6 * 0.5 + 0.4 * 0.5)
}
ALWAYS_LONGER_RATES = {
    "accuracy_original_order": 0.8,  # right on 0-5, 7, 8; wrong on 6 and the tie on 9
    "accuracy_swapped_order": 0.8,
    "accuracy": 0.8,
    "accuracy_both_orders": 0.8,
    "positional_agreement": 1.0,
    "first_shown_share": 9 / 20,
    "gold_first_shown_share": 0.5,
    "longer_share": 1.0,
    "gold_longer_share": 16 / 18,
    "tie_rate": 2 / 20,
    "unreadable_share": 0.0,
    # confusion (gold x verdict) over 20 calls: A->A 12, B->A 2, B->B 4, B->tie 2
    "cohen_kappa": (16 / 20 - (12 / 20 * 14 / 20 + 8 / 20 * 4 / 20))
    / (1 - (12 / 20 * 14 / 20 + 8 / 20 * 4 / 20)),
}
RANDOM_RATES = {
    "accuracy_original_order": 0.5,
    "accuracy_swapped_order": 0.5,
    "accuracy": 0.5,
    "accuracy_both_orders": 0.25,
    "positional_agreement": 0.5,
    "first_shown_share": 0.5,
    "gold_first_shown_share": 0.5,
    "longer_share": 0.5,
    "gold_longer_share": 16 / 18,
    "tie_rate": 0.0,
    "unreadable_share": 0.0,
    "cohen_kappa": 0.0,
}


@pytest.mark.parametrize(
    ("judge", "rates"), [(first_shown, ALWAYS_FIRST_RATES), (longer_shown, ALWAYS_LONGER_RATES)]
)
def test_scripted_biased_judges_get_the_rates_the_data_implies(judge, rates) -> None:
    table = pairwise_metrics(scripted_verdicts(judge), resamples=200, judge="scripted")
    for metric, value in rates.items():
        assert metric_value(table, metric) == pytest.approx(value, abs=1e-12), metric
    assert set(table["metric"]) == set(PAIRWISE_METRICS)
    assert (table["judge"] == "scripted").all()


def test_baselines_equal_hand_computations_and_the_scripted_judges() -> None:
    verdicts = scripted_verdicts(first_shown)
    table = baseline_metrics(verdicts, resamples=200)
    for baseline, rates in (
        ("always_first", ALWAYS_FIRST_RATES),
        ("always_longer", ALWAYS_LONGER_RATES),
        ("random", RANDOM_RATES),
    ):
        rows = table[table["judge"] == baseline]
        for metric, value in rates.items():
            assert metric_value(rows, metric) == pytest.approx(value, abs=1e-12), (baseline, metric)
    # A judge that behaves like a baseline gets the baseline's table, intervals included.
    judge = pairwise_metrics(scripted_verdicts(longer_shown), resamples=200, judge="always_longer")
    pd.testing.assert_frame_equal(
        judge, table[table["judge"] == "always_longer"].reset_index(drop=True)
    )


def test_per_category_rates_and_unreadable_calls_apart() -> None:
    verdicts = scripted_verdicts(first_shown)
    # Instance i0's swapped call failed: not a verdict, not right, counted apart.
    verdicts.loc[
        (verdicts["instance_id"] == "i0") & (verdicts["order"] == "swapped"), "verdict"
    ] = None
    table = pairwise_metrics(verdicts, resamples=200)
    assert metric_value(table, "unreadable_share") == 1 / 20
    assert metric_value(table, "unreadable_count") == 1
    assert metric_value(table, "accuracy_swapped_order") == 0.4  # i0's gold is A: still 4/10
    # Over the readable calls only (named apart): 4 of 9; i0 is in neither both-order rate.
    assert metric_value(table, "accuracy_swapped_order_readable") == pytest.approx(4 / 9)
    both = metric_value(table, "accuracy_both_orders")
    assert metric_value(table, "accuracy_both_orders_readable") == pytest.approx(both * 10 / 9)
    assert metric_value(table, "accuracy_original_order_readable") == metric_value(
        table, "accuracy_original_order"
    )
    assert metric_value(table, "first_shown_share") == 1.0  # over the 19 readable verdicts
    assert table.set_index(["metric", "category"]).loc[("first_shown_share", pd.NA), "n"] == 19
    # Category x holds i0-i4 (gold A): always-first is right in the original order only.
    assert metric_value(table, "accuracy_original_order", "x") == 1.0
    assert metric_value(table, "accuracy_swapped_order", "x") == 0.0
    # Category y holds i5 (A) and i6-i9 (B).
    assert metric_value(table, "accuracy_original_order", "y") == 0.2
    assert metric_value(table, "accuracy_swapped_order", "y") == 0.8
    assert set(table["category"].dropna()) == {"x", "y"}


def test_intervals_are_seeded_clustered_and_named() -> None:
    verdicts = scripted_verdicts(longer_shown)
    first = pairwise_metrics(verdicts, resamples=300, seed=5)
    again = pairwise_metrics(verdicts, resamples=300, seed=5)
    pd.testing.assert_frame_equal(first, again)
    other = pairwise_metrics(verdicts, resamples=300, seed=6)
    assert not first["ci_low"].equals(other["ci_low"])
    overall = first[first["category"].isna()].set_index("metric")
    # Both orders agree on every item: resampling instances (not calls) moves them together,
    # so the two-order accuracy has exactly the one-order accuracy's interval.
    assert overall.loc["accuracy", ["ci_low", "ci_high"]].tolist() == (
        overall.loc["accuracy_original_order", ["ci_low", "ci_high"]].tolist()
    )
    rates = overall.drop(index="unreadable_count")
    assert (rates["ci_low"] <= rates["value"] + 1e-12).all()
    assert (rates["value"] <= rates["ci_high"] + 1e-12).all()
    assert overall.loc["unreadable_count", ["ci_low", "ci_high"]].isna().all()
    assert rates["ci_method"].str.contains("300 resamples, seed 5").all()
    assert (rates["resamples"] == 300).all()
    assert overall.loc["accuracy", "ci_low"] < 0.8 < overall.loc["accuracy", "ci_high"]


def test_kappa_of_tables_equals_scikit_learn() -> None:
    rng = np.random.default_rng(1)
    gold = rng.integers(0, 3, 60)
    verdict = np.where(rng.random(60) < 0.6, gold, rng.integers(0, 3, 60))
    confusion = np.zeros((3, 3))
    np.add.at(confusion, (gold, verdict), 1)
    expected = cohen_kappa_score(gold, verdict)
    assert cohen_kappa_of_tables(confusion) == pytest.approx(expected)
    # A stack of tables (a bootstrap's resamples): one kappa each, NaN where undefined.
    one_category = np.zeros((3, 3))
    one_category[0, 0] = 5
    stack = cohen_kappa_of_tables(np.stack([confusion, np.zeros((3, 3)), one_category]))
    assert stack.shape == (3,)
    assert stack[0] == pytest.approx(expected)
    assert np.isnan(stack[1:]).all()
    table = pairwise_metrics(
        attach_pairs(
            pd.DataFrame(
                {
                    "instance_id": [f"i{n}" for n in range(60)],
                    "order": "original",
                    "verdict": np.array(["A", "B", "tie"], dtype=object)[verdict],
                }
            ),
            pd.DataFrame(
                {
                    "instance_id": [f"i{n}" for n in range(60)],
                    "gold": np.array(["A", "B", "tie"])[gold],
                    "len_a": 1,
                    "len_b": 2,
                    "category": None,
                }
            ),
        ),
        resamples=100,
    )
    assert metric_value(table, "cohen_kappa") == pytest.approx(cohen_kappa_score(gold, verdict))


def test_verdicts_from_eval_judgments_follow_the_first_row_as_a() -> None:
    samples = pd.DataFrame(
        {
            "instance_id": ["q1", "q1", "q2", "q2"],
            "question": ["Q1", "Q1", "Q2", "Q2"],
            "response": ["short", "much longer", "aa", "b"],
            "model": ["zeta", "alpha", "zeta", "alpha"],
            "gold": ["A", "A", "B", "B"],
        }
    )
    pairs = pairs_table(samples)
    assert pairs["model_a"].tolist() == ["zeta", "zeta"]
    # Rows as the pipeline writes them today: model_a is the first model by name (alpha),
    # so these pairs are turned round; both verdicts in the row's own A/B labels.
    judgments = pd.DataFrame(
        {
            "instance_id": ["q1", "q2"],
            "model_a": ["alpha", "zeta"],
            "model_b": ["zeta", "alpha"],
            "verdict_a_first": ["B", "B"],
            "verdict_b_first": ["A", None],
            # q2's second order was asked (its prompt was sent) and its reply unreadable.
            "prompt_b_first": ["shown B first", "shown B first"],
        }
    )
    verdicts = verdicts_from_judgments(judgments, pairs).set_index(["instance_id", "order"])
    # q1: alpha (the instance's B) was shown first and lost: "A" in the instance's labels.
    assert verdicts.loc[("q1", "swapped"), "verdict"] == "A"
    assert verdicts.loc[("q1", "original"), "verdict"] == "B"
    assert verdicts.loc[("q2", "original"), "verdict"] == "B"
    assert verdicts.loc[("q2", "swapped"), "verdict"] is None
    assert verdicts.loc[("q1", "original"), "len_a"] == 5
    # Judged in one order only (a recorded preference, a one-order judge): the second order
    # was not run, so it is no verdict row at all rather than an unreadable one.
    one_order = verdicts_from_judgments(judgments.drop(columns=["prompt_b_first"]), pairs)
    assert sorted(zip(one_order["instance_id"], one_order["order"], strict=True)) == [
        ("q1", "original"),
        ("q1", "swapped"),
        ("q2", "original"),
    ]


def test_bad_verdict_frames_are_refused() -> None:
    pairs = scripted_pairs()
    with pytest.raises(InputError, match="instance_id 'nope' is not in the samples"):
        attach_pairs(pd.DataFrame({"instance_id": ["nope"], "order": ["original"]}), pairs)
    with pytest.raises(InputError, match="'sideways' is not original/swapped"):
        attach_pairs(pd.DataFrame({"instance_id": ["i0"], "order": ["sideways"]}), pairs)
    doubled = pd.concat([scripted_verdicts(first_shown)] * 2)
    with pytest.raises(InputError, match="appears twice"):
        pairwise_metrics(doubled)
    assert baseline_verdicts(scripted_verdicts(first_shown), "random")["p_a"].eq(0.5).all()
