"""MLflow tracking: a small run logged to the default kind of store (SQLite), read back
with MLflow's own client and its REST API, without MLFLOW_ALLOW_FILE_STORE."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.runs.tracking import (
    HEADLINES,
    REDACTED,
    SECRET_NAME,
    flatten_params,
    headline_metrics,
    parse_tracking,
    table_metrics,
)
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import PROJECT_ROOT, endpoints_via

SECRET = "sk-tracking-secret-0123456789abcdef"


def every_text(root: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in root.rglob("*") if path.is_file())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rest(base: str, path: str, **query: str) -> dict:
    from urllib.parse import urlencode

    with urllib.request.urlopen(f"{base}/api/2.0/mlflow/{path}?{urlencode(query)}") as reply:
        return json.loads(reply.read())


def test_a_tracked_run_logs_headlines_tables_datasets_commit_and_no_secret(
    run_kedro, tmp_path, monkeypatch
):
    mlflow_tracking = pytest.importorskip("mlflow.tracking", reason="the mlflow extra")
    pytest.importorskip("sqlalchemy", reason="the mlflow extra (its SQLite store)")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    store = f"sqlite:///{tmp_path / 'mlruns.db'}"
    tracking = {"mlflow": {"enabled": True, "tracking_uri": store, "experiment": "t"}}
    with FakeLLMServer(api_key=SECRET) as server:
        params = {"sample": {"max_prompts": 2}, "endpoints": endpoints_via(server)}
        run_kedro("__default__", {**params, "tracking": tracking})

    client = mlflow_tracking.MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("t")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.params["sample.max_prompts"] == "2"
    assert run.data.params["endpoints.local.base_url"] == server.base_url
    assert run.data.tags["kedro.pipelines"] == "__default__"
    # Only secrets' names are redacted: max_tokens and the like are logged as set.
    redacted = {key for key, value in run.data.params.items() if value == REDACTED}
    assert all(SECRET_NAME.match(key.rsplit(".", 1)[-1]) for key in redacted)
    token_counts = [key for key in run.data.params if key.endswith("max_tokens")]
    assert token_counts and not redacted & set(token_counts)
    # The headline figures, named; every table whole as an artifact.
    metrics = run.data.metrics
    assert any(k.startswith("model_ranking/") and k.endswith("/score") for k in metrics)
    assert metrics["cost/prompt_tokens"] > 0 and "cost/estimated_usd" in metrics
    assert metrics["time_s/total"] > 0
    assert {key.split("/", 1)[0] for key in metrics} <= {*HEADLINES, "cost", "time_s"}
    assert len(metrics) < 60
    artifacts = {
        a.path
        for folder in ("tables", "figures", "report")
        for a in client.list_artifacts(run.info.run_id, folder)
    }
    assert {"tables/model_aspect_metrics.json", "tables/cost_table.json"} <= artifacts
    assert "tables/node_times.json" in artifacts
    assert "report/report.md" in artifacts and "figures/score_scatter.png" in artifacts
    table = json.loads(
        Path(client.download_artifacts(run.info.run_id, "tables/cost_table.json")).read_text()
    )
    assert "estimated_cost" in table["columns"]
    # The datasets the run read, and the commit it ran.
    inputs = {entry.dataset.name: entry for entry in run.inputs.dataset_inputs}
    assert "raw_prompt_files" in inputs
    assert {tag.key: tag.value for tag in inputs["raw_prompt_files"].tags}[
        "mlflow.data.context"
    ] == "input"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
    )
    if head.returncode == 0:
        assert run.data.tags["mlflow.source.git.commit"] == head.stdout.strip()
    # Artifacts beside the database, not in the working directory.
    assert experiment.artifact_location == (tmp_path / "mlartifacts").as_uri()
    assert SECRET not in every_text(tmp_path)  # the database and the artifacts

    # MLflow's own server reads the same store over its REST API.
    port = _free_port()
    server_process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server_process.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(0.5)
        fetched = _rest(base, "runs/get", run_id=run.info.run_id)["run"]
        assert {m["key"] for m in fetched["data"]["metrics"]} == set(metrics)
        assert {d["dataset"]["name"] for d in fetched["inputs"]["dataset_inputs"]} == set(inputs)
    finally:
        server_process.terminate()
        server_process.wait(timeout=30)


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


def test_secrets_names_are_redacted_counts_of_tokens_are_not_and_bad_settings_named():
    flat = flatten_params({"hub": {"token": "hf_x", "token_env": "HF_TOKEN"}, "a": [1, 2]})
    assert flat == {"hub.token": "<redacted>", "hub.token_env": "HF_TOKEN", "a": "[1, 2]"}
    secrets = ["api_key", "openai_api_key", "hf_token", "Authorization", "password", "secret"]
    secrets += ["client_secret", "credentials", "private_key", "apiKey"]
    counts = ["max_tokens", "max_new_tokens", "max_completion_tokens", "thinking_token_budget"]
    counts += ["tokens_per_minute", "token_logprobs", "secret_env", "keyword", "passwords_seen"]
    flat = flatten_params({name: "x" for name in secrets + counts})
    assert {name for name, value in flat.items() if value == "<redacted>"} == set(secrets)
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


def test_headline_metrics_are_the_named_figures_and_the_overall_rows_only():
    ranking = pd.DataFrame(
        {"model": ["a", "b"], "score": [1010.0, 990.0], "n_battles": [40, 40], "rank": [1, 2]}
    )
    assert headline_metrics("model_ranking", ranking) == {
        "model_ranking/a/score": 1010.0,
        "model_ranking/b/score": 990.0,
    }
    metrics = pd.DataFrame(
        {
            "mode": ["single"] * 3,
            "model": ["a"] * 3,
            "metric": ["mean_score"] * 3,
            "category": [None, "math", None],
            "level": [None, None, "hard"],
            "k": pd.array([pd.NA] * 3, dtype="Int64"),
            "value": [7.5, 6.0, 5.0],
            "n": [80, 10, 20],
        }
    )
    assert headline_metrics("eval_metrics", metrics) == {
        "eval_metrics/single/a/mean_score/value": 7.5
    }
    assert headline_metrics("rating_by_length", ranking) == {}
