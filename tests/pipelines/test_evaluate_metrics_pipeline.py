"""The evaluate pipeline's breakdowns and scorers, on hand-computed tables: metrics per
category and level, both pass@k definitions (binary and thresholded), genlm-style
ensembles, generation runtimes and evaluators in place of the judge."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.evaluation.evaluators import EvaluatorFailure
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import (
    documentation_section,
    endpoints_via,
    kedro_cli,
    run_kedro_cli,
)

PASS, FAIL = "attempt pass", "attempt fail"

# (instance, category, level) -> whether replicates 0, 1, 2 pass.
LEVEL_TABLE = {
    ("i1", "math", "1"): (0, 1, 1),
    ("i2", "code", "1"): (0, 0, 0),
    ("i3", "math", "2"): (1, 0, 0),
    ("i4", "code", "2"): (0, 0, 1),
    ("i5", "code", "2"): (1, 1, 0),
}
# By hand. First k: an instance counts once one of its first k replicates passed.
# Unbiased: per instance 1 - C(n - c, k) / C(n, k) with n = 3, then the mean.
EXPECTED = {
    ("pass_at_k_first", "level", "1"): {1: 0.0, 2: 1 / 2, 3: 1 / 2},
    ("pass_at_k_first", "level", "2"): {1: 2 / 3, 2: 2 / 3, 3: 1.0},
    ("pass_at_k_first", "category", "math"): {1: 1 / 2, 2: 1.0, 3: 1.0},
    ("pass_at_k_first", None, None): {1: 2 / 5, 2: 3 / 5, 3: 4 / 5},
    ("pass_at_k", "level", "1"): {1: (2 / 3 + 0) / 2, 2: (1 + 0) / 2, 3: 1 / 2},
    ("pass_at_k", "level", "2"): {1: 4 / 9, 2: 7 / 9, 3: 1.0},
}


def write_samples(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def level_rows() -> list[dict[str, Any]]:
    return [
        {
            "instance_id": instance,
            "category": category,
            "level": int(level),  # an integer level, as GAIA-style data has it
            "question": f"Question {instance}?",
            "response": f"{PASS if passed else FAIL} {instance} #{replicate}",
            "reference": "the reference",
            "model": "m",
            "replicate": replicate,
        }
        for (instance, category, level), outcomes in LEVEL_TABLE.items()
        for replicate, passed in enumerate(outcomes)
    ]


def judge_by_marker(passed: str, failed: str):
    """A judge that passes a response saying it passes."""

    def respond(body: dict[str, Any], ctx: RequestContext) -> str:
        text = "\n".join(message["content"] for message in body["messages"])
        return passed if PASS in text else failed

    return respond


def metric_value(metrics: pd.DataFrame, name: str, k: int | None = None, **where: str | None):
    selected = metrics[metrics["metric"] == name]
    if k is not None:
        selected = selected[selected["k"] == k]
    for column in ("category", "level", "criterion"):
        value = where.get(column)
        selected = selected[selected[column].isna() if value is None else selected[column] == value]
    assert len(selected) == 1, selected
    return selected.iloc[0]


@pytest.mark.parametrize(
    ("settings", "replies"),
    [
        ({"mode": "binary", "binary_reply": "0/1"}, ("1", "0")),
        ({"mode": "score_0_5", "pass_threshold": 4}, ("Rating: 4", "Rating: 2")),
    ],
    ids=["binary", "thresholded"],
)
def test_level_and_category_pass_at_k_on_a_hand_computed_table(
    run_kedro, tmp_path, settings, replies
):
    path = write_samples(tmp_path / "levels.jsonl", level_rows())
    with FakeLLMServer(judge_by_marker(*replies)) as server:
        run = run_kedro(
            "evaluate",
            {
                "endpoints": endpoints_via(server, structured_output=False),
                "eval_samples_path": path,
                "evaluate": settings,
            },
        )
        assert server.request_count == 15  # every replicate judged once
    judgments = run["catalog"].load("eval_judgments")
    metrics = run["catalog"].load("eval_metrics")
    assert judgments["level"].tolist()[:3] == ["1", "1", "1"]
    assert (judgments["success"]).all()
    for (name, column, label), by_k in EXPECTED.items():
        where = {} if column is None else {column: label}
        for k, value in by_k.items():
            row = metric_value(metrics, name, k, **where)
            assert row["value"] == pytest.approx(value), (name, where, k)
    # Counts come with every breakdown: instances for pass@k, samples for the means.
    assert metric_value(metrics, "pass_at_k_first", 1, level="2")["n"] == 3
    assert metric_value(metrics, "mean", category="code")["n"] == 9
    assert metric_value(metrics, "mean", level="1")["n"] == 6
    # A level row carries no category and the reverse.
    assert metrics.loc[metrics["level"].notna(), "category"].isna().all()


def ensemble_rows() -> list[dict[str, Any]]:
    members = {  # (instance, replicate) -> [(passes, weight), ...]
        ("e1", 0): [(1, 0.5), (0, 0.3), (1, 0.2)],
        ("e1", 1): [(0, 0.6), (1, 0.4)],
        ("e2", 0): [(1, 0.9), (0, 0.1)],
    }
    return [
        {
            "instance_id": instance,
            "question": f"Question {instance}?",
            "response": f"{PASS if passed else FAIL} {instance} #{replicate}.{member}",
            "reference": "the reference",
            "model": "m",
            "replicate": replicate,
            "ensemble_member": member,
            "weight": weight,
        }
        for (instance, replicate), ensemble in members.items()
        for member, (passed, weight) in enumerate(ensemble)
    ]


def test_ensemble_weighted_accuracy_as_genlm_computes_it(run_kedro, tmp_path):
    path = write_samples(tmp_path / "ensembles.jsonl", ensemble_rows())
    with FakeLLMServer(judge_by_marker("1", "0")) as server:
        run = run_kedro(
            "evaluate",
            {
                "endpoints": endpoints_via(server, structured_output=False),
                "eval_samples_path": path,
                "evaluate": {"mode": "binary", "binary_reply": "0/1"},
            },
        )
        assert server.request_count == 7
    judgments = run["catalog"].load("eval_judgments")
    metrics = run["catalog"].load("eval_metrics")
    assert judgments["ensemble_member"].tolist() == [0, 1, 2, 0, 1, 0, 1]
    # genlm: e1 = mean(0.5 + 0.2, 0.4) = 0.55, e2 = 0.9; the mean over instances.
    genlm = metric_value(metrics, "weighted_accuracy")
    assert genlm["value"] == pytest.approx((0.55 + 0.9) / 2) and genlm["n"] == 2
    # Pooled: every response's weight together, (0.5 + 0.2 + 0.4 + 0.9) / 3.
    pooled = metric_value(metrics, "pooled_weighted_accuracy")
    assert pooled["value"] == pytest.approx(2.0 / 3) and pooled["n"] == 7
    # pass@k takes each replicate's heaviest response: e1 passes, fails; e2 passes.
    assert metric_value(metrics, "pass_at_k", 1)["value"] == pytest.approx((0.5 + 1) / 2)
    first = metric_value(metrics, "pass_at_k_first", 2)
    assert first["value"] == 1.0 and first["n"] == 1  # e2 has one replicate only


def test_generated_responses_record_their_runtime(run_kedro, tmp_path):
    rows = [
        {"instance_id": "g1", "question": "Say hi.", "response": None, "model": "m"},
        {"instance_id": "g2", "question": "Say bye.", "response": "bye", "model": "m"},
    ]
    path = write_samples(tmp_path / "generate.jsonl", rows)
    with FakeLLMServer(lambda body, ctx: "Rating: [[3]]", latency_s=0.05) as server:
        run = run_kedro(
            "evaluate",
            {
                "endpoints": endpoints_via(server, structured_output=False),
                "eval_samples_path": path,
                "evaluate": {"mode": "single_1_10", "generate_with": "local"},
            },
        )
    judgments = run["catalog"].load("eval_judgments").set_index("instance_id")
    metrics = run["catalog"].load("eval_metrics")
    assert judgments.loc["g1", "runtime_s"] >= 0.05
    assert pd.isna(judgments.loc["g2", "runtime_s"])  # given, not generated: unknown
    runtime = metric_value(metrics, "mean_runtime_s")
    assert runtime["value"] == judgments.loc["g1", "runtime_s"] and runtime["n"] == 1


NUMERIC = "llm_feedback.evaluation.evaluators:NumericMatch"


def test_an_evaluator_scores_without_the_judge_and_is_cached(run_kedro, fake_llm, tmp_path):
    rows = [
        {"instance_id": "a", "question": "2 + 2?", "response": "It is 4.", "reference": "4"},
        {"instance_id": "a", "question": "2 + 2?", "response": "5", "reference": "4"},
        {"instance_id": "b", "question": "pi?", "response": "3.1416", "reference": "3.14159"},
        {"instance_id": "c", "question": "?", "response": "7", "reference": "seven"},
    ]
    for replicate, row in zip((0, 1, 0, 0), rows, strict=True):
        row |= {"model": "m", "replicate": replicate}
    params = {
        "endpoints": endpoints_via(fake_llm),
        "eval_samples_path": write_samples(tmp_path / "numbers.jsonl", rows),
        "evaluate": {"evaluator": NUMERIC, "evaluator_options": {"abs_tol": 0.001}},
    }
    first = run_kedro("evaluate", params)
    judgments = first["catalog"].load("eval_judgments")
    metrics = first["catalog"].load("eval_metrics")
    assert fake_llm.request_count == 0  # no judge call, no preflight either
    assert judgments["score"].tolist()[:3] == [1.0, 0.0, 1.0]
    assert judgments["parse_status"].tolist() == ["ok", "ok", "ok", "invalid"]
    assert judgments["judge_model"].eq(NUMERIC).all() and not judgments["cached"].any()
    assert metric_value(metrics, "pass_at_k", 2)["value"] == 1.0  # instance a: c=1 of n=2
    assert metric_value(metrics, "pass_at_k_first", 1)["value"] == 1.0
    assert metric_value(metrics, "n_invalid")["value"] == 1

    again = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
    assert again["cached"].tolist() == [True, True, True, True]
    params["evaluate"]["overwrite_results"] = True
    fresh = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
    assert not fresh["cached"].any() and fresh["score"].equals(judgments["score"])


def broken_evaluator(sample: dict[str, Any], response: str) -> float:
    raise RuntimeError(f"cannot score {sample['instance_id']}")


@pytest.mark.parametrize(
    ("evaluator", "message"),
    [
        ("no_such_package.scoring:score", "evaluate.evaluator: cannot import module"),
        ("llm_feedback.evaluation.evaluators:missing", "has no 'missing'"),
        ("llm_feedback.evaluation.evaluators", "must be 'package.module:function'"),
    ],
)
def test_a_bad_evaluator_fails_before_any_call(run_kedro, fake_llm, evaluator, message):
    params = {"endpoints": endpoints_via(fake_llm), "evaluate": {"evaluator": evaluator}}
    with pytest.raises(ConfigError, match=message):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == 0


def test_an_evaluator_that_fails_every_row_fails_the_run(run_kedro, fake_llm):
    evaluator = f"{__name__}:broken_evaluator"
    params = {"endpoints": endpoints_via(fake_llm), "evaluate": {"evaluator": evaluator}}
    with pytest.raises(EvaluatorFailure, match="failed on every one of 48 responses.*cannot"):
        run_kedro("evaluate", params)


def readme_command(title: str) -> list[str]:
    """The `kedro run --params ...` settings of the documentation section's bash block."""
    section = documentation_section(title)
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    words = shlex.split(block.strip().splitlines()[0])
    assert words[:4] == ["kedro", "run", "--pipelines", "evaluate"], words
    return words[words.index("--params") + 1].split(",")


def run_readme_command(title: str, tmp_path: Path) -> pd.DataFrame:
    data_root = tmp_path / "data"
    # The URL of a server that is never asked: these commands score without a judge.
    command = kedro_cli(data_root, "http://127.0.0.1:9/v1", *readme_command(title))
    run_kedro_cli(command, "evaluate")
    (version,) = (data_root / "08_reporting" / "eval_metrics.parquet").iterdir()
    return pd.read_parquet(version / "eval_metrics.parquet")


def test_the_readme_categories_and_levels_command(tmp_path):
    metrics = run_readme_command("Categories and levels", tmp_path)
    # data/01_raw/eval_samples_levels_demo.jsonl by hand: levels 1, 2, 3 hold replicates
    # passing (1,1,0) (1,1,1) | (1,0,1) (0,1,0) | (1,0,1) (0,0,0).
    first = {1: {"1": 1.0, "2": 0.5, "3": 0.5}, 2: {"1": 1.0, "2": 1.0, "3": 0.5}}
    for k, by_level in first.items():
        for level, value in by_level.items():
            assert metric_value(metrics, "pass_at_k_first", k, level=level)["value"] == value
    unbiased = {"1": 5 / 6, "2": 1 / 2, "3": 1 / 3}
    for level, value in unbiased.items():
        row = metric_value(metrics, "pass_at_k", 1, level=level)
        assert row["value"] == pytest.approx(value) and row["n"] == 2
    assert metric_value(metrics, "mean", category="word")["value"] == pytest.approx(5 / 9)


def test_the_readme_custom_evaluators_command(tmp_path):
    metrics = run_readme_command("Custom evaluators", tmp_path)
    # data/01_raw/eval_samples_code_demo.jsonl: c1 passes then fails, c2 fails then
    # passes, c3 passes twice.
    assert metric_value(metrics, "mean")["value"] == pytest.approx(4 / 6)
    assert metric_value(metrics, "pass_at_k_first", 1)["value"] == pytest.approx(2 / 3)
    assert metric_value(metrics, "pass_at_k_first", 2)["value"] == 1.0
