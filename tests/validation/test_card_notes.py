"""What a judge card says about its data: unreadable verdicts counted (all, some, none)
and a validation set too small for its intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from llm_feedback.validation.card import card_lines
from llm_feedback.validation.card_notes import SMALL_VALIDATION_SET
from llm_feedback.validation.identity import judge_identity
from llm_feedback.validation.validate import validate_pairwise, validate_pointwise

IDENTITY = judge_identity("local", "judge-model", "template {question}", {"temperature": 0})


def pairwise_card(verdicts: list[object], items: int) -> str:
    samples = pd.DataFrame(
        [
            {"instance_id": f"q{i}", "response": text, "model": model, "gold": "A"}
            for i in range(items)
            for model, text in (("x", "a longer answer"), ("y", "short"))
        ]
    )
    frame = pd.DataFrame(
        [
            {"instance_id": f"q{i}", "order": order, "verdict": verdict}
            for i, verdict in zip(range(items), verdicts, strict=True)
            for order in ("original", "swapped")
        ]
    )
    result = validate_pairwise(
        samples, IDENTITY, "set", created_at="2026-12-05", verdicts=frame, resamples=50
    )
    return card_lines(result.card, IDENTITY["judge_key"])


def test_unreadable_verdicts_are_counted_with_both_conventions() -> None:
    # pd.NA, None and NaN are all unreadable; one item of 40 has neither order readable.
    card = pairwise_card([pd.NA, *["A"] * (SMALL_VALIDATION_SET + 9)], SMALL_VALIDATION_SET + 10)
    assert "2 of 80 calls gave no readable verdict" in card
    assert "accuracy 1.000" in card and "positional_agreement 1.000" in card  # readable only
    assert "| accuracy | 0.975" in card  # LLMBar's, over all items
    assert "Small validation set" not in card


def test_no_readable_verdict_and_a_small_set_are_said() -> None:
    card = pairwise_card([None, np.nan, pd.NA], 3)
    assert "**No readable verdict**: all 6 calls" in card
    assert "**Small validation set: 3 items.**" in card


def test_unread_scores_are_left_out_of_the_pointwise_figures() -> None:
    scores = pd.DataFrame(
        {
            "instance_id": [f"i{n}" for n in range(4)],
            "score": [1.0, np.nan, 3.0, 4.0],
            "gold_score": [1.0, 2.0, 3.0, 4.0],
            "category": [None] * 4,
        }
    )
    card = card_lines(
        validate_pointwise(scores, IDENTITY, "set", created_at="2026-12-05", resamples=50).card,
        IDENTITY["judge_key"],
    )
    assert "1 of 4 calls gave no readable score" in card
    assert "Small validation set: 4 items" in card
