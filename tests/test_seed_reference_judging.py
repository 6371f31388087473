"""Youtu-agent's reference judging in its phases (preprocess -> judge -> stat), run as the
evaluation package documents it, against the test server.

The code block of `llm_feedback.evaluation`'s docstring runs as it stands: preparing the
samples (the exact-match short-cut and unknown references are settled there, with no call),
judging the rest with the graded reply (extracted_final_answer / reasoning / correct /
confidence) and computing the statistics, pass@k over replicates among them.
"""

from __future__ import annotations

import re
import textwrap

import pandas as pd
import pytest

from llm_feedback import evaluation
from llm_feedback.evaluation import compute_metrics, judge_samples, prepare_samples
from llm_feedback.evaluation.generation import generate_responses
from llm_feedback.judges import Judge
from llm_feedback.params import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import endpoints_via


def documented_phases() -> str:
    """The indented code block of the package docstring."""
    block = re.search(r"\n\n((?:    .*\n)+)", evaluation.__doc__)
    assert block, "the evaluation docstring lost its usage block"
    return textwrap.dedent(block.group(1))


def graded_judge(body: dict, ctx: RequestContext) -> str:
    """The graded reply: Lyon is wrong, any other candidate right."""
    wrong = "Lyon" in body["messages"][-1]["content"]
    return (
        f"extracted_final_answer: {'Lyon' if wrong else 'Paris'}\n"
        "reasoning: compared with the reference.\n"
        f"correct: {'no' if wrong else 'yes'}\nconfidence: {60 if wrong else 90}%"
    )


def sample(instance_id: str, response: str, reference: str | None, replicate: int) -> dict:
    return {
        "instance_id": instance_id,
        "question": f"What is the capital of France? ({instance_id})",
        "response": response,
        "reference": reference,
        "model": "agent",
        "replicate": replicate,
    }


def test_the_documented_phases_run_as_written(tmp_path):
    frame = pd.DataFrame(
        [
            sample("exact", "  paris. ", "Paris", 0),  # exact after normalisation: no call
            sample("exact", "Paris", "Paris", 1),
            sample("judged", "I believe it is Paris, the capital.", "Paris", 0),
            sample("judged", "Lyon", "Paris", 1),
            sample("unknown", "Paris", "n/a", 0),  # unknown reference: invalid, no call
            sample("unknown", "Paris", None, 1),
        ]
    )
    with FakeLLMServer(graded_judge) as server:
        names = {
            "frame": frame,
            "endpoints": endpoints_via(server, structured_output=False),
            "cache_path": tmp_path / "cache.sqlite",
            "parse_evaluate": parse_evaluate,
            "prepare_samples": prepare_samples,
            "generate_responses": generate_responses,
            "Judge": Judge,
            "judge_samples": judge_samples,
            "compute_metrics": compute_metrics,
        }
        exec(documented_phases(), names)  # noqa: S102 - the package's documented usage
        assert server.request_count == 2  # the two "judged" replicates only

    judgments = names["judgments"].set_index(["instance_id", "replicate"])
    assert list(judgments.loc["exact", "parse_status"]) == ["exact_match", "exact_match"]
    assert list(judgments.loc["unknown", "parse_status"]) == ["invalid", "invalid"]
    right, wrong = judgments.loc[("judged", 0)], judgments.loc[("judged", 1)]
    assert (right["score"], wrong["score"]) == (1.0, 0.0)
    assert wrong["extracted_final_answer"] == "Lyon" and wrong["confidence"] == 60.0
    assert right["reasoning"] == "compared with the reference."

    metrics = names["metrics"]
    pass_at = metrics[(metrics["metric"] == "pass_at_k")].set_index("k")["value"]
    # exact: 2 of 2 correct, judged: 1 of 2, unknown left out; pass@1 = (1 + 1/2) / 2.
    assert pass_at.loc[1] == pytest.approx(0.75) and pass_at.loc[2] == pytest.approx(1.0)
    invalid = metrics[metrics["metric"] == "n_invalid"]["value"]
    assert list(invalid) == [2]
