"""The evaluate pipeline validates its judge on gold-labelled samples: LLMBar's published
GPT-4 numbers replayed exactly, a judge of known bias, the card in the outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.replies.fencing import neutralise
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext
from tests.conftest import SHARED_DATA, endpoints_via

LLMBAR = SHARED_DATA / "llmbar" / "natural"
_BLOCK = re.compile(
    r"<<<(?P<name>[A-Z ]+) BEGIN (?P<nonce>\w+)>>>\n(?P<text>.*?)\n?<<<(?P=name) END", re.DOTALL
)
_PUBLISHED_VANILLA = {
    "accuracy_original_order": 0.95,
    "accuracy_swapped_order": 0.96,
    "accuracy": 0.955,
    "accuracy_both_orders": 0.93,
    "positional_agreement": 0.95,
}


def shown(prompt: str) -> tuple[str, str, str]:
    """(question, response shown first, response shown second) of a pairwise prompt."""
    blocks = {match["name"]: match["text"] for match in _BLOCK.finditer(prompt)}
    return blocks["QUESTION"], blocks["RESPONSE A"], blocks["RESPONSE B"]


class RecordedPairwiseJudge:
    """Answers each pairwise prompt with the recorded winner of its item in the order shown
    (`winners[item][swapped]`: 1 or 2, naming the item's original output), in our reply
    format; `items` are LLMBar's (input, output_1, output_2)."""

    def __init__(self, items: list[dict[str, Any]], winners: list[tuple[int | None, ...]]):
        self.winners = winners
        self.by_prompt: dict[tuple[str, str, str], tuple[int, bool]] = {}
        for number, item in enumerate(items):
            question = neutralise(item["input"])
            first, second = neutralise(item["output_1"]), neutralise(item["output_2"])
            self.by_prompt[(question, first, second)] = (number, False)
            self.by_prompt[(question, second, first)] = (number, True)
        self.served: list[tuple[int, bool]] = []

    def __call__(self, body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        found = self.by_prompt.get(shown(body["messages"][-1]["content"]))
        if found is None:
            return Reply(status=400, error_message="no recorded item shows these texts")
        self.served.append(found)
        number, swapped = found
        winner = self.winners[number][swapped]
        if winner is None:
            return "I cannot decide."
        first_won = (winner == 1) != swapped
        return f"Recorded verdict.\nVerdict: [[{'A' if first_won else 'B'}]]"


def gpt4_vanilla_winners() -> list[tuple[int | None, int | None]]:
    results = json.loads((LLMBAR / "gpt-4" / "vanilla" / "result.json").read_text("utf-8"))
    winners = []
    for item in results:
        first_round = item["results"][0]
        winners.append(
            tuple(
                {"1": 1, "2": 2}.get(first_round[key]["winner"])
                for key in ("swap = False", "swap = True")
            )
        )
    return winners


def llmbar_params(server: FakeLLMServer, dataset: Path, **evaluate: Any) -> dict[str, Any]:
    return {
        "endpoints": endpoints_via(server, max_concurrent=8, structured_output=False),
        "eval_samples_path": str(dataset),
        "evaluate": {"mode": "pairwise", **evaluate},
    }


def metric_values(metrics: pd.DataFrame, raters: str) -> dict[str, float]:
    rows = metrics[(metrics["raters"] == raters) & metrics["category"].isna()]
    return dict(zip(rows["metric"], rows["value"], strict=True))


@pytest.mark.skipif(not LLMBAR.is_dir(), reason="../shared/data/llmbar is not here")
def test_gpt4_vanilla_verdicts_replayed_give_llmbars_published_numbers(run_kedro):
    items = json.loads((LLMBAR / "dataset.json").read_text("utf-8"))
    judge = RecordedPairwiseJudge(items, gpt4_vanilla_winners())
    with FakeLLMServer(responder=judge) as server:
        run = run_kedro("evaluate", llmbar_params(server, LLMBAR / "dataset.json"))
    assert len(judge.served) == 200 and len(set(judge.served)) == 200  # each item, both orders
    catalog = run["catalog"]
    judgments = catalog.load("eval_judgments")
    assert len(judgments) == 100
    assert judgments["gold"].notna().all() and (judgments["model_a"] == "output_1").all()
    metrics = catalog.load("eval_metrics")
    measured = metric_values(metrics, "fake-model~gold")
    for metric, published in _PUBLISHED_VANILLA.items():
        assert measured[metric] == pytest.approx(published, abs=1e-12), metric
    row = metrics[(metrics["raters"] == "fake-model~gold") & (metrics["metric"] == "accuracy")]
    assert row["ci_low"].iloc[0] < 0.955 < row["ci_high"].iloc[0]
    assert "bootstrap" in row["ci_method"].iloc[0]
    cards = catalog.load("judge_validation")
    judged = cards[(cards["kind"] == "judge") & cards["category"].isna()]
    card_values = dict(zip(judged["metric"], judged["value"], strict=True))
    for metric, published in _PUBLISHED_VANILLA.items():
        assert card_values[metric] == pytest.approx(published, abs=1e-12), metric
    assert set(cards.loc[cards["kind"] == "baseline", "judge"]) == {
        "always_first",
        "always_longer",
        "random",
    }
    assert (cards["validation_set"] == "natural/dataset.json").all()
    card = catalog.load("eval_judge_card")
    assert "Judge card: fake-model" in card and "0.955" in card
