"""The evaluate pipeline on the real catalog: the demo samples, every mode, reruns, errors."""

import json

import pytest

from llm_feedback.core.errors import ConfigError, InputError
from tests.conftest import PROJECT_ROOT, endpoints_via

DEMO = PROJECT_ROOT / "data" / "01_raw" / "eval_samples_demo.jsonl"


def demo_rows() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]


def test_the_demo_set_covers_what_it_should():
    rows = demo_rows()
    assert len({row["instance_id"] for row in rows}) == 12
    assert {row["model"] for row in rows} == {"assistant-a", "assistant-b"}
    assert {row["replicate"] for row in rows} == {0, 1}
    assert any(row["reference"] is None for row in rows)
    assert all(row["weight"] > 0 for row in rows)


def test_binary_on_the_demo_set_writes_versioned_parquet(run_kedro, fake_llm, tmp_path):
    run = run_kedro("evaluate", {"endpoints": endpoints_via(fake_llm)})
    judgments = run["catalog"].load("eval_judgments")
    metrics = run["catalog"].load("eval_metrics")
    for layer, name in (("07_model_output", "eval_judgments"), ("08_reporting", "eval_metrics")):
        versions = list((tmp_path / "data" / layer / f"{name}.parquet").iterdir())
        assert len(versions) == 1 and (versions[0] / f"{name}.parquet").is_file()

    assert len(judgments) == 48
    statuses = judgments["parse_status"].value_counts()
    assert statuses["invalid"] == 8  # q09 (null) and q11 ("unknown"), 2 models x 2 replicates
    assert statuses["exact_match"] > 0
    asked = judgments[judgments["parse_status"] == "ok"]
    assert len(asked) == fake_llm.request_count
    # The default `graded` reply fills the four fields (the fake judge writes JSON).
    assert asked["extracted_final_answer"].notna().all() and asked["confidence"].notna().all()
    assert set(metrics["metric"]) == {
        "n_invalid",
        "n_exact_match",
        "mean",
        "normalised_mean",
        "weighted_accuracy",
        "pooled_weighted_accuracy",
        "pass_at_k",
        "pass_at_k_first",
        "n_reasks",
        "mean_difference_vs_assistant-a",  # two models: b's difference to a (first by name)
    }
    estimates = metrics[~metrics["metric"].str.startswith("n_")]
    assert estimates["ci_method"].str.startswith("poisson-bootstrap-1000-cluster").all()
    assert (estimates["ci_low"] <= estimates["value"]).all()
    assert (estimates["value"] <= estimates["ci_high"]).all()
    assert run["catalog"].load("eval_model_ranking").empty  # pointwise: no ranking
    assert (judgments["reasks"] == 0).all()  # every reply of the fake judge is readable
    assert sorted(metrics.loc[metrics["metric"] == "pass_at_k", "k"].unique()) == [1, 2]
    assert (metrics["mode"] == "binary").all()


def test_a_rerun_reuses_cached_judgments_and_overwrite_results_asks_again(run_kedro, fake_llm):
    params = {"endpoints": endpoints_via(fake_llm), "evaluate": {"mode": "score_0_5"}}
    first = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
    asked = fake_llm.request_count
    assert asked == 40  # every row with a known reference

    second = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
    assert fake_llm.request_count == asked
    judged = second["parse_status"] == "ok"
    assert second.loc[judged, "cached"].all()
    assert second["score"].equals(first["score"])

    params["evaluate"]["overwrite_results"] = True
    run_kedro("evaluate", params)
    assert fake_llm.request_count == 2 * asked


@pytest.mark.parametrize(
    ("mode", "rows"),
    [("single_1_10", 48), ("rubric", 48 * 3), ("pairwise", 24)],
)
def test_every_mode_runs_on_the_demo_set(run_kedro, fake_llm, mode, rows):
    run = run_kedro("evaluate", {"endpoints": endpoints_via(fake_llm), "evaluate": {"mode": mode}})
    judgments = run["catalog"].load("eval_judgments")
    metrics = run["catalog"].load("eval_metrics")
    assert len(judgments) == rows
    assert judgments["success"].all()  # the fake judge fills the JSON schema of each mode
    assert set(metrics["model"]) == {"assistant-a", "assistant-b"}


def test_max_instances_limits_the_judged_instances(run_kedro, fake_llm):
    params = {
        "endpoints": endpoints_via(fake_llm),
        "evaluate": {"mode": "single_1_10", "max_instances": 3},
    }
    judgments = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
    assert sorted(set(judgments["instance_id"])) == ["q01", "q02", "q03"]
    assert fake_llm.request_count == 12


def test_overwrite_outputs_without_overwrite_results_is_rejected(run_kedro, fake_llm):
    params = {"endpoints": endpoints_via(fake_llm), "evaluate": {"overwrite_outputs": True}}
    with pytest.raises(ConfigError, match="overwrite_outputs.*overwrite_results: true"):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == 0


def test_bad_samples_fail_before_any_call(run_kedro, fake_llm, tmp_path):
    rows = demo_rows()
    rows[5]["question"] = ""
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    params = {"endpoints": endpoints_via(fake_llm), "eval_samples_path": str(path)}
    with pytest.raises(InputError, match="row 5 \\(instance_id 'q02'\\), column 'question'"):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == 0


def test_an_unknown_judge_endpoint_fails_before_any_call(run_kedro, fake_llm):
    params = {
        "endpoints": endpoints_via(fake_llm),
        "evaluate": {"judge": {"endpoint": "gpt-judge"}},
    }
    with pytest.raises(ConfigError, match="evaluate.judge.endpoint: 'gpt-judge' is not defined"):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == 0


def test_the_lmms_eval_preset_sends_its_sampling_unless_the_block_overrides_it(run_kedro, fake_llm):
    """`evaluate.judge.preset: lmms_eval` is the seed evaluator's judge settings: its
    temperature and top_p reach every request, a setting of the block wins over it, and an
    unknown preset is refused before any call."""
    from llm_feedback.judges.config import JUDGE_PRESETS  # noqa: PLC0415

    preset = JUDGE_PRESETS["lmms_eval"]
    params = {
        "endpoints": endpoints_via(fake_llm),
        "evaluate": {
            "mode": "single_1_10",
            "max_instances": 2,
            "judge": {"endpoint": "local", "preset": "lmms_eval", "max_tokens": 300},
        },
    }
    run_kedro("evaluate", params)
    bodies = fake_llm.requests
    assert bodies
    assert {(body["temperature"], body["top_p"]) for body in bodies} == {
        (preset.sampling["temperature"], preset.sampling["top_p"])
    }

    params["evaluate"]["judge"]["preset"] = "fastchat"
    with pytest.raises(ConfigError, match=r"evaluate\.judge\.preset: unknown preset 'fastchat'"):
        run_kedro("evaluate", params)
    assert fake_llm.request_count == len(bodies)
