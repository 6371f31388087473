"""A judge that cannot decide costs one row, not the run: `kedro run --pipelines evaluate`
on gold-labelled pairs, its scripted server answering some calls without a verdict,
exits 0 with the unreadable calls counted, both accuracy conventions and a card that says
so (also when no verdict at all could be read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import endpoints_via, kedro_cli, run_kedro_cli
from tests.pipelines.test_evaluate_judge_validation import (
    labelled_pairs,
    metric_values,
    shown,
    write_jsonl,
)


def latest(data_root: Path, name: str) -> pd.DataFrame:
    (path,) = data_root.glob(f"*/{name}.parquet/*/{name}.parquet")
    return pd.read_parquet(path)


def run_evaluate(tmp_path: Path, undecided: Any) -> tuple[pd.DataFrame, str, int]:
    """The evaluate pipeline in a child process on five labelled pairs, the judge answering
    "I cannot decide." where `undecided(question, first shown)` holds, else the first
    response; (eval_metrics, the card, the requests served)."""
    samples = write_jsonl(tmp_path / "pairs.jsonl", labelled_pairs(5))

    def judge(body: dict[str, Any], ctx: RequestContext) -> str:
        question, first, _ = shown(body["messages"][-1]["content"])
        if undecided(question, first):
            return "Both answers have merits. I cannot decide."
        return "The first one.\nVerdict: [[A]]"

    data_root = tmp_path / "data"
    with FakeLLMServer(responder=judge) as server:
        command = kedro_cli(
            data_root,
            server.base_url,
            f"eval_samples_path={samples}",
            "evaluate.mode=pairwise",
            "evaluate.max_reasks=0",
        )
        result = run_kedro_cli(command, "evaluate")
        assert result.returncode == 0
        served = server.request_count
    card = (data_root / "08_reporting" / "eval_judge_card.md").read_text(encoding="utf-8")
    return latest(data_root, "eval_metrics"), card, served


def test_one_call_of_ten_without_a_verdict_is_counted_and_both_conventions_reported(tmp_path):
    # Item 0 (gold A) shown in its original order: the judge cannot decide.
    metrics, card, served = run_evaluate(
        tmp_path, lambda question, first: question == "Question 0?" and first == "answer 0"
    )
    assert served == 10
    judge = metric_values(metrics, "fake~gold")
    assert judge["unreadable_count"] == 1 and judge["unreadable_share"] == pytest.approx(0.1)
    # Always first: right in the original order on the gold-A items 0, 2, 4, item 0 unread.
    assert judge["accuracy_original_order"] == pytest.approx(2 / 5)  # LLMBar: over all items
    assert judge["accuracy_original_order_readable"] == pytest.approx(2 / 4)
    assert judge["accuracy_swapped_order"] == judge["accuracy_swapped_order_readable"] == 0.4
    assert judge["accuracy"] == pytest.approx(0.4)
    assert judge["accuracy_readable"] == pytest.approx(0.45)
    assert judge["positional_agreement"] == 0.0 == judge["positional_agreement_readable"]
    rows = metrics[(metrics["raters"] == "fake~gold") & metrics["category"].isna()]
    readable = rows.set_index("metric").loc["accuracy_original_order_readable"]
    assert (readable["n"], readable["n_missing"]) == (4, 1)  # the unread call left out
    assert (rows.loc[~rows["metric"].str.endswith("_readable"), "n_missing"] == 0).all()
    assert "1 of 10 calls gave no readable verdict" in card
    assert "LLMBar's all-items convention" in card
    assert "Small validation set: 5 items" in card


def test_no_readable_verdict_at_all_still_writes_metrics_and_a_card_that_says_so(tmp_path):
    metrics, card, served = run_evaluate(tmp_path, lambda question, first: True)
    assert served == 10
    judge = metric_values(metrics, "fake~gold")
    assert judge["unreadable_count"] == 10 and judge["unreadable_share"] == 1.0
    assert judge["accuracy"] == 0.0
    assert pd.isna(judge["accuracy_readable"]) and pd.isna(judge["cohen_kappa"])
    assert "**No readable verdict**: all 10 calls" in card


def test_a_baseline_whose_every_verdict_is_unreadable_leaves_the_ranking_empty(run_kedro, tmp_path):
    rows = [
        {"instance_id": f"q{n}", "question": f"Q{n}?", "response": f"{name} on {n}", "model": name}
        for n in range(3)
        for name in ("m1", "m2", "m3")
    ]
    samples = write_jsonl(tmp_path / "native.jsonl", rows)

    def judge(body: dict[str, Any], ctx: RequestContext) -> str:
        if "m3 on" in body["messages"][-1]["content"]:
            return "I cannot decide."
        return "The first one.\nVerdict: [[A]]"

    with FakeLLMServer(responder=judge) as server:
        params = {
            "endpoints": endpoints_via(server, structured_output=False),
            "eval_samples_path": str(samples),
            "evaluate": {"mode": "pairwise", "max_reasks": 0, "ranking": {"baseline": "m3"}},
        }
        run = run_kedro("evaluate", params)
    assert run["catalog"].load("eval_model_ranking").empty
    judgments = run["catalog"].load("eval_judgments")
    assert judgments["outcome"].isna().sum() == 6  # m3's pairs: 2 per instance
    metrics = run["catalog"].load("eval_metrics")
    m3 = metrics[(metrics["model"] == "m3") & (metrics["metric"] == "win_rate")]
    assert (m3["n_missing"] == 6).all()
