"""The ray backend against the project's server, on one local Ray shared by the module.

The Ray tests start Ray once (2 CPUs, no dashboard) and are marked `ray`; the checks of
bad settings and of the vLLM processor's rows need no Ray at all.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
import yaml

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.preflight import preflight
from llm_feedback.backends.ray_backend import (
    ROW_ID,
    _request_json,
    _result_from_vllm_row,
    _vllm_row,
)
from llm_feedback.core.errors import ConfigError, EndpointError
from llm_feedback.testing.server import FakeLLMServer, echo_responder, schema_responder
from tests.conftest import documentation_section, readme_block

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

SCHEMA = {
    "type": "object",
    "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["rating"],
}


@pytest.fixture(scope="module")
def ray_session():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _ray_endpoint(server: FakeLLMServer, **extra) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {
            "backend": "ray",
            "model": "fake-model",
            "base_url": server.base_url,
            "ray_batch_size": 4,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            **extra,
        },
        name="cluster",
    )


def _questions(count: int) -> list[ChatRequest]:
    return [
        ChatRequest.from_prompt(
            f"question {number}: rate it",
            system="Be brief.",
            temperature=0.0,
            max_tokens=64,
            json_schema=SCHEMA if number % 2 else None,
        )
        for number in range(count)
    ]


class WorkerKiller:
    """A responder that, once armed, SIGKILLs the ray backend's worker processes when the
    server has had `after_calls` calls (so every batch in flight dies); it answers every
    call with `inner`."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.after_calls: int | None = None
        self.kills = 0

    def arm(self, after_calls: int) -> None:
        self.after_calls = after_calls

    def __call__(self, body, ctx):
        if self.after_calls is not None and ctx.call_index >= self.after_calls:
            self.after_calls = None
            for process in psutil.process_iter(["pid", "cmdline"]):
                if "ChatWorker" in " ".join(process.info["cmdline"] or ()):
                    os.kill(process.info["pid"], signal.SIGKILL)
            self.kills += 1
        return self.inner(body, ctx)


@pytest.mark.ray
def test_ray_answers_as_openai_does_once_each_within_its_qps_and_reruns_from_cache(
    ray_session, tmp_path, monkeypatch
):
    key = "sk-ray-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)  # the server refuses any other key
    arrivals: list[float] = []

    def timed(body, ctx):
        arrivals.append(time.monotonic())
        return schema_responder(body, ctx)

    requests = _questions(30)
    requests += requests[:3]  # repeats share one call
    with FakeLLMServer(timed, api_key=key) as server:
        openai = EndpointConfig.from_dict(
            {"backend": "openai", "model": "fake-model", "base_url": server.base_url}, name="o"
        )
        with LLMClient(openai, tmp_path / "openai.sqlite", progress=False) as client:
            expected = client.complete_many(requests)
        server.reset()
        arrivals.clear()

        config = _ray_endpoint(server, ray_qps=40, ray_batch_size=8)
        with LLMClient(config, tmp_path / "ray.sqlite", progress=False) as client:
            answered = client.complete_many(requests)
        sent = [body["messages"][-1]["content"] for body in server.requests]
        server.reset()
        with LLMClient(config, tmp_path / "ray.sqlite", progress=False) as client:
            rerun = client.complete_many(requests)
        assert server.request_count == 0

    assert [(r.text, r.finish_reason, r.completion_tokens) for r in answered] == [
        (r.text, r.finish_reason, r.completion_tokens) for r in expected
    ]
    assert all(result.ok for result in answered)
    assert sorted(sent) == sorted({r.messages[-1]["content"] for r in requests})
    # Two workers at 20 calls a second each: 15 calls each span at least 0.7 s.
    assert max(arrivals) - min(arrivals) >= 0.6
    assert [r.text for r in rerun] == [r.text for r in expected]
    assert all(result.cached for result in rerun)
    # The key reached the workers, and none of Ray's logs.
    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    files = [path for path in logs.rglob("*") if path.is_file()]
    assert files and not [path for path in files if key in path.read_text(errors="replace")]


@pytest.mark.ray
def test_a_failed_batch_is_run_again_or_its_rows_fail_saying_why(ray_session, tmp_path):
    killer = WorkerKiller(echo_responder)
    requests = _questions(24)
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(killer) as server:
        # Without batch retries: workers killed once half the calls are made fail the rows
        # Ray has not answered; those answered are kept.
        killer.arm(after_calls=12)
        without_retries = _ray_endpoint(server, ray_batch_retries=0)
        with LLMClient(without_retries, cache, progress=False) as client:
            first = client.complete_many(requests)
        failed = [index for index, result in enumerate(first) if not result.ok]
        server.reset()
        # The rerun sends only those rows; its workers are killed at once and Ray runs the
        # killed batches again.
        killer.arm(after_calls=0)
        with LLMClient(_ray_endpoint(server, ray_batch_retries=2), cache, progress=False) as client:
            second = client.complete_many(requests)
        resent = server.request_count

    assert killer.kills == 2
    assert failed, "the killed worker's batch should have failed without retries"
    assert all("Ray did not answer this row" in first[index].error for index in failed)
    assert all(first[index].text is None for index in failed)
    assert [r.text for r in second] == [f"Echo: {r.messages[-1]['content'][:40]}" for r in requests]
    assert [index for index, r in enumerate(second) if not r.cached] == failed
    # Only calls of the batches in flight when the workers died went out twice (at most
    # 2 workers x 4 rows).
    assert len(failed) < resent <= len(failed) + 2 * 4


@pytest.mark.ray
def test_the_readme_ray_cluster_runs_the_evaluate_command(ray_session, run_kedro, fake_llm):
    """The README's Ray endpoints parse; `cluster`, pointed at the project's server on the
    local Ray, judges the demo set through the README's command line."""
    endpoints = yaml.safe_load(readme_block("Ray endpoints (conf/local/parameters.yml)"))
    endpoints = endpoints["endpoints"]
    for name, definition in endpoints.items():
        assert EndpointConfig.from_dict(definition, name=name).backend == "ray"
    section = documentation_section("Ray cluster")
    pipeline, setting = re.search(r"kedro run --pipelines (\w+) --params (\S+)", section).groups()
    assert (pipeline, setting) == ("evaluate", "evaluate.judge.endpoint=cluster")
    here = {"base_url": fake_llm.base_url, "ray_address": None, "ray_replicas": 2}
    params = {
        "endpoints": {"cluster": {**endpoints["cluster"], **here, "max_concurrent": 8}},
        "evaluate": {"judge": {"endpoint": "cluster"}, "mode": "score_0_5"},
    }
    judgments = run_kedro("evaluate", params)["catalog"].load("eval_judgments")

    asked = judgments[judgments["parse_status"] == "ok"]
    assert len(asked) == 40 == fake_llm.request_count  # every row with a known reference
    assert asked["score"].between(0, 5).all() and not asked["cached"].any()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"ray_processor": "spark"}, "ray_processor must be 'http' or 'vllm'"),
        ({"ray_replicas": 0}, "ray_replicas must lie between 1 and"),
        ({"engine_kwargs": {"tensor_parallel_size": 0}}, "engine_kwargs.tensor_parallel_size"),
        ({"ray_qps": 0}, "ray_qps must lie between 0.001 and"),
        ({"ray_batch_size": "64"}, "endpoints.cluster.ray_batch_size must be int"),
    ],
)
def test_bad_ray_settings_are_named_before_anything_starts(setting, message):
    with pytest.raises(ConfigError, match=message):
        EndpointConfig.from_dict({"backend": "ray", "model": "m", **setting}, name="cluster")


def test_the_http_processor_needs_a_server_to_call(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_URL", raising=False)
    config = EndpointConfig.from_dict({"backend": "ray", "model": "m"}, name="cluster")
    with pytest.raises(ConfigError, match="needs 'base_url'"):
        LLMClient(config)


def test_preflight_stops_a_ray_endpoint_whose_server_cannot_be_reached():
    with FakeLLMServer() as server:
        url = server.base_url
    config = EndpointConfig.from_dict(
        {"backend": "ray", "model": "m", "base_url": url}, name="cluster"
    )
    with pytest.raises(EndpointError, match="endpoint 'cluster'.*cannot be reached"):
        preflight(config, timeout_s=2)


def test_the_vllm_processor_is_asked_for_where_vllm_is_missing():
    config = EndpointConfig.from_dict(
        {"backend": "ray", "model": "org/model", "ray_processor": "vllm"}, name="gpus"
    )
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    with pytest.raises(ConfigError, match=r"\.\[ray-gpu\]"):
        preflight(config)


def test_vllm_processor_rows_carry_the_request_and_map_back_by_row_id():
    request = ChatRequest.from_prompt(
        "Rate it.",
        system="Judge.",
        temperature=0.0,
        top_p=0.9,
        max_tokens=8,
        stop=["</s>"],
        seed=3,
        json_schema=SCHEMA,
    )
    row = _vllm_row({ROW_ID: 41, "request": _request_json(request)})
    assert row[ROW_ID] == 41
    assert row["messages"] == list(request.messages)
    params = row["sampling_params"]
    assert (params["temperature"], params["top_p"], params["max_tokens"]) == (0.0, 0.9, 8)
    assert (params["stop"], params["seed"]) == (["</s>"], 3)
    assert json.loads(params["structured_outputs"]["json"]) == SCHEMA
    plain = _vllm_row({ROW_ID: 0, "request": _request_json(ChatRequest.from_prompt("Hi."))})
    assert (plain["sampling_params"]["stop"], plain["sampling_params"]["structured_outputs"]) == (
        [],
        None,
    )

    # What Ray Data LLM's vLLM stage adds to the row: a full budget means cut off.
    answered = {
        **row,
        "generated_text": '{"rating": 4}',
        "num_input_tokens": 20,
        "num_generated_tokens": 8,
        "time_taken_llm": 0.5,
        "__inference_error__": "",
    }
    result = _result_from_vllm_row(answered, "org/model")
    assert (result.text, result.finish_reason, result.prompt_tokens) == (
        '{"rating": 4}',
        "length",
        20,
    )
    failed = _result_from_vllm_row({**answered, "__inference_error__": "ValueError: too long"}, "m")
    assert not failed.ok and "too long" in failed.error
