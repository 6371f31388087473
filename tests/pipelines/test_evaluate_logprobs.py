"""The evaluate pipeline's probability verdicts, over real HTTP to the project's test server:
the judge's calls ask for top log-probabilities, a judge with scripted probabilities gets
exactly the hand-computed P(A) - P(B), expected scores and calibrated accuracy, a judge
without them falls back to the argmax (and its card says so), and a cached rerun makes no
call and gives the same values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext
from tests.conftest import endpoints_via
from tests.pipelines.test_evaluate_judge_validation import shown

# The scripted judge writes "[[A]]" (the first shown) every time; its token probabilities
# know better: P(first, second, tie) is GOLD_FIRST when the better response is shown
# first, GOLD_SECOND when it is shown second.
GOLD_FIRST = {"A": 0.7, "B": 0.2, "C": 0.1}
GOLD_SECOND = {"A": 0.45, "B": 0.4, "C": 0.15}


def pairs(count: int = 4) -> list[dict[str, Any]]:
    """Our JSONL pairs, gold A on even items and B on odd ones."""
    rows = []
    for number in range(count):
        good, bad = f"a good answer {number}", f"a poor answer {number}"
        gold = "A" if number % 2 == 0 else "B"
        first, second = (good, bad) if gold == "A" else (bad, good)
        rows.append(
            {
                "instance_id": f"item-{number}",
                "question": f"Question {number}?",
                "response_a": first,
                "response_b": second,
                "label": gold,
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def first_shown_judge(probabilities: bool):
    def respond(body: dict[str, Any], ctx: RequestContext) -> Reply:
        _, first, _ = shown(body["messages"][-1]["content"])
        scripted = GOLD_FIRST if "good" in first else GOLD_SECOND
        return Reply(
            "The first one.\nVerdict: [[A]]", probabilities=scripted if probabilities else None
        )

    return respond


def params(server: FakeLLMServer, samples: Path, **evaluate: Any) -> dict[str, Any]:
    return {
        "endpoints": endpoints_via(server, max_concurrent=4, structured_output=False),
        "eval_samples_path": str(samples),
        "evaluate": {"mode": "pairwise", **evaluate},
    }


def card_values(cards: pd.DataFrame, source: str) -> dict[str, float]:
    rows = cards[
        (cards["kind"] == "judge") & cards["category"].isna() & (cards["verdict_source"] == source)
    ]
    return dict(zip(rows["metric"], rows["value"], strict=True))


def test_scripted_probabilities_give_the_hand_computed_verdicts_and_a_rerun_the_same(
    run_kedro, tmp_path
):
    samples = write_jsonl(tmp_path / "pairs.jsonl", pairs())
    with FakeLLMServer(responder=first_shown_judge(probabilities=True)) as server:
        run = run_kedro("evaluate", params(server, samples))
        assert server.request_count == 8
        bodies = server.requests
        assert all(body["logprobs"] is True and body["top_logprobs"] == 5 for body in bodies)
        catalog = run["catalog"]
        judgments = catalog.load("eval_judgments").sort_values("instance_id")
        cards = catalog.load("judge_validation")
        card = catalog.load("eval_judge_card")

        rerun = run_kedro("evaluate", params(server, samples))
        assert server.request_count == 8  # every call from the request cache
        again = rerun["catalog"].load("eval_judgments").sort_values("instance_id")
        assert again["cached"].all()
        columns = ["prob_margin_a_first", "prob_margin_b_first", "p_tie_a_first", "prob_margin"]
        pd.testing.assert_frame_equal(
            again[columns].reset_index(drop=True), judgments[columns].reset_index(drop=True)
        )
        reread = rerun["catalog"].load("judge_validation")
        for source in ("logprobs", "logprobs_calibrated"):
            assert card_values(reread, source) == pytest.approx(
                card_values(cards, source), nan_ok=True
            )

    # By hand: gold A items show the better response first in the A-first call.
    gold_a = judgments["instance_id"].isin(["item-0", "item-2"]).to_numpy()
    assert judgments["logprobs_usable"].all()
    a_first = [0.7 - 0.2 if is_a else 0.45 - 0.4 for is_a in gold_a]
    b_first = [0.4 - 0.45 if is_a else 0.2 - 0.7 for is_a in gold_a]
    assert judgments["prob_margin_a_first"].tolist() == pytest.approx(a_first)
    assert judgments["prob_margin_b_first"].tolist() == pytest.approx(b_first)
    assert judgments["p_tie_a_first"].tolist() == pytest.approx([0.1, 0.15, 0.1, 0.15])
    assert judgments["prob_margin"].tolist() == pytest.approx([0.225, -0.225, 0.225, -0.225])

    argmax = card_values(cards, "argmax")
    weighted = card_values(cards, "logprobs")
    calibrated = card_values(cards, "logprobs_calibrated")
    assert argmax["accuracy"] == 0.5  # "[[A]]" every time: always the first shown
    # Expected accuracy: P(gold) is 0.7 when the gold is shown first, 0.4 when second.
    assert weighted["accuracy"] == pytest.approx((0.7 + 0.4) / 2)
    assert weighted["accuracy_original_order"] == pytest.approx(0.55)
    # The first-position bias b = mean(P(first) - P(second)) = (0.5 + 0.05) / 2 = 0.275;
    # margins less b are +0.225 (gold first) and -0.225 (gold second): always the gold.
    bias = cards.loc[cards["kind"] == "judge", "position_bias"].iloc[0]
    assert bias == pytest.approx(0.275)
    assert calibrated["accuracy"] == 1.0 and calibrated["positional_agreement"] == 1.0
    assert (cards.loc[cards["kind"] == "judge", "usable_probability_share"] == 1.0).all()
    assert "Token probabilities usable on 100% of calls" in card
    assert "+0.275" in card


def test_a_judge_without_probabilities_falls_back_to_the_argmax_and_says_so(run_kedro, tmp_path):
    samples = write_jsonl(tmp_path / "pairs.jsonl", pairs())
    with FakeLLMServer(responder=first_shown_judge(probabilities=False)) as server:
        run = run_kedro("evaluate", params(server, samples))
        assert all(body["logprobs"] is True for body in server.requests)  # asked, none came
    judgments = run["catalog"].load("eval_judgments")
    assert not judgments["logprobs_usable"].any()
    assert judgments["prob_margin"].isna().all()
    cards = run["catalog"].load("judge_validation")
    assert set(cards.loc[cards["kind"] == "judge", "verdict_source"]) == {"argmax"}
    assert card_values(cards, "argmax")["accuracy"] == 0.5
    assert "No usable probabilities: argmax only" in run["catalog"].load("eval_judge_card")


def test_judge_logprobs_false_asks_for_none_and_true_needs_a_backend_that_gives_them(
    run_kedro, tmp_path
):
    samples = write_jsonl(tmp_path / "pairs.jsonl", pairs(2))
    with FakeLLMServer(responder=first_shown_judge(probabilities=True)) as server:
        run_kedro("evaluate", params(server, samples, judge_logprobs=False))
        assert server.request_count == 4
        assert not any("logprobs" in body for body in server.requests)
        reasoning = params(server, samples, judge_logprobs=True)
        reasoning["endpoints"]["local"]["model"] = "o3-mini"
        with pytest.raises(ConfigError, match="judge_logprobs: true, but endpoint 'local'"):
            run_kedro("evaluate", reasoning)
        assert server.request_count == 4  # refused before any call


def test_a_rating_judge_gets_its_expected_score_validated_beside_the_argmax(run_kedro, tmp_path):
    rows = [
        {
            "instance_id": f"q{number}",
            "question": f"Question {number}?",
            "response": f"answer {number}",
            "model": "m",
            "recorded_score": gold,
        }
        for number, gold in enumerate([7.0, 8.0, 6.0])
    ]
    samples = write_jsonl(tmp_path / "rated.jsonl", rows)

    def rate(body: dict[str, Any], ctx: RequestContext) -> Reply:
        return Reply("Fair enough. Rating: [[7]]", probabilities={"7": 0.5, "8": 0.3, "6": 0.2})

    with FakeLLMServer(responder=rate) as server:
        run = run_kedro(
            "evaluate", params(server, samples, mode="single_1_10", samples_format="native")
        )
        assert server.requests[0]["top_logprobs"] == 5
    judgments = run["catalog"].load("eval_judgments")
    expected = 7 * 0.5 + 8 * 0.3 + 6 * 0.2
    assert judgments["expected_score"].tolist() == pytest.approx([expected] * 3)
    assert judgments["score"].tolist() == [7.0] * 3
    cards = run["catalog"].load("judge_validation")
    assert card_values(cards, "argmax")["mean_difference"] == pytest.approx(0.0)
    assert card_values(cards, "logprobs")["mean_difference"] == pytest.approx(expected - 7.0)
