"""Panels of judges in the evaluate pipeline, over real HTTP to the project's server, and the
agreement rows of eval_metrics."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError, EndpointError, InputError
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext, schema_responder
from tests.conftest import documentation_section, endpoints_via, kedro_cli, run_kedro_cli

ITEMS = [f"item-{number:02d}" for number in range(1, 11)]
# Judge a calls items 1-6 correct, judge b items 1-4, 7 and 8.
SAYS_CORRECT = {
    "judge-a": set(ITEMS[:6]),
    "judge-b": set(ITEMS[:4]) | set(ITEMS[6:8]),
}


def judge_endpoints(server: FakeLLMServer, *models: str) -> dict[str, Any]:
    """One endpoint per judge model (named after it, '-' -> '_'), all on `server`."""
    base = endpoints_via(server, structured_output=False)["local"]
    return {model.replace("-", "_"): {**base, "model": model} for model in models}


def scripted_verdicts(body: dict[str, Any], ctx: RequestContext) -> str:
    """Each judge's fixed verdict on the item named in the question."""
    item = re.search(r"item-\d\d", body["messages"][-1]["content"]).group(0)
    return "1" if item in SAYS_CORRECT[body["model"]] else "0"


def per_judge_schema_replies(body: dict[str, Any], ctx: RequestContext) -> str:
    """Valid JSON for the request's schema, drawn differently for each judge model."""
    key = hashlib.sha256(f"{body['model']}|{ctx.messages_key}".encode()).hexdigest()
    return schema_responder(body, dataclasses.replace(ctx, messages_key=key))


def write_samples(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def binary_samples(tmp_path: Path) -> str:
    rows = [
        {
            "instance_id": item,
            "question": f"What is the answer to {item}?",
            "response": f"My answer to {item}.",
            "reference": f"The reference of {item}.",
            "model": "assistant",
            # A recording that agrees with judge a everywhere.
            "recorded_score": int(item in SAYS_CORRECT["judge-a"]),
        }
        for item in ITEMS
    ]
    return write_samples(tmp_path / "items.jsonl", rows)


def agreement(metrics: pd.DataFrame) -> dict[tuple[str, str], tuple[float, int]]:
    rows = metrics[metrics["raters"].notna()]
    return {
        (row.raters, row.metric): (row.value, row.n)
        for row in rows.itertuples()
        if pd.isna(row.criterion)
    }


def test_two_scripted_judges_disagree_and_kappa_is_the_hand_computed_value(run_kedro, tmp_path):
    with FakeLLMServer(scripted_verdicts) as server:
        params = {
            "endpoints": judge_endpoints(server, "judge-a", "judge-b"),
            "eval_samples_path": binary_samples(tmp_path),
            "evaluate": {
                "mode": "binary",
                "binary_reply": "0/1",
                "panel": {
                    "judges": [{"endpoint": "judge_a"}, {"endpoint": "judge_b"}],
                    "aggregate": "majority",
                },
            },
        }
        catalog = run_kedro("evaluate", params)["catalog"]
        asked = Counter(body["model"] for body in server.requests)
    assert asked == {"judge-a": 10, "judge-b": 10}  # every judge judged every item
    judgments = catalog.load("eval_judgments").set_index("instance_id")
    metrics = catalog.load("eval_metrics")
    per_judge = catalog.load("eval_panel_judgments")

    # Each judge's verdict is kept, in a column of the panel's table and in its own rows.
    assert judgments["score_judge_a"].tolist() == [1.0] * 6 + [0.0] * 4
    assert judgments["score_judge_b"].tolist() == [1.0] * 4 + [0.0] * 2 + [1.0] * 2 + [0.0] * 2
    assert len(per_judge) == 20 and set(per_judge["judge"]) == {"judge_a", "judge_b"}
    assert per_judge["raw_reply"].isin(["0", "1"]).all()
    assert set(per_judge["judge_model"]) == {"judge-a", "judge-b"}

    # Majority of two: items 1-4 and 9-10 agree; items 5-8 split and have no verdict.
    split = judgments.index[judgments["parse_status"] == "split"].tolist()
    assert split == ITEMS[4:8]
    assert (
        judgments.loc[ITEMS[:4], "correct"].all() and not judgments.loc[ITEMS[8:], "correct"].any()
    )
    assert judgments.loc[split, "score"].isna().all()
    assert (judgments["judge_model"] == "judge-a+judge-b").all()

    # Cohen's kappa of the judges, by hand. Of 10 items:
    #   both say correct: items 1-4 (4)    a only: items 5, 6 (2)
    #   b only: items 7, 8 (2)             neither: items 9, 10 (2)
    # observed agreement p_o = (4 + 2) / 10 = 0.6
    # each judge says correct 6 times in 10: chance agreement p_e = 0.6^2 + 0.4^2 = 0.52
    # kappa = (p_o - p_e) / (1 - p_e) = 0.08 / 0.48 = 1/6
    found = agreement(metrics)
    assert found[("judge_a~judge_b", "cohen_kappa")] == (pytest.approx(1 / 6), 10)
    assert found[("judge_a~judge_b", "exact_match_share")] == (pytest.approx(0.6), 10)
    # The recording equals judge a: kappa 1 with a, 1/6 with b; the panel's six verdicts
    # (the items both judges agreed on) all match it.
    assert found[("recorded~judge_a", "cohen_kappa")] == (pytest.approx(1.0), 10)
    assert found[("recorded~judge_b", "cohen_kappa")] == (pytest.approx(1 / 6), 10)
    assert found[("recorded~panel", "exact_match_share")] == (pytest.approx(1.0), 6)
    panel_rows = metrics[metrics["raters"] == "recorded~panel"]
    assert (panel_rows["n_missing"] == 4).all()  # the four split items
    assert metrics.loc[metrics["raters"].notna(), "model"].isna().all()  # over all models


def test_a_mean_panel_of_scores_and_its_spearman(run_kedro, tmp_path):
    with FakeLLMServer(per_judge_schema_replies) as server:
        endpoints = judge_endpoints(server, "judge-a", "judge-b")
        for endpoint in endpoints.values():
            endpoint["structured_output"] = True
        params = {
            "endpoints": endpoints,
            "evaluate": {
                "mode": "single_1_10",
                "panel": {
                    "judges": {"a": {"endpoint": "judge_a"}, "b": {"endpoint": "judge_b"}},
                    "aggregate": "mean",
                },
            },
        }
        catalog = run_kedro("evaluate", params)["catalog"]
    judgments, metrics = catalog.load("eval_judgments"), catalog.load("eval_metrics")
    assert len(judgments) == 48 and judgments["success"].all()
    assert judgments["score_a"].ne(judgments["score_b"]).any()  # the judges differ
    assert judgments["score"].tolist() == pytest.approx(
        ((judgments["score_a"] + judgments["score_b"]) / 2).tolist()
    )
    found = agreement(metrics)
    # Spearman's rho is Pearson's r of the ranks (pandas' own method="spearman" needs scipy).
    expected = judgments["score_a"].rank().corr(judgments["score_b"].rank())
    assert found[("a~b", "spearman")] == (pytest.approx(expected), 48)
    share = (judgments["score_a"] == judgments["score_b"]).mean()
    assert found[("a~b", "exact_match_share")] == (pytest.approx(share), 48)
    # The usual metrics are the panel's.
    means = metrics[(metrics["metric"] == "mean") & metrics["raters"].isna()].set_index("model")
    by_model = judgments.groupby("model")["score"].mean()
    assert means["value"].to_dict() == pytest.approx(by_model.to_dict())


def test_three_judges_in_pairwise_mode_get_fleiss_kappa_and_a_majority(run_kedro):
    with FakeLLMServer(per_judge_schema_replies) as server:
        endpoints = judge_endpoints(server, "judge-a", "judge-b", "judge-c")
        for endpoint in endpoints.values():
            endpoint["structured_output"] = True
        names = [{"endpoint": name} for name in endpoints]
        params = {
            "endpoints": endpoints,
            "evaluate": {"mode": "pairwise", "panel": {"judges": names, "aggregate": "majority"}},
        }
        catalog = run_kedro("evaluate", params)["catalog"]
        assert server.request_count == 3 * 24 * 2  # three judges, 24 pairs, both orders
    judgments, metrics = catalog.load("eval_judgments"), catalog.load("eval_metrics")
    outcomes = judgments[["outcome_judge_a", "outcome_judge_b", "outcome_judge_c"]]
    for row, votes in zip(judgments.itertuples(), outcomes.itertuples(index=False), strict=True):
        ranked = Counter(vote for vote in votes if pd.notna(vote)).most_common()
        if len(ranked) == 1 or ranked[0][1] > ranked[1][1]:
            assert row.outcome == ranked[0][0]
        else:  # e.g. A, B and tie: no majority
            assert pd.isna(row.outcome) and row.parse_status == "split"
    found = agreement(metrics)
    fleiss, n = found[("judge_a~judge_b~judge_c", "fleiss_kappa")]
    assert n == int(outcomes.notna().all(axis=1).sum()) and -1.0 <= fleiss <= 1.0
    assert ("judge_a~judge_c", "cohen_kappa") in found
    assert set(metrics.loc[metrics["metric"] == "win_rate", "model"]) == {
        "assistant-a",
        "assistant-b",
    }


@pytest.mark.parametrize(
    ("evaluate", "message"),
    [
        (
            {"judge": {"endpoint": "judge_a"}, "panel": {"judges": [], "aggregate": "mean"}},
            "evaluate.judge and evaluate.panel are both set",
        ),
        (
            {"panel": {"judges": [{"endpoint": "judge_a"}], "aggregate": "mean"}},
            "evaluate.panel.judges: a panel needs two judges or more, got 1",
        ),
        (
            {
                "panel": {
                    "judges": [{"endpoint": "judge_a"}, {"endpoint": "judge_a", "name": "again"}],
                    "aggregate": "mean",
                }
            },
            r"evaluate.panel.judges\[1\]: the same endpoint and settings as judge 'judge_a'",
        ),
        (
            {
                "panel": {
                    "judges": [{"endpoint": "judge_a"}, {"endpoint": "judge_b"}],
                    "aggregate": "median",
                }
            },
            "evaluate.panel.aggregate must be one of mean, majority, got 'median'",
        ),
        (
            {
                "mode": "binary",
                "panel": {
                    "judges": [{"endpoint": "judge_a"}, {"endpoint": "judge_b"}],
                    "aggregate": "mean",
                },
            },
            "the mean of binary verdicts is not a verdict",
        ),
        (
            {"panel": {"judges": {"panel": {"endpoint": "judge_a"}}, "aggregate": "mean"}},
            "evaluate.panel.judges.panel.name: 'panel' is reserved",
        ),
        (
            {"panel": {"judges": [{"endpoint": "judge_a", "weight": 2}], "aggregate": "mean"}},
            r"evaluate.panel.judges\[0\].weight: unknown setting",
        ),
        (
            {
                "panel": {
                    "judges": [{"endpoint": "judge_a"}, {"endpoint": {"backend": "openai"}}],
                    "aggregate": "mean",
                }
            },
            r"evaluate.panel.judges\[1\].name: an inline endpoint has no name",
        ),
        (
            {"panel": {"judges": [{"endpoint": "judge_a"}, {"endpoint": "judge_b"}]}},
            "evaluate.panel.aggregate is required",
        ),
    ],
)
def test_ambiguous_or_bad_panels_fail_before_any_call(run_kedro, fake_llm, evaluate, message):
    params = {"endpoints": judge_endpoints(fake_llm, "judge-a", "judge-b"), "evaluate": evaluate}
    with pytest.raises(ConfigError, match=message):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == 0


@pytest.mark.parametrize(
    "case",
    [
        ("binary", 0.5, "column 'recorded_score': must be 0 or 1, got 0.5"),
        ("score_0_5", 7, r"column 'recorded_score': must be a number in \[0, 5\], got 7"),
        ("rubric", 3, "column 'recorded_score': mode rubric gives no single score per row"),
    ],
)
def test_bad_recorded_scores_fail_naming_row_and_column(run_kedro, fake_llm, tmp_path, case):
    mode, recorded, message = case
    rows = [
        {"instance_id": "q1", "question": "Q?", "response": "A.", "reference": "R.", "model": "m"},
        {"instance_id": "q2", "question": "Q2?", "response": "A.", "reference": "R.", "model": "m"},
    ]
    rows[1]["recorded_score"] = recorded
    params = {
        "endpoints": endpoints_via(fake_llm),
        "eval_samples_path": write_samples(tmp_path / "bad.jsonl", rows),
        "evaluate": {"mode": mode},
    }
    with pytest.raises(InputError, match=rf"eval_samples row 1 \(instance_id 'q2'\), {message}"):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == 0


def readme_panel_command() -> list[str]:
    section = documentation_section("Judge panels and agreement")
    command = re.search(r"```bash\n(kedro run [^\n]+)\n```", section).group(1)
    return command.split()


def test_the_readme_panel_command_runs(tmp_path):
    """The documented command, as given, with the `local` endpoint at the project's server."""
    command = readme_panel_command()
    assert command[:4] == ["kedro", "run", "--pipelines", "evaluate"]
    assert command[4] == "--params"
    readme_params = command[5].strip('"').split(",")
    with FakeLLMServer() as server:
        cli = kedro_cli(tmp_path / "data", server.base_url, *readme_params)
        run_kedro_cli(cli, "evaluate")
        temperatures = Counter(body["temperature"] for body in server.requests)
    assert sorted(temperatures) == [0, 0.7]  # the two judges of the panel
    assert temperatures[0] == temperatures[0.7] == 48
    versions = list((tmp_path / "data" / "07_model_output" / "eval_judgments.parquet").iterdir())
    judgments = pd.read_parquet(versions[0] / "eval_judgments.parquet")
    assert {"score_cold", "score_warm"} <= set(judgments.columns)
    metrics_dir = tmp_path / "data" / "08_reporting" / "eval_metrics.parquet"
    metrics = pd.read_parquet(next(metrics_dir.iterdir()) / "eval_metrics.parquet")
    raters = set(metrics["raters"].dropna())
    assert raters == {"cold~warm"}  # the demo samples carry no recorded_score


def test_a_failing_judge_stops_the_panel_and_a_rerun_pays_only_for_the_rest(run_kedro, tmp_path):
    broken = {"b": True}

    def judge_b(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        return Reply(status=500, error_message="down") if broken["b"] else "Rating: [[5]]"

    with (
        FakeLLMServer(lambda body, ctx: "Rating: [[7]]", latency_s=0.2) as slow,
        FakeLLMServer(judge_b) as failing,
    ):
        endpoints = {
            # One call at a time: 48 judgments take judge a about 10 s.
            "judge_a": endpoints_via(slow, structured_output=False, max_concurrent=1)["local"],
            "judge_b": endpoints_via(failing, structured_output=False, max_retries=0)["local"],
        }
        params = {
            "endpoints": endpoints,
            "evaluate": {
                "mode": "single_1_10",
                "panel": {
                    "judges": [{"endpoint": "judge_a"}, {"endpoint": "judge_b"}],
                    "aggregate": "mean",
                },
            },
        }
        with pytest.raises(EndpointError, match="judge_b"):
            run_kedro("evaluate", params)
        answered_before = slow.request_count
        assert 0 < answered_before < 48  # judge a was stopped, not waited for

        broken["b"] = False
        catalog = run_kedro("evaluate", params)["catalog"]
        resent = slow.request_count - answered_before
    # Judge a's answers of the failed run come from the cache; only a call cut off in
    # flight when the panel stopped is asked again.
    assert 48 - answered_before <= resent <= 48 - answered_before + 1
    per_judge = catalog.load("eval_panel_judgments")
    assert per_judge.loc[per_judge["judge"] == "judge_a", "cached"].sum() == 48 - resent
    assert catalog.load("eval_judgments")["score"].tolist() == [6.0] * 48
