"""genlm.eval's runner usage, written as its seed document writes it, against the test server.

The usage below runs as it stands (only the import path is this project's): instances with
a field of their own, a model adaptor calling an OpenAI-compatible endpoint over HTTP, an
evaluator returning a float score with metadata, replicates, `max_instances` and the
per-instance cache in an output directory.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pandas as pd
import pytest
from openai import AsyncOpenAI

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.evaluation import ModelOutput, ModelResponse, run_evaluation
from llm_feedback.evaluation.evaluators import NumericMatch, exact_match
from llm_feedback.evaluation.metrics import ensemble_weighted_accuracy
from llm_feedback.testing.server import FakeLLMServer, RequestContext

SEED_USAGE = '''
import asyncio
import re
from dataclasses import dataclass

from openai import AsyncOpenAI

from llm_feedback.evaluation import EvaluationResult, ModelOutput, ModelResponse, run_evaluation


@dataclass
class MathInstance:
    instance_id: int
    question: str
    answer: str
    difficulty: str


class CloseEnough:
    """Full marks for the right number, less the further off it is."""

    def evaluate_sample(self, instance, response):
        numbers = re.findall(r"-?\\d+(?:\\.\\d+)?", response)
        if not numbers:
            return EvaluationResult(score=0.0, desc="no number", metadata={})
        error = abs(float(numbers[-1]) - float(instance.answer))
        return EvaluationResult(
            score=1.0 / (1.0 + error),
            desc=f"off by {error:g}",
            metadata={"difficulty": instance.difficulty, "parsed": float(numbers[-1])},
        )


dataset = [
    MathInstance(0, "What is 2 + 2?", "4", "easy"),
    MathInstance(1, "What is 10 / 4?", "2.5", "medium"),
    MathInstance(2, "What is 7 * 6?", "42", "hard"),
    MathInstance(3, "What is 9 - 3?", "6", "easy"),
]


async def main():
    async with AsyncOpenAI(base_url=BASE_URL, api_key="sk-test-not-a-real-key") as client:

        async def model(instance, output_dir, replicate):
            reply = await client.chat.completions.create(
                model="solver",
                messages=[{"role": "user", "content": instance.question}],
                temperature=1.0,
            )
            text = reply.choices[0].message.content
            return ModelOutput(responses=[ModelResponse(response=text, weight=1.0)])

        return await run_evaluation(
            dataset=dataset,
            model=model,
            evaluator=CloseEnough(),
            output_dir=OUTPUT_DIR,
            n_replicates=2,
            max_instances=3,
            overwrite_results=False,
            overwrite_outputs=False,
        )


results = asyncio.run(main())
'''

ANSWERS = {"2 + 2": "It is 4.", "10 / 4": "That makes 2.5", "7 * 6": "I would say 40"}


def solver(body: dict[str, Any], ctx: RequestContext) -> str:
    question = body["messages"][-1]["content"]
    return next(answer for key, answer in ANSWERS.items() if key in question)


def run_seed_usage(server: FakeLLMServer, output_dir) -> dict[str, Any]:
    names: dict[str, Any] = {"BASE_URL": server.base_url, "OUTPUT_DIR": str(output_dir)}
    exec(SEED_USAGE, names)  # noqa: S102 - the seed document's own code block
    return names


def test_the_seed_usage_runs_as_written_and_its_cache_answers_a_rerun(tmp_path):
    with FakeLLMServer(solver) as server:
        first = run_seed_usage(server, tmp_path)["results"]
        assert server.request_count == 3 * 2  # max_instances x n_replicates
        again = run_seed_usage(server, tmp_path)["results"]
        assert server.request_count == 6  # every output and result read from output_dir
    assert first["n_instances"] == 3
    assert first["average_weighted_accuracy"] == pytest.approx((1 + 1 + 1 / 3) / 3)
    low, high = first["weighted_accuracy_interval"]
    assert low < first["average_weighted_accuracy"] < high
    hard = first["all_instance_results"][2]
    assert [replicate["weighted_accuracy"] for replicate in hard] == [pytest.approx(1 / 3)] * 2
    scored = hard[0]["results"][0]
    assert scored["desc"] == "off by 2"
    assert scored["metadata"] == {"difficulty": "hard", "parsed": 40.0}
    assert first["all_instance_outputs"][1][1]["responses"][0]["response"] == "That makes 2.5"
    assert again == first
    assert sorted(path.name for path in tmp_path.iterdir())[:2] == [
        "0-0-output.json",
        "0-0-results.json",  # genlm.eval's names
    ]
    assert len(list(tmp_path.iterdir())) == 12
    cached = json.loads((tmp_path / "2-1-results.json").read_text())
    assert cached["runtime_seconds"] == first["all_instance_outputs"][2][1]["runtime_seconds"]
    assert cached["runtime_seconds"] >= 0  # the adaptor did not time itself: its call was timed
    assert cached["results"][0]["metadata"]["difficulty"] == "hard"


class CountingEvaluator:
    """Scores on 0-10 (genlm.eval's scores are any float), counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def evaluate_sample(self, instance: dict[str, Any], response: str) -> float:
        self.calls += 1
        return 7.5 if instance["hint"] in response else 0.0


class ChatAdaptor:
    """A model adaptor as an object: its async `generate` asks the endpoint."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    async def generate(self, instance: dict[str, Any]) -> str:
        async with AsyncOpenAI(base_url=self.base_url, api_key="sk-test") as client:
            reply = await client.chat.completions.create(
                model="solver", messages=[{"role": "user", "content": instance["question"]}]
            )
        return reply.choices[0].message.content


DATASET = [{"instance_id": "a", "question": "What is 2 + 2?", "hint": "4"}]


def test_overwrite_results_rescores_and_overwrite_outputs_asks_again(tmp_path):
    evaluator = CountingEvaluator()
    with FakeLLMServer(solver) as server:
        model = ChatAdaptor(server.base_url)
        first = asyncio.run(run_evaluation(DATASET, model, evaluator, tmp_path))
        asyncio.run(run_evaluation(DATASET, model, evaluator, tmp_path, overwrite_results=True))
        assert (server.request_count, evaluator.calls) == (1, 2)
        with pytest.raises(ConfigError, match="overwrite_outputs needs overwrite_results"):
            run_evaluation(DATASET, model, evaluator, tmp_path, overwrite_outputs=True)
        assert server.request_count == 1
        asyncio.run(
            run_evaluation(
                DATASET, model, evaluator, tmp_path, overwrite_results=True, overwrite_outputs=True
            )
        )
        assert (server.request_count, evaluator.calls) == (2, 3)
    assert first["average_weighted_accuracy"] == 7.5
    assert first["all_instance_outputs"][0][0]["responses"][0] == {
        "response": "It is 4.",
        "weight": 1.0,
    }


def test_a_weighted_ensemble_is_scored_by_its_weighted_mean():
    async def ensemble(instance: dict[str, Any]) -> ModelOutput:
        return ModelOutput([ModelResponse("4", 0.75), ModelResponse("5", 0.25)])

    results = asyncio.run(run_evaluation(DATASET, ensemble, CountingEvaluator()))
    assert results["average_weighted_accuracy"] == pytest.approx(0.75 * 7.5)
    assert results["all_instance_results"][0][0]["results"][1]["score"] == 0.0


def test_weights_are_used_as_given_as_genlm_does_and_as_the_pipeline_metric_does():
    """Weights 0.5 and 0.3 (not summing to 1), scores 7.5 and 0: genlm.eval's sum of score
    x weight is 3.75, not the weighted mean 4.6875; the evaluate pipeline's own
    weighted_accuracy agrees; an adaptor's own runtime_seconds is kept in the result."""

    async def ensemble(instance: dict[str, Any]) -> ModelOutput:
        return ModelOutput([ModelResponse("4", 0.5), ModelResponse("5", 0.3)], 1.25)

    results = asyncio.run(run_evaluation(DATASET, ensemble, CountingEvaluator()))
    assert results["average_weighted_accuracy"] == pytest.approx(0.5 * 7.5)
    (result,) = results["all_instance_results"][0]
    assert result["runtime_seconds"] == 1.25
    pipeline, _ = ensemble_weighted_accuracy(
        pd.Series([7.5, 0.0]), pd.Series([0.5, 0.3]), pd.Series(["a", "a"]), pd.Series([0, 0])
    )
    assert pipeline == result["weighted_accuracy"]


def test_unusable_instances_and_scores_are_named():
    async def answer(instance: dict[str, Any]) -> str:
        return "4"

    class Broken:
        def evaluate_sample(self, instance: dict[str, Any], response: str) -> Any:
            return float("nan")

    with pytest.raises(InputError, match="occurs twice"):
        asyncio.run(run_evaluation(DATASET * 2, answer, CountingEvaluator()))
    with pytest.raises(InputError, match="instance a-0: the evaluator must return a finite"):
        asyncio.run(run_evaluation(DATASET, answer, Broken()))
    with pytest.raises(ConfigError, match="n_replicates"):
        run_evaluation(DATASET, answer, Broken(), n_replicates=0)


def test_the_pipelines_evaluators_and_a_lost_output_file(tmp_path):
    instances = [{"instance_id": 7, "question": "10 / 4?", "reference": "2.5"}]
    calls = []

    async def answer(instance: dict[str, Any], output_dir: Any, replicate: int) -> str:
        calls.append(replicate)
        return "about 2.50"

    first = asyncio.run(run_evaluation(instances, answer, NumericMatch(), tmp_path))
    (tmp_path / "7-0-output.json").unlink()  # its result now belongs to no output
    again = asyncio.run(run_evaluation(instances, answer, exact_match, tmp_path))
    assert calls == [0, 0]
    assert first["average_weighted_accuracy"] == 1.0
    assert first["all_instance_results"][0][0]["results"][0]["desc"]  # NumericMatch's detail
    assert again["average_weighted_accuracy"] == 0.0  # scored again, by the new evaluator
