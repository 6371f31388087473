"""Verdicts from top log-probabilities, on hand-made OpenAI-format structures."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from llm_feedback.validation.logprobs import (
    calibrated_verdicts,
    cross_fitted_bias,
    logprob_content,
    order_averaged_verdicts,
    pairwise_verdict,
    position_bias,
    probability_verdicts,
    rating_verdict,
    verdict_position,
)
from llm_feedback.validation.metrics import metric_value, pairwise_metrics


def entry(token: str, alternatives: dict[str, float]) -> dict:
    return {
        "token": token,
        "logprob": math.log(alternatives.get(token, 0.5)),
        "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alternatives.items()],
    }


def completion(content: list[dict]) -> dict:
    return {"choices": [{"message": {"content": "..."}, "logprobs": {"content": content}}]}


def plain(*tokens: str) -> list[dict]:
    return [entry(token, {token: 1.0}) for token in tokens]


def test_expected_score_over_rating_tokens() -> None:
    content = [
        *plain("Rating", ":", " [["),
        entry("7", {"7": 0.5, "8": 0.3, "x": 0.1}),
        *plain("]]"),
    ]
    result = rating_verdict(logprob_content(completion(content)), range(1, 11), 7)
    assert result["source"] == "logprobs"
    assert result["expected_score"] == pytest.approx((7 * 0.5 + 8 * 0.3) / 0.8)
    assert result["coverage"] == pytest.approx(0.8)
    assert result["argmax_score"] == 7


def test_split_rating_and_missing_logprobs_fall_back_to_argmax() -> None:
    split = [*plain("[["), entry("1", {"1": 0.9, "2": 0.1}), *plain("0", "]]")]
    result = rating_verdict(split, range(1, 11), 10)
    assert (result["source"], result["expected_score"]) == ("argmax", 10)
    assert result["fallback_reason"] == "no verdict token"
    assert logprob_content({"choices": [{"message": {"content": "[[7]]"}}]}) is None
    assert rating_verdict(None, range(1, 11), 7)["fallback_reason"] == "no logprobs"
    no_label = [*plain("[["), entry("7", {"seven": 0.9}), *plain("]]")]
    # The chosen token is a label but none of the top alternatives is.
    no_label[1]["top_logprobs"] = [{"token": "seven", "logprob": math.log(0.9)}]
    assert (
        rating_verdict(no_label, range(1, 11), 7)["fallback_reason"] == "no label in top logprobs"
    )


def test_pairwise_probabilities_and_last_label_position() -> None:
    content = [
        *plain("Output", " A", " is", " short", ".", " Verdict", ":", " [["),
        entry("B", {"B": 0.6, "A": 0.3, " A": 0.1}),
        *plain("]]"),
    ]
    assert verdict_position(content, ["A", "B"]) == 8  # not the "A" of "Output A"
    result = pairwise_verdict(content, "second")
    assert result["p_first"] == pytest.approx(0.4) and result["p_second"] == pytest.approx(0.6)
    assert result["margin"] == pytest.approx(-0.2)
    assert result["source"] == "logprobs" and result["argmax_verdict"] == "second"
    with_tie = pairwise_verdict([entry("C", {"A": 0.2, "B": 0.2, "C": 0.6})], "tie", tie_label="C")
    assert with_tie["p_tie"] == pytest.approx(0.6)
    fallback = pairwise_verdict(None, "first")
    assert (fallback["p_first"], fallback["source"]) == (1.0, "argmax")
    unreadable = pairwise_verdict(None, None)
    assert math.isnan(unreadable["p_first"]) and unreadable["fallback_reason"] == "no logprobs"


def biased_calls() -> pd.DataFrame:
    """Four items; the judge adds +0.3 to whichever response it sees first. Its true
    preference for A (original labels) is d = 0.4, -0.2, 0.1, -0.5."""
    rows = []
    for number, d in enumerate([0.4, -0.2, 0.1, -0.5]):
        for order, shown_margin in (("original", d + 0.3), ("swapped", -d + 0.3)):
            p_first = (1 + shown_margin) / 2
            argmax = "first" if shown_margin > 0 else "second"
            rows.append(
                {
                    "instance_id": f"i{number}",
                    "order": order,
                    "p_first": p_first,
                    "p_second": 1 - p_first,
                    "p_tie": 0.0,
                    "margin": shown_margin,
                    "argmax_verdict": argmax,
                    "source": "logprobs",
                    "gold": "A" if d > 0 else "B",
                    "len_a": 1,
                    "len_b": 2,
                    "category": None,
                }
            )
    return pd.DataFrame(rows)


def test_position_bias_measured_and_removed() -> None:
    calls = biased_calls()
    bias, items = position_bias(calls)
    assert bias == pytest.approx(0.3) and items == 4
    calibrated = calibrated_verdicts(calls, bias)
    original = calibrated[calibrated["order"] == "original"]
    swapped = calibrated[calibrated["order"] == "swapped"]
    assert original["calibrated_margin"].tolist() == pytest.approx([0.4, -0.2, 0.1, -0.5])
    assert swapped["calibrated_margin"].tolist() == pytest.approx([0.4, -0.2, 0.1, -0.5])
    assert calibrated["verdict"].tolist() == ["A", "A", "B", "B", "A", "A", "B", "B"]
    # The argmax verdicts follow the bias (item i1 and i2 flip with the order): accuracy 0.75.
    argmax = calibrated.assign(
        verdict=[
            "A" if (a == "first") == (o == "original") else "B"
            for a, o in zip(calls["argmax_verdict"], calls["order"], strict=True)
        ]
    )
    assert metric_value(pairwise_metrics(argmax, resamples=50), "positional_agreement") == 0.5
    assert metric_value(pairwise_metrics(calibrated, resamples=50), "accuracy") == 1.0
    averaged = order_averaged_verdicts(calls)
    assert averaged["verdict"].tolist() == calibrated["verdict"].tolist()
    weighted = probability_verdicts(calls)
    swapped_i0 = weighted.iloc[1]  # B shown first with P 0.45, so P(A) = 0.55
    assert (swapped_i0["p_a"], swapped_i0["p_b"]) == pytest.approx((0.55, 0.45))
    assert metric_value(pairwise_metrics(weighted, resamples=50), "accuracy") == pytest.approx(
        sum(
            (1 + m) / 2 if o == "original" else (1 - m) / 2
            for m, o, g in zip(calls["margin"], calls["order"], calls["gold"], strict=True)
            if g == "A"
        )
        / 8
        + sum(
            (1 - m) / 2 if o == "original" else (1 + m) / 2
            for m, o, g in zip(calls["margin"], calls["order"], calls["gold"], strict=True)
            if g == "B"
        )
        / 8
    )


def test_calls_without_probabilities_keep_the_argmax_verdict() -> None:
    calls = biased_calls()
    calls.loc[0, ["source", "margin"]] = ["argmax", float("nan")]
    bias, items = position_bias(calls)
    assert items == 3  # i0 has one usable order only
    calibrated = calibrated_verdicts(calls, bias)
    assert calibrated.loc[0, "verdict"] == "A"  # its argmax: first shown in the original order
    assert math.isnan(calibrated.loc[0, "calibrated_margin"])


def test_the_calibration_an_item_gets_is_measured_on_the_other_items_only() -> None:
    calls = biased_calls()
    # Item i1 alone leans much harder to the first position (+0.9 instead of +0.3): the
    # bias it is calibrated with is the others' 0.3 all the same, while the others' moves.
    leaning = calls.assign(margin=calls["margin"] + (calls["instance_id"] == "i1") * 0.6)
    applied = cross_fitted_bias(leaning)
    by_item = dict(zip(leaning["instance_id"], applied, strict=True))
    assert by_item["i1"] == pytest.approx(0.3)
    assert by_item["i0"] == pytest.approx((0.3 * 4 + 0.9 * 2) / 6)
    assert position_bias(leaning)[0] == pytest.approx((0.3 * 6 + 0.9 * 2) / 8)  # in-sample
    # i1's own rows (2 and 3) get the same bias with or without its lean, whatever its gold.
    unchanged = cross_fitted_bias(calls)[2:4].tolist()
    assert cross_fitted_bias(leaning.assign(gold="tie"))[2:4].tolist() == pytest.approx(unchanged)
    calibrated = calibrated_verdicts(leaning, applied)
    i1 = calibrated[calibrated["instance_id"] == "i1"]
    assert i1["calibrated_margin"].tolist() == pytest.approx([-0.2 + 0.6, -0.2 - 0.6])
    # With one instance only there is nothing to measure on: no calibration.
    single = calls[calls["instance_id"] == "i0"]
    assert cross_fitted_bias(single).tolist() == [0.0, 0.0]
