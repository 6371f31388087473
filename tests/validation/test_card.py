"""The judge card: keys, rows of judge_validation, the Markdown a report shows, the figure."""

from __future__ import annotations

import pandas as pd

from llm_feedback.schema import JUDGE_VALIDATION_COLUMN_TYPES
from llm_feedback.validation.baselines import baseline_metrics, both_orders
from llm_feedback.validation.card import (
    accuracy_figure,
    card_frame,
    card_lines,
    judge_identity,
    judge_key,
)
from llm_feedback.validation.metrics import pairwise_metrics

TEMPLATE = "Which response is better? {question} {response_a} {response_b}"


def test_judge_key_follows_the_judge_and_hides_secrets() -> None:
    key = judge_key("http://localhost:8080/v1", "m", TEMPLATE, {"temperature": 0, "seed": 1})
    assert key == judge_key(
        "http://localhost:8080/v1", "m", TEMPLATE, {"seed": 1, "temperature": 0}
    )
    assert key != judge_key(
        "http://localhost:8080/v1", "m", TEMPLATE + " ", {"temperature": 0, "seed": 1}
    )
    assert key != judge_key(
        "http://localhost:8080/v1", "m", TEMPLATE, {"temperature": 0.7, "seed": 1}
    )
    assert key != judge_key(
        "http://localhost:8080/v1", "other", TEMPLATE, {"temperature": 0, "seed": 1}
    )
    identity = judge_identity(
        "https://bob:hunter2@api.example.com/v1?key=sk-123", "m", TEMPLATE, {}
    )
    assert identity["judge_endpoint"] == "https://api.example.com/v1"
    assert "hunter2" not in str(identity) and "sk-123" not in str(identity)
    assert len(identity["judge_key"]) == 16


def items(n: int = 40) -> pd.DataFrame:
    """n items, gold A on even, B on odd; A longer on every other pair of items."""
    return pd.DataFrame(
        {
            "instance_id": [f"i{k}" for k in range(n)],
            "category": None,
            "model_a": "m1",
            "model_b": "m2",
            "gold": ["A" if k % 2 == 0 else "B" for k in range(n)],
            "gold_labels": [["A" if k % 2 == 0 else "B"] for k in range(n)],
            "gold_annotators": [["gold"]] * n,
            "len_a": [100 if (k // 2) % 2 == 0 else 10 for k in range(n)],
            "len_b": [50] * n,
        }
    )


def cards_of(verdicts: pd.DataFrame, identity: dict[str, str]) -> pd.DataFrame:
    return card_frame(
        identity,
        "scripted-40",
        {"argmax": pairwise_metrics(verdicts, resamples=300, judge="x")},
        baseline_metrics(verdicts, resamples=300),
        created_at="2026-12-01T21:00:00Z",
    )


def test_card_of_a_position_biased_judge_says_it_cannot_be_told_apart() -> None:
    identity = judge_identity("local", "tiny-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    verdicts = skeleton.assign(verdict=skeleton["order"].map({"original": "A", "swapped": "B"}))
    cards = cards_of(verdicts, identity)
    assert list(cards.columns) == list(JUDGE_VALIDATION_COLUMN_TYPES)
    assert set(cards["kind"]) == {"judge", "baseline"}
    text = card_lines(cards, identity["judge_key"])
    assert "### Judge card: tiny-judge at local" in text
    assert "**This judge cannot be told apart from always_first**" in text
    assert "**This judge cannot be told apart from random**" in text
    assert "| accuracy | 0.500 [0.500, 0.500] |" in text
    assert "| first_shown_share | 1.000 [1.000, 1.000] |" in text
    assert "No usable probabilities: argmax only" in text


def test_card_of_a_good_judge_and_of_an_unvalidated_one() -> None:
    identity = judge_identity("local", "good-judge", TEMPLATE, {"temperature": 0})
    skeleton = both_orders(items())
    verdicts = skeleton.assign(verdict=skeleton["gold"])
    verdicts.loc[verdicts["instance_id"] == "i3", "verdict"] = "A"  # wrong on one item
    cards = cards_of(verdicts, identity)
    text = card_lines(cards, identity["judge_key"])
    assert "cannot be told apart" not in text
    assert "| accuracy | 0.975 [" in text
    other = judge_key("local", "good-judge", TEMPLATE, {"temperature": 1.0})
    missing = card_lines(cards, other)
    assert missing.startswith("**This judge has not been validated**")
    assert other in missing
    figure = accuracy_figure(cards)
    axes = figure.axes[0]
    labels = [tick.get_text() for tick in axes.get_yticklabels()]
    assert labels == [
        "good-judge (argmax) · scripted-40",
        "always_first · scripted-40",
        "always_longer · scripted-40",
        "random · scripted-40",
    ]
    assert len(axes.containers) == 4  # one error bar each
    assert "no judge" in accuracy_figure(cards.iloc[0:0]).axes[0].texts[0].get_text()
