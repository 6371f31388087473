"""`kedro run --pipelines generate` with a Batch API endpoint, against the project's server:
answers by batch, a rerun that pays nothing, submit-and-exit, and a run killed while polling
that resumes the same batch."""

import json
import os
import signal
import subprocess
import time

import yaml

from llm_feedback.backends import EndpointConfig
from llm_feedback.backends.batch_api import LEDGER_SUFFIX
from llm_feedback.cli import BATCH_PENDING_EXIT_CODE
from llm_feedback.testing.server import BatchScript, FakeLLMServer
from tests.conftest import (
    KEDRO_CLI_ENV,
    PROJECT_ROOT,
    dotted_params,
    endpoints_via,
    kedro_cli,
    readme_block,
    readme_command,
)

BATCH = ("endpoints.local.mode=batch", "endpoints.local.batch_poll_seconds=0.05")
N_COMPLETIONS = 3 * 4  # sample.max_prompts=3, four completions each


def _generate(data_root, server, *params):
    return subprocess.run(
        [*kedro_cli(data_root, server.base_url, "sample.max_prompts=3", *BATCH, *params)]
        + ["--pipelines", "generate"],
        cwd=PROJECT_ROOT,
        env=KEDRO_CLI_ENV,
        capture_output=True,
        text=True,
        check=False,
    )


def _sample(run_kedro, server):
    run_kedro("sample", {"endpoints": endpoints_via(server), "sample": {"max_prompts": 3}})


def _ledger(data_root):
    path = data_root / "02_intermediate" / f"request_cache.sqlite{LEDGER_SUFFIX}"
    return [entry["id"] for entry in json.loads(path.read_text())["batches"]]


def test_generate_by_batch_then_a_rerun_sends_nothing(run_kedro, tmp_path):
    data_root = tmp_path / "data"
    with FakeLLMServer() as server:
        _sample(run_kedro, server)
        first = _generate(data_root, server)
        assert first.returncode == 0, first.stderr
        assert server.batch_counts == {
            "files_uploaded": 1,
            "batches_created": 1,
            "batch_lines_answered": N_COMPLETIONS,
        }
        assert server.request_count == 0
        rerun = {"endpoints": endpoints_via(server, mode="batch", model="fake")}
        completions = run_kedro("generate", rerun)
        completions = completions["catalog"].load("completions").read()
        assert completions["via_batch"].all() and completions["error"].isna().all()
        assert completions["cached"].all()  # the in-process rerun took every answer from cache
        assert server.batch_counts["batches_created"] == 1 and server.request_count == 0


def test_submit_and_exit_then_a_later_run_collects(run_kedro, tmp_path):
    data_root = tmp_path / "data"
    with FakeLLMServer(batch=BatchScript(delay_s=3600)) as server:
        _sample(run_kedro, server)
        submitted = _generate(data_root, server, "endpoints.local.batch_wait=false")
        assert submitted.returncode == BATCH_PENDING_EXIT_CODE, submitted.stderr
        assert "batches pending" in submitted.stderr and "batch_1" in submitted.stderr
        assert "run the same command later" in submitted.stderr
        assert _ledger(data_root) == ["batch_1"]
        assert not list((data_root / "03_primary").glob("completions.parquet/*"))

        server.batch_script = BatchScript()  # the batch finishes
        collected = _generate(data_root, server)
        assert collected.returncode == 0, collected.stderr
        assert server.batch_counts["batches_created"] == 1
        assert server.request_count == 0
        assert _ledger(data_root) == []
        assert list((data_root / "03_primary").glob("completions.parquet/*/*"))


def test_a_run_killed_while_polling_resumes_the_same_batch(run_kedro, tmp_path):
    data_root = tmp_path / "data"
    with FakeLLMServer(batch=BatchScript(delay_s=3600)) as server:
        _sample(run_kedro, server)
        command = kedro_cli(data_root, server.base_url, "sample.max_prompts=3", *BATCH)
        child = subprocess.Popen(
            [*command, "--pipelines", "generate"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while len(server.batch_retrievals) < 2:  # submitted, and polled at least twice
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        assert _ledger(data_root) == ["batch_1"]
        polled_before_kill = len(server.batch_retrievals)

        server.batch_script = BatchScript()
        resumed = _generate(data_root, server)
        assert resumed.returncode == 0, resumed.stderr
        assert server.batch_counts["batches_created"] == 1  # no second submission
        assert server.batch_counts["files_uploaded"] == 1
        assert set(server.batch_retrievals[polled_before_kill:]) == {"batch_1"}
        assert server.batch_counts["batch_lines_answered"] == N_COMPLETIONS
        assert server.request_count == 0


def test_the_readme_batch_endpoints_and_command(run_kedro, monkeypatch):
    """The README's batch endpoints parse, and its command judges by batch end to end: the
    judge's rows say so and the report prices them at the batch rate."""
    endpoints = yaml.safe_load(readme_block("Past one machine: batch endpoints"))["endpoints"]
    without_credentials = {name: {**d, "credentials": None} for name, d in endpoints.items()}
    for name, definition in without_credentials.items():
        assert EndpointConfig.from_dict(definition, name).uses_batch_api
    command = readme_command("### OpenAI / Azure Batch API")
    prefix = "kedro run --pipelines annotate --params "
    assert command.startswith(prefix)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    with FakeLLMServer() as server:
        batch_endpoint = {
            **without_credentials["openai_batch"],
            "base_url": server.base_url,
            "batch_poll_seconds": 0.01,
        }
        params = {
            "endpoints": {**endpoints_via(server), "openai_batch": batch_endpoint},
            "sample": {"max_prompts": 2},
        }
        run_kedro("sample", params)
        run_kedro("generate", params)
        assert server.batch_counts["batches_created"] == 0  # generation used `local`
        params |= dotted_params(command.removeprefix(prefix))
        catalog = run_kedro("annotate", params)["catalog"]
        costs = run_kedro("report", params)["catalog"].load("cost_table")
        assert server.batch_counts["batches_created"] >= 2  # aspects, critiques
        assert catalog.load("aspect_annotations").read()["judge_via_batch"].all()
        assert catalog.load("critiques").read()["judge_via_batch"].all()
    judged = costs[costs["stage"].isin(["annotate", "critique"])]
    assert set(judged["mode"]) == {"batch"} and set(judged["endpoint"]) == {"openai_batch"}
    assert set(costs.loc[costs["stage"] == "generate", "mode"]) == {"online"}
