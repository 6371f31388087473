"""sample and generate on a real catalog; resuming a killed run; bad input before any call."""

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from kedro.validation import ParameterValidationError

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.testing.server import fetch_stats, serve_in_subprocess
from tests.conftest import (
    KEDRO_CLI_ENV,
    PROJECT_ROOT,
    endpoints_via,
    kedro_cli,
    run_kedro_cli,
)

ALL_PROMPTS = {"max_prompts": None}


def test_sample_then_generate_on_the_demo_prompts(run_kedro, fake_llm):
    params = {"endpoints": endpoints_via(fake_llm), "sample": ALL_PROMPTS}
    sampled = run_kedro("sample", params)["catalog"].load("sampled_prompts").read()
    assert sampled["source"].nunique() == 6
    assert sampled.groupby("prompt_id")["model"].nunique().eq(4).all()  # without replacement
    assert sampled["system_prompt"].str.len().gt(20).all()

    completions = run_kedro("generate", params)["catalog"].load("completions").read()
    assert len(completions) == len(sampled)
    assert completions["error"].isna().all() and completions["response"].notna().all()
    assert completions["completion_tokens"].gt(0).all()
    assert (completions["finish_reason"] == "stop").all()
    # Each request carried its slot's principle system prompt and its model's settings.
    sent = fake_llm.requests[0]
    assert sent["messages"][0]["role"] == "system"
    assert fake_llm.request_count == len(sampled)


def test_a_repeat_run_pays_for_nothing(run_kedro, fake_llm):
    params = {"endpoints": endpoints_via(fake_llm), "sample": {"max_prompts": 8}}
    run_kedro("sample", params)
    run_kedro("generate", params)
    sent = fake_llm.request_count
    run_kedro("generate", params)
    assert fake_llm.request_count == sent


def test_sampling_is_reproducible_across_runs(run_kedro, fake_llm):
    params = {"endpoints": endpoints_via(fake_llm)}
    first = run_kedro("sample", params)["catalog"].load("sampled_prompts").read()
    second = run_kedro("sample", params)["catalog"].load("sampled_prompts").read()
    assert first.equals(second)


def test_a_pool_smaller_than_n_completions_fails_before_generation(run_kedro, fake_llm):
    with pytest.raises(ConfigError, match="n_completions"):
        run_kedro("sample", {"endpoints": endpoints_via(fake_llm), "sample": {"n_completions": 9}})
    assert fake_llm.request_count == 0


def test_an_unknown_backend_is_named(run_kedro, fake_llm):
    params = {"endpoints": {"local": {"backend": "ollama"}}}
    run_kedro("sample", {"endpoints": endpoints_via(fake_llm)})
    # Kedro's own validation of the endpoints block (params.blocks) stops it, in our words.
    with pytest.raises((ConfigError, ParameterValidationError), match="unknown backend 'ollama'"):
        run_kedro("generate", params)


def test_a_model_missing_from_the_pool_names_the_row(run_kedro, fake_llm):
    params = {"endpoints": endpoints_via(fake_llm)}
    catalog = run_kedro("sample", params)["catalog"]
    sampled = catalog.load("sampled_prompts").read()
    sampled.loc[3, "model"] = "gpt-7"
    catalog.save("sampled_prompts", sampled)
    with pytest.raises(InputError, match=r"row 3 .*'gpt-7' is not in model_pool"):
        run_kedro("generate", params)
    assert fake_llm.request_count == 0


def test_an_empty_instruction_names_file_row_and_column(run_kedro, tmp_path, fake_llm):
    raw = tmp_path / "prompts"
    raw.mkdir()
    (raw / "mine.jsonl").write_text(
        '{"prompt_id": "a", "source": "flan", "instruction": "Translate: hi"}\n'
        '{"prompt_id": "b", "source": "flan", "instruction": "   "}\n'
    )
    with pytest.raises(InputError, match=r"mine.*row 1.*'instruction'"):
        run_kedro("sample", {"raw_prompts_dir": str(raw), "endpoints": endpoints_via(fake_llm)})


def test_a_killed_run_resumes_without_repeating_answered_requests(run_kedro, tmp_path):
    """Kill `kedro run --pipeline generate` half-way; the rerun sends only what was unanswered."""
    data_root = tmp_path / "data"
    with serve_in_subprocess(latency_s=0.05, responder="echo") as url:
        common = kedro_cli(data_root, url, "sample.max_prompts=null")
        run_kedro_cli(common, "sample")
        child = subprocess.Popen(
            [*common, "--pipelines", "generate"],
            cwd=PROJECT_ROOT,
            env=KEDRO_CLI_ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        total = 37 * 4
        deadline = time.monotonic() + 60
        while fetch_stats(url)["chat_requests"] < total // 2:
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        sent_before_kill = fetch_stats(url)["chat_requests"]
        cache = data_root / "02_intermediate" / "request_cache.sqlite"
        with sqlite3.connect(cache) as db:
            answered = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        assert 0 < answered < total
        assert not list((data_root / "03_primary").glob("completions.parquet/*"))

        rerun = run_kedro_cli(common, "generate")
        resent = fetch_stats(url)["chat_requests"] - sent_before_kill
    # The run ends with where its time went (Rich may wrap the log line).
    log = " ".join(rerun.stdout.decode().split())
    assert "Time per node:" in log and "generate_completions" in log and "whole run" in log
    # Exactly the unanswered requests went out again: none of the answered ones.
    assert resent == total - answered
    assert Path(next((data_root / "03_primary").glob("completions.parquet/*/*"))).exists()
