"""The annotate and evaluate pipelines with a Claude or Gemini judge (`backend: anthropic` /
`gemini`) reached through their SDKs, against the project's server speaking each provider's
API: online and through the provider's batch API, and no key in anything a run writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from llm_feedback.backends import BACKENDS
from llm_feedback.backends.base import kind_of
from llm_feedback.core.errors import PlanOnly
from llm_feedback.templates import PACKAGE_TEMPLATES
from llm_feedback.testing.protocol import word_count
from llm_feedback.testing.server import FakeLLMServer, Reply, schema_responder
from tests.conftest import KEDRO_CLI_ENV, PROJECT_ROOT
from tests.test_kedro_viz import project_copy  # noqa: F401 (a fixture)

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

PROVIDERS = sorted(name for name in BACKENDS if hasattr(kind_of(name), "batch_jobs"))


def provider_endpoint(server: FakeLLMServer, backend: str, **settings) -> dict:
    """The project's `local` endpoint as a Claude or Gemini judge on the fake server."""
    return {
        "local": {
            "backend": backend,
            "model": "fake-model",
            "base_url": server.base_url.removesuffix("/v1"),
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            "batch_poll_seconds": 0.02,
            **settings,
        }
    }


def latest_plan(data_root: Path) -> pd.DataFrame:
    return pd.read_parquet(sorted(data_root.glob("*/run_plan.parquet/*/run_plan.parquet"))[-1])


@pytest.mark.parametrize("backend", PROVIDERS)
def test_annotate_online_then_by_batch(backend, run_kedro):
    with FakeLLMServer() as server:
        params = {"sample": {"max_prompts": 2}, "endpoints": provider_endpoint(server, backend)}
        for name in ("sample", "generate", "annotate"):
            run = run_kedro(name, params)
        online = run["catalog"].load("aspect_annotations").read()
        online_calls = server.request_count

        # Another model name: its requests are not in the cache, so the batch is paid for.
        by_batch = provider_endpoint(server, backend, mode="batch", model="fake-model-b")
        batch = {**params, "endpoints": by_batch}
        batched = run_kedro("annotate", batch)["catalog"].load("aspect_annotations").read()

    assert (online["judge_backend"] == backend).all() and (online["parse_status"] == "ok").all()
    assert online["rating"].between(1, 5).all() and not online["judge_via_batch"].any()
    assert online_calls > 0 and server.batch_counts["batches_created"] >= 1
    assert batched["judge_via_batch"].all() and (batched["parse_status"] == "ok").all()
    assert (batched["judge_model"] == "fake-model-b").all()
    assert server.request_count == online_calls  # the batch run sent nothing online
    assert len(batched) == len(online)


@pytest.mark.parametrize("backend", PROVIDERS)
def test_evaluate_reads_every_verdict_of_the_provider_judge(backend, run_kedro):
    with FakeLLMServer() as server:
        run = run_kedro("evaluate", {"endpoints": provider_endpoint(server, backend)})
        judgments = run["catalog"].load("eval_judgments")
        calls = server.request_count

    asked = judgments[judgments["parse_status"] == "ok"]
    assert len(asked) == calls > 0
    assert (judgments["judge_model"] == "fake-model").all()
    assert judgments["error"].isna().all()
    # The demo set's two unanswerable items stay invalid; nothing else is unread.
    assert set(judgments["parse_status"]) <= {"ok", "exact_match", "invalid"}


KEY = "plainprovidersecret4417"  # no known shape: masked by its value


def echo_key(body, ctx):
    """Every first attempt fails with an error body that names the key."""
    if ctx.key_call_index == 0:
        return Reply(status=500, error_message=f"upstream refused key {KEY}")
    return schema_responder(body, ctx)


@pytest.mark.parametrize("backend", PROVIDERS)
def test_no_key_in_logs_lock_or_data(backend, project_copy: Path):  # noqa: F811
    local = project_copy / "conf" / "local"
    (local / "credentials.yml").write_text(yaml.safe_dump({"judge": {"api_key": KEY}}))
    with FakeLLMServer(echo_key, api_key=KEY) as server:
        endpoints = provider_endpoint(server, backend, credentials="judge")
        parameters = {
            "data_root": str(project_copy / "data"),
            "sample": {"max_prompts": 2},
            "endpoints": endpoints,
        }
        (local / "parameters.yml").write_text(yaml.safe_dump(parameters))
        done = subprocess.run(
            [sys.executable, "-m", "kedro", "run", "--pipelines", "sample,generate,annotate"],
            cwd=project_copy,
            env={**KEDRO_CLI_ENV, "PYTHONPATH": str(PROJECT_ROOT / "src")},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        answered = server.request_count
    terminal = done.stdout + done.stderr
    assert done.returncode == 0, terminal[-3000:]

    log = (project_copy / "info.log").read_text()
    assert answered > 0 and "upstream refused key ***" in log  # echoed, then masked
    written = [
        path
        for path in project_copy.rglob("*")
        if path.is_file() and path.relative_to(project_copy).parts[0] not in {"src", "conf"}
    ]
    assert any(path.suffix == ".parquet" for path in written)
    leaks = [str(path) for path in written if KEY.encode() in path.read_bytes()]
    assert not leaks and KEY not in "".join(terminal.split())


@pytest.mark.parametrize("backend", PROVIDERS)
def test_the_plan_prices_the_provider_model_at_its_batch_rate(backend, run_kedro, tmp_path):
    model = {"anthropic": "claude-haiku-4-5", "gemini": "gemini-2.5-flash"}[backend]
    with FakeLLMServer() as server:
        plans = {}
        for mode in ("online", "batch"):
            endpoints = provider_endpoint(server, backend, model=model, mode=mode)
            with pytest.raises(PlanOnly, match="Run plan"):
                run_kedro("evaluate", {"endpoints": endpoints, "plan_only": True})
            plans[mode] = latest_plan(tmp_path / "data")
        assert server.request_count == 0  # a plan calls nothing

    online, batch = plans["online"], plans["batch"]
    assert set(online["mode"]) == {"online"} and set(batch["mode"]) == {"batch"}
    assert online["priced"].all() and (online["model"] == model).all()
    cost = online["estimated_cost"].sum()
    assert cost > 0 and batch["estimated_cost"].sum() == pytest.approx(cost / 2)


# USD per 1k tokens of the judge; per backend its model and that provider's published cache
# rates (read, write: none billed where the provider writes without charge).
PRICE = {"prompt_per_1k": 1.0, "completion_per_1k": 4.0}
CACHE_CASES = {
    "anthropic": ("claude-haiku-4-5", 0.1, 1.25),
    "gemini": ("gemini-2.5-flash", 0.1, None),
    "openai": ("gpt-4o-mini", 0.5, None),
}


def cache_counts(bodies: list[dict], system: str) -> tuple[int, int]:
    """(read, written) tokens of the test server's prompt cache over the bodies whose system
    prompt is `system`, counted as the server counts them (a system prompt is written, or
    for Gemini and OpenAI merely seen, by its first call and read by each later one, the
    score fix's re-scores among them)."""
    calls = [
        body for body in bodies if body["messages"][0] == {"role": "system", "content": system}
    ]
    size = word_count(system)
    return size * (len(calls) - 1), size


def judge_systems(folder: Path) -> dict[str, str]:
    """System prompts long enough for OpenAI's cache (1,024 tokens), as a templates folder."""
    systems = {}
    for stage, name in (("annotate", "system_aspect"), ("critique", "system_teacher")):
        systems[stage] = f"You are a careful {stage} judge. " + "Weigh each answer. " * 520
        (folder / f"{name}.txt").write_text(systems[stage] + "\n", encoding="utf-8")
    return systems


@pytest.mark.parametrize("backend", sorted(CACHE_CASES))
def test_the_cost_table_prices_prompt_cache_reads_and_writes(backend, run_kedro, tmp_path):
    model, read_share, write_share = CACHE_CASES[backend]
    with FakeLLMServer() as server:
        endpoint = provider_endpoint(server, backend, model=model)
        params = {"sample": {"max_prompts": 2}, "report": {"prices": {model: PRICE}}}
        systems = {
            "annotate": PACKAGE_TEMPLATES.render("system_aspect"),
            "critique": PACKAGE_TEMPLATES.render("system_teacher"),
        }
        if backend == "anthropic":
            endpoint["local"]["prompt_caching"] = True
        if backend == "openai":
            endpoint["local"]["base_url"] = server.base_url
            systems = judge_systems(tmp_path)
            params["prompt_templates"] = str(tmp_path)
        params["endpoints"] = endpoint
        for name in ("sample", "generate"):
            run_kedro(name, params)
        server.reset()  # the judges' calls alone
        run_kedro("annotate", params)
        bodies = server.requests
        report = run_kedro("report", params)["catalog"]
        costs = report.load("cost_table")
        completions = report.load("completions")
        completions = completions if isinstance(completions, pd.DataFrame) else completions.read()

    for stage, system in systems.items():
        read, written = cache_counts(bodies, system)
        written = 0 if write_share is None else written
        row = costs[costs["stage"] == stage].iloc[0]
        assert (row["cached_prompt_tokens"], row["cache_write_tokens"]) == (read, written)
        assert read > 0 and row["prompt_tokens"] > read + written
        uncached = row["prompt_tokens"] - read - written
        by_hand = (
            uncached * PRICE["prompt_per_1k"]
            + read * PRICE["prompt_per_1k"] * read_share
            + written * PRICE["prompt_per_1k"] * (write_share or 0)
            + row["completion_tokens"] * PRICE["completion_per_1k"]
        ) / 1000
        assert row["estimated_cost"] == pytest.approx(by_hand)
        assert row["cache_pricing"].startswith(
            f"{backend}'s published rates: reads {read_share:g}x input"
        )
    generate = costs[costs["stage"] == "generate"]
    for column in ("cached_prompt_tokens", "cache_write_tokens"):  # the generation's too
        assert generate[column].sum() == completions[column].fillna(0).sum()
