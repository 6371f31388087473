"""MLflow tracking: a small run logged to a file store, read back with MLflow's own client."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from llm_feedback.errors import ConfigError
from llm_feedback.testing.server import FakeLLMServer
from llm_feedback.tracking import flatten_params, parse_tracking, table_metrics
from tests.conftest import endpoints_via

SECRET = "sk-tracking-secret-0123456789abcdef"


def every_text(root: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in root.rglob("*") if path.is_file())


def test_a_tracked_run_logs_params_metrics_cost_report_and_figures_and_no_secret(
    run_kedro, tmp_path, monkeypatch
):
    mlflow_tracking = pytest.importorskip("mlflow.tracking", reason="the mlflow extra")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = tmp_path / "mlruns"
    tracking = {"mlflow": {"enabled": True, "tracking_uri": store.as_uri(), "experiment": "t"}}
    with FakeLLMServer(api_key=SECRET) as server:
        params = {"sample": {"max_prompts": 2}, "endpoints": endpoints_via(server)}
        run_kedro("__default__", {**params, "tracking": tracking})

    client = mlflow_tracking.MlflowClient(tracking_uri=store.as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["sample.max_prompts"] == "2"
    assert run.data.params["endpoints.local.base_url"] == server.base_url
    assert run.data.tags["kedro.pipelines"] == "__default__"
    metrics = run.data.metrics
    assert any(
        k.startswith("model_aspect_metrics/") and k.endswith("/mean_rating") for k in metrics
    )
    assert metrics["cost/prompt_tokens"] > 0 and "cost/estimated_usd" in metrics
    assert any(key.startswith("time_s/") for key in metrics)
    artifacts = {
        a.path
        for folder in ("tables", "figures", "report")
        for a in client.list_artifacts(run.info.run_id, folder)
    }
    assert {"tables/model_aspect_metrics.json", "tables/cost_table.json"} <= artifacts
    assert "report/report.md" in artifacts and "figures/score_scatter.png" in artifacts
    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "tables/cost_table.json")).read_text()
    )
    assert "estimated_cost" in table["columns"]
    assert SECRET not in every_text(store)  # params, tags, metrics, artifacts


def test_eval_metrics_rows_become_metrics_named_by_their_labels():
    frame = pd.DataFrame(
        {
            "mode": ["single", "single"],
            "model": ["a", "a"],
            "metric": ["pass@k", "mean_score"],
            "category": [None, "math"],
            "k": pd.array([2, pd.NA], dtype="Int64"),
            "value": [0.5, float("nan")],
            "n": [10, 4],
        }
    )
    assert table_metrics("eval_metrics", frame) == {
        "eval_metrics/single/a/pass_k/2/value": 0.5,  # MLflow keys have no "@"
        "eval_metrics/single/a/pass_k/2/n": 10.0,
        "eval_metrics/single/a/mean_score/math/n": 4.0,  # a NaN value is not logged
    }


def test_rows_sharing_labels_cut_at_the_key_limit_stay_apart_and_within_it():
    long_label = "x" * 400  # the key is cut at MLflow's limit before the rows are told apart
    frame = pd.DataFrame({"note": [long_label] * 3, "value": [1.0, 2.0, 3.0]})
    metrics = table_metrics("t", frame)
    assert sorted(metrics.values()) == [1.0, 2.0, 3.0]
    assert all(len(key) <= 250 for key in metrics)
    assert len(set(metrics)) == 3


def test_a_column_saying_how_a_figure_was_made_is_no_part_of_its_key():
    frame = pd.DataFrame(
        {
            "model": ["a", "b"],
            "score": [1010.0, 990.0],
            "method": ["bradley-terry-mle"] * 2,
            "ci_method": ["poisson-bootstrap-1000-cluster"] * 2,
        }
    )
    assert table_metrics("model_ranking", frame) == {
        "model_ranking/a/score": 1010.0,
        "model_ranking/b/score": 990.0,
    }


def test_secret_looking_parameters_are_redacted_and_bad_settings_named():
    flat = flatten_params({"hub": {"token": "hf_x", "token_env": "HF_TOKEN"}, "a": [1, 2]})
    assert flat == {"hub.token": "<redacted>", "hub.token_env": "HF_TOKEN", "a": "[1, 2]"}
    assert parse_tracking(None).enabled is False
    with pytest.raises(ConfigError, match=r"tracking\.mlflow\.enabled must be true or false"):
        parse_tracking({"mlflow": {"enabled": "yes"}})
    with pytest.raises(ConfigError, match=r"tracking\.mlflow: unknown key\(s\) \['uri'\]"):
        parse_tracking({"mlflow": {"uri": "file:/x"}})


def test_an_evaluate_run_logs_eval_metrics_as_metrics_and_a_table(run_kedro, fake_llm, tmp_path):
    mlflow_tracking = pytest.importorskip("mlflow.tracking", reason="the mlflow extra")
    store = tmp_path / "mlruns"
    tracking = {"mlflow": {"enabled": True, "tracking_uri": store.as_uri(), "experiment": "e"}}
    run_kedro("evaluate", {"endpoints": endpoints_via(fake_llm), "tracking": tracking})

    client = mlflow_tracking.MlflowClient(tracking_uri=store.as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("e").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["kedro.pipelines"] == "evaluate"
    assert any(key.startswith("eval_metrics/") for key in run.data.metrics)
    tables = {a.path for a in client.list_artifacts(run.info.run_id, "tables")}
    assert "tables/eval_metrics.json" in tables
