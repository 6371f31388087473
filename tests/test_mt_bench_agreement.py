"""Agreement with the real GPT-4 MT-Bench judgments, given as `recorded_score`.

A panel of two judges runs the evaluate pipeline on the 330 recorded judgments: `gpt4`
replays GPT-4's own judgment of each request (see test_mt_bench_replay.py), `verbose` is a
scripted judge that rates longer conversations higher. The recording must agree perfectly
with the replay, and with the verbose judge exactly as the ranks of the two say.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import endpoints_via
from tests.test_mt_bench_replay import RecordedJudge, eval_samples, mt_bench  # noqa: F401

ANSWERED = 326  # 330 judgments, four of which are GPT-4's failed `$ERROR$` calls


def verbosity_judge(body: dict[str, Any], ctx: RequestContext) -> str:
    """1 for a short prompt, one more per 600 characters, at most 10."""
    return f"Rating: [[{min(10, 1 + len(body['messages'][-1]['content']) // 600)}]]"


def recorded_scores(judgments: list[dict[str, Any]]) -> dict[tuple[str, int, int], list]:
    """GPT-4's scores per (model, question, turn), replicates in the order they were made;
    -1 (a failed call) is no score."""
    scores: dict[tuple[str, int, int], list] = defaultdict(list)
    for row in sorted(judgments, key=lambda row: row["tstamp"]):
        key = (row["model"], row["question_id"], row["turn"])
        scores[key].append(None if row["score"] == -1 else row["score"])
    return scores


def test_agreement_with_recorded_gpt4_judgments(mt_bench, run_kedro, tmp_path):  # noqa: F811
    recorded = recorded_scores(mt_bench["judgments"])
    rows = eval_samples(mt_bench)
    for row in rows:
        turn = 2 if "prior_question" in row else 1
        key = (row["model"], int(row["instance_id"]), turn)
        row["recorded_score"] = recorded[key][row["replicate"]]
    samples_path = tmp_path / "mt_bench_recorded.jsonl"
    samples_path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    responder = RecordedJudge(mt_bench["questions"], mt_bench["answers"], mt_bench["judgments"])
    with FakeLLMServer(responder) as replay, FakeLLMServer(verbosity_judge) as verbose:
        endpoints = {
            # One call at a time: the replicates of an answer meet their judgments in order.
            "gpt4": endpoints_via(replay, structured_output=False, max_concurrent=1)["local"],
            "verbose": endpoints_via(verbose, structured_output=False)["local"],
        }
        params = {
            "endpoints": endpoints,
            "eval_samples_path": str(samples_path),
            "evaluate": {
                "mode": "single_1_10",
                "missing": "exclude",
                "max_reasks": 0,  # the recording has one judgment per request
                "panel": {
                    "judges": [{"endpoint": "gpt4"}, {"endpoint": "verbose"}],
                    "aggregate": "mean",
                },
            },
        }
        catalog = run_kedro("evaluate", params)["catalog"]
        # 330, and the samples suspected of injection once more each (without the spans).
        assert replay.request_count == verbose.request_count == 330 + responder.variants
    judgments, metrics = catalog.load("eval_judgments"), catalog.load("eval_metrics")
    found = {
        (row.raters, row.metric): (row.value, row.n)
        for row in metrics[metrics["raters"].notna()].itertuples()
    }

    assert int(judgments["recorded_score"].notna().sum()) == ANSWERED
    # Our parser reads every recorded judgment as GPT-4 scored it.
    assert found[("recorded~gpt4", "spearman")] == (pytest.approx(1.0), ANSWERED)
    assert found[("recorded~gpt4", "exact_match_share")] == (pytest.approx(1.0), ANSWERED)

    both = judgments.dropna(subset=["recorded_score"])
    ranks = both["recorded_score"].rank()
    expected = ranks.corr(both["score_verbose"].rank())  # Pearson's r of the ranks
    assert found[("recorded~verbose", "spearman")] == (pytest.approx(expected), ANSWERED)
    assert found[("gpt4~verbose", "spearman")] == (pytest.approx(expected), ANSWERED)
    panel_expected = ranks.corr(both["score"].rank())
    assert found[("recorded~panel", "spearman")] == (pytest.approx(panel_expected), ANSWERED)
    share = (both["score_verbose"] == both["recorded_score"]).mean()
    assert found[("recorded~verbose", "exact_match_share")] == (pytest.approx(share), ANSWERED)
