"""How a panel's verdicts combine, row by row, from judgment tables shaped as judge_samples
writes them."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from llm_feedback.evaluation import aggregate_panel
from llm_feedback.params import parse_evaluate
from llm_feedback.storage.schema import EVAL_JUDGMENTS_COLUMN_TYPES

ENDPOINTS = {
    name: {"backend": "openai", "model": name, "base_url": "http://127.0.0.1:9/v1"}
    for name in ("a", "b", "c")
}


def config(mode: str, aggregate: str) -> Any:
    judges = [{"endpoint": name} for name in ENDPOINTS]
    return parse_evaluate(
        {"mode": mode, "panel": {"judges": judges, "aggregate": aggregate}}, ENDPOINTS
    )


def judged(model: str, rows: list[tuple[float | None, str]], mode: str) -> pd.DataFrame:
    """A judge's table: one (score, parse_status) per instance."""
    records = [
        {
            "instance_id": f"q{index}",
            "turn": 1,
            "model": "assistant",
            "replicate": 0,
            "ensemble_member": 0,
            "mode": mode,
            "score": score,
            "parse_status": status,
            "success": score is not None,
            "raw_reply": f"{model} said {score}",
            "judge_model": model,
            "cached": False,
            "error": "HTTP 500" if status == "call_failed" else None,
            "reasks": 1 if status == "no_match" else 0,
        }
        for index, (score, status) in enumerate(rows)
    ]
    columns = list(EVAL_JUDGMENTS_COLUMN_TYPES)
    return pd.DataFrame(records, columns=columns).astype(EVAL_JUDGMENTS_COLUMN_TYPES)


def test_majority_of_binary_verdicts_with_abstentions_and_calls_not_made():
    per_judge = {
        "a": judged(
            "a", [(1, "ok"), (1, "ok"), (1, "exact_match"), (None, "call_failed")], "binary"
        ),
        "b": judged(
            "b",
            [(1, "ok"), (None, "call_failed"), (1, "exact_match"), (None, "call_failed")],
            "binary",
        ),
        "c": judged("c", [(0, "ok"), (0, "ok"), (1, "exact_match"), (None, "no_match")], "binary"),
    }
    panel = aggregate_panel(per_judge, config("binary", "majority"))

    # Two of three say correct; b failed on q1, so a and c split; an exact match needs no
    # judge; nobody answered q3, and the first problem is named.
    assert panel["score"].tolist() == pytest.approx(
        [1.0, float("nan"), 1.0, float("nan")], nan_ok=True
    )
    assert panel["parse_status"].tolist() == ["ok", "split", "exact_match", "call_failed"]
    assert panel["correct"].tolist() == [True, pd.NA, True, pd.NA]
    assert panel["success"].tolist() == [True, False, True, False]
    assert panel["error"].tolist()[1] == "HTTP 500"
    assert panel["reasks"].tolist() == [0, 0, 0, 1]
    assert panel["raw_reply"].isna().all()  # each judge's reply is in its own rows
    assert panel["judge_model"].unique().tolist() == ["a+b+c"]
    assert panel["score_c"].tolist() == pytest.approx([0.0, 0.0, 1.0, float("nan")], nan_ok=True)


def test_the_mean_of_scores_leaves_out_a_judge_without_one():
    per_judge = {
        "a": judged("a", [(8, "ok"), (2, "ok")], "single_1_10"),
        "b": judged("b", [(6, "ok"), (None, "no_match")], "single_1_10"),
        "c": judged("c", [(7, "ok"), (5, "ok")], "single_1_10"),
    }
    panel = aggregate_panel(per_judge, config("single_1_10", "mean"))
    assert panel["score"].tolist() == pytest.approx([7.0, 3.5])
    assert panel["parse_status"].tolist() == ["ok", "ok"]


def test_judges_that_judged_other_rows_are_refused():
    per_judge = {
        "a": judged("a", [(8, "ok"), (2, "ok")], "single_1_10"),
        "b": judged("b", [(6, "ok")], "single_1_10"),
        "c": judged("c", [(7, "ok"), (5, "ok")], "single_1_10"),
    }
    with pytest.raises(RuntimeError, match="judge 'b' judged other rows than 'a'"):
        aggregate_panel(per_judge, config("single_1_10", "mean"))
