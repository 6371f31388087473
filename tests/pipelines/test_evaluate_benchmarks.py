"""Benchmarks in evaluate: a question template per benchmark (Youtu-agent's per-benchmark
preprocessing), and eval_metrics naming the benchmark of every row (its `stat()`), computed
per benchmark when one samples file mixes several."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_feedback.core.errors import ConfigError
from llm_feedback.params import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import endpoints_via

PROMPTS = {
    "gsm8k": {"pre_prompt": "Solve step by step. ", "post_prompt": "\nEnd with the number."},
    "truthfulqa": {"post_prompt": "\nAnswer in one sentence."},
}


def _write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def _rows() -> list[dict[str, Any]]:
    rows = []
    for benchmark, questions in {
        "gsm8k": ["What is 2+3?", "What is 7*6?"],
        "truthfulqa": ["Are bats blind?"],
        None: ["Name a colour."],  # no benchmark of its own: the global template
    }.items():
        for n, question in enumerate(questions):
            row = {"instance_id": f"{benchmark}-{n}", "question": question, "model": "m"}
            rows.append(
                {**row, "response": None, **({"benchmark": benchmark} if benchmark else {})}
            )
    return rows


def test_each_benchmark_gets_its_template_and_its_own_metrics(run_kedro, tmp_path):
    path = _write(tmp_path / "mixed.jsonl", _rows())
    with FakeLLMServer(lambda body, ctx: "Rating: [[6]]") as server:
        run = run_kedro(
            "evaluate",
            {
                "endpoints": endpoints_via(server, structured_output=False),
                "eval_samples_path": path,
                "evaluate": {
                    "mode": "single_1_10",
                    "generate_with": "local",
                    "pre_prompt": "Q: ",
                    "benchmark_prompts": PROMPTS,
                    "benchmark": "house",
                },
            },
        )
        sent = [str(body["messages"][-1]["content"]) for body in server.requests]
    # The generation requests: each question once, in its benchmark's template.
    for text in [
        "Solve step by step. What is 2+3?\nEnd with the number.",
        "Solve step by step. What is 7*6?\nEnd with the number.",
        "Are bats blind?\nAnswer in one sentence.",
        "Q: Name a colour.",
    ]:
        assert sent.count(text) == 1, (text, sent)
    assert not any(text.startswith("Q: What is") for text in sent)

    metrics = run["catalog"].load("eval_metrics")
    judgments = run["catalog"].load("eval_judgments")
    assert set(judgments["benchmark"]) == {"gsm8k", "truthfulqa", "house"}
    assert metrics["benchmark"].notna().all()
    means = metrics[(metrics["metric"] == "mean") & metrics["category"].isna()]
    counts = means.set_index("benchmark")["n"].to_dict()
    assert counts == judgments.groupby("benchmark").size().to_dict()


def test_a_file_without_benchmarks_is_named_by_its_file(run_kedro, tmp_path):
    rows = [{"instance_id": "a", "question": "Hi?", "response": "Hello", "model": "m"}]
    path = _write(tmp_path / "my_bench.jsonl", rows)
    with FakeLLMServer(lambda body, ctx: "Rating: [[7]]") as server:
        run = run_kedro(
            "evaluate",
            {
                "endpoints": endpoints_via(server, structured_output=False),
                "eval_samples_path": path,
                "evaluate": {"mode": "single_1_10"},
            },
        )
    metrics = run["catalog"].load("eval_metrics")
    assert set(metrics["benchmark"]) == {"my_bench"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"benchmark_prompts": {"gsm8k": "Solve"}}, r"benchmark_prompts\.gsm8k must be a mapping"),
        ({"benchmark_prompts": {"gsm8k": {"prefix": "x"}}}, r"unknown key\(s\) \['prefix'\]"),
        ({"benchmark_prompts": {"gsm8k": {"post_prompt": 3}}}, r"post_prompt must be text"),
        ({"benchmark": ""}, r"evaluate\.benchmark must be null or a name"),
    ],
)
def test_bad_benchmark_settings_name_the_parameter(settings, message):
    endpoints = {"local": {"backend": "openai", "model": "m", "base_url": "http://x/v1"}}
    with pytest.raises(ConfigError, match=message):
        parse_evaluate(settings, endpoints)
