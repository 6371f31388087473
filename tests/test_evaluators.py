"""Evaluators in place of the judge, the new sample columns and pass@k's first-k form."""

from __future__ import annotations

import math
import re
import time
from typing import Any

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.evaluation import run_evaluation
from llm_feedback.evaluation.evaluators import EvaluatorResult
from llm_feedback.evaluation.metrics import ensemble_weighted_accuracy, pass_at_k_first_table
from llm_feedback.params import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer

EVALUATORS = "llm_feedback.evaluation.evaluators"
DEFINED = {"local": {"backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1"}}


def score(rows: list[dict[str, Any]], evaluator: str, cache=None, **params: Any) -> pd.DataFrame:
    frame = pd.DataFrame([{"question": "Q?", "model": "m", "replicate": 0, **row} for row in rows])
    params = {"evaluator": evaluator, **params}
    judgments, _ = run_evaluation(frame, params, DEFINED, cache, progress=False)
    return judgments


def test_numeric_match_reads_the_last_number_within_tolerance():
    rows = [
        {"instance_id": "a", "response": "First 3, then 1,234.0 in all.", "reference": "1234"},
        {"instance_id": "b", "response": "about 3.1416", "reference": "3.14159"},
        {"instance_id": "c", "response": "no idea", "reference": "2"},
        {"instance_id": "d", "response": "2", "reference": "two"},
    ]
    strict = score(rows, f"{EVALUATORS}:NumericMatch")
    loose = score(rows, f"{EVALUATORS}:NumericMatch", evaluator_options={"abs_tol": 0.001})
    assert strict["score"].tolist()[:3] == [1.0, 0.0, 0.0]
    assert loose["score"].tolist()[:3] == [1.0, 1.0, 0.0]
    assert strict["raw_reply"][2] == "no number in the response"
    assert strict["parse_status"][3] == "invalid" and "not a number" in strict["raw_reply"][3]


def test_exact_match_and_regex_match():
    rows = [
        {"instance_id": "a", "response": "The Paris.", "reference": "paris"},
        {"instance_id": "b", "response": "Lyon", "reference": r"^L\w+n$"},
        {"instance_id": "c", "response": "x", "reference": "unknown"},
    ]
    exact = score(rows, f"{EVALUATORS}:exact_match")
    assert exact["score"].tolist()[:2] == [1.0, 0.0]
    assert exact["parse_status"][2] == "invalid"  # an unknown reference
    by_reference = score(rows[:2], f"{EVALUATORS}:RegexMatch")
    assert by_reference["score"].tolist() == [0.0, 1.0]
    given = score(
        rows[:2],
        f"{EVALUATORS}:RegexMatch",
        evaluator_options={"pattern": "PARIS", "ignore_case": True},
    )
    assert given["score"].tolist() == [1.0, 0.0] and given["raw_reply"][0] == "matched 'Paris'"
    broken = score(
        [{"instance_id": "a", "response": "x", "reference": "("}], f"{EVALUATORS}:RegexMatch"
    )
    assert broken["parse_status"][0] == "invalid"


def test_code_test_passes_fails_and_times_out():
    test = "assert double(4) == 8"
    rows = [
        {"instance_id": "ok", "response": "```python\ndef double(x):\n    return 2 * x\n```"},
        {"instance_id": "wrong", "response": "def double(x):\n    return x + 2"},
        {"instance_id": "loop", "response": "def double(x):\n    while True:\n        pass"},
        {"instance_id": "hang", "response": "import time\ntime.sleep(30)"},
    ]
    for row in rows:
        row["reference"] = test
    started = time.monotonic()
    judgments = score(rows, f"{EVALUATORS}:CodeTest", evaluator_options={"timeout_s": 1})
    assert time.monotonic() - started < 10
    assert judgments["score"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert judgments["raw_reply"][0] == "passed"
    assert "AssertionError" in judgments["raw_reply"][1]
    assert judgments["raw_reply"][2] == judgments["raw_reply"][3] == "timed out after 1 s"


class LengthCap:
    def __init__(self, limit: int) -> None:
        self.limit = limit

    def evaluate_sample(self, sample: dict[str, Any], response: str) -> EvaluatorResult:
        return EvaluatorResult(float(len(response) <= self.limit), f"{len(response)} chars")


def share_of_words(sample: dict[str, Any], response: str, *, word: str) -> float:
    words = response.split()
    return words.count(word) / len(words) if words else 0.0


def too_big(sample: dict[str, Any], response: str) -> int:
    return 7


def test_custom_functions_and_classes_with_options(tmp_path):
    rows = [
        {"instance_id": "a", "response": "yes yes no", "reference": None},
        {"instance_id": "b", "response": "no", "reference": None},
    ]
    shares = score(rows, f"{__name__}:share_of_words", evaluator_options={"word": "yes"})
    assert shares["score"].tolist() == pytest.approx([2 / 3, 0.0])
    assert shares["correct"].tolist() == [False, False]  # 1 passes by default
    passing = score(
        rows,
        f"{__name__}:share_of_words",
        evaluator_options={"word": "yes"},
        pass_threshold=0.5,
    )
    assert passing["correct"].tolist() == [True, False]
    capped = score(rows, f"{__name__}:LengthCap", evaluator_options={"limit": 5})
    assert capped["score"].tolist() == [0.0, 1.0] and capped["raw_reply"][1] == "2 chars"
    off_scale = score(rows, f"{__name__}:too_big")
    assert off_scale["parse_status"].eq("out_of_range").all() and off_scale["score"].isna().all()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"evaluator": f"{__name__}:LengthCap"}, "evaluate.evaluator_options do not suit"),
        (
            {"evaluator": f"{__name__}:share_of_words", "evaluator_options": {"wort": "x"}},
            "evaluate.evaluator_options do not suit",
        ),
        ({"evaluator": f"{__name__}:RUBRIC_LIKE"}, "neither a function nor a class"),
        ({"evaluator": f"{__name__}:NotAnEvaluator"}, "has no evaluate_sample method"),
        (
            {"evaluator": f"{EVALUATORS}:RegexMatch", "evaluator_options": {"pattern": "("}},
            "is not a regular expression",
        ),
        ({"evaluator_options": {"abs_tol": 1}}, "evaluate.evaluator is not"),
        (
            {"evaluator": f"{EVALUATORS}:exact_match", "mode": "score_0_5"},
            "set evaluate.mode to binary",
        ),
        ({"mode": "score_0_5", "pass_threshold": 6}, "evaluate.pass_threshold must be"),
        ({"pass_threshold": 0}, "evaluate.pass_threshold must be"),
        ({"mode": "pairwise", "pass_threshold": 5}, "pairwise mode has no pass@k"),
    ],
)
def test_bad_evaluator_settings_are_named(params, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_evaluate(params, DEFINED)


RUBRIC_LIKE = {"not": "callable"}


class NotAnEvaluator:
    pass


def test_evaluator_scores_are_cached_per_sample_and_response(tmp_path):
    cache = tmp_path / "cache.sqlite"
    rows = [
        {"instance_id": "a", "response": "4", "reference": "4", "replicate": 0},
        {"instance_id": "a", "response": "4", "reference": "4", "replicate": 1},
    ]
    first = score(rows, f"{EVALUATORS}:NumericMatch", cache)
    second = score(rows, f"{EVALUATORS}:NumericMatch", cache)
    other_options = score(
        rows, f"{EVALUATORS}:NumericMatch", cache, evaluator_options={"abs_tol": 0.5}
    )
    assert first["cached"].tolist() == [False, False]
    assert second["cached"].tolist() == [True, True]
    assert not other_options["cached"].any()  # the options are part of the key


@pytest.mark.parametrize(
    ("change", "mode", "message"),
    [
        (
            {"ensemble_member": 1, "response": None},
            "binary",
            "row 1 (instance_id 'a'), column 'response': an ensemble member other than 0",
        ),
        (
            {"ensemble_member": 1, "replicate": 0},
            "pairwise",
            "column 'ensemble_member': pairwise mode",
        ),
        ({"level": 1.5}, "binary", "column 'level': must be a non-empty string or an integer"),
        ({"category": ""}, "binary", "column 'category': must be a non-empty string"),
        ({"runtime_s": -1}, "binary", "column 'runtime_s': must be a number >= 0"),
        ({"replicate": 0}, "binary", "ensemble_member) = (a, 1, m, 0, 0) repeats row 0"),
    ],
)
def test_bad_sample_columns_fail_before_any_call(change, mode, message):
    rows = [
        {"instance_id": "a", "question": "Q?", "response": "r", "reference": "x", "model": "m"}
        for _ in range(2)
    ]
    for replicate, row in enumerate(rows):
        row |= {"replicate": replicate, "ensemble_member": 0}
    rows[1] |= change
    with FakeLLMServer() as server:
        endpoints = {"local": {**DEFINED["local"], "base_url": server.base_url}}
        with pytest.raises(InputError, match=re.escape(message)):
            run_evaluation(pd.DataFrame(rows), {"mode": mode}, endpoints, progress=False)
        assert server.request_count == 0


def test_levels_read_from_json_with_gaps_stay_integers():
    rows = [
        {"instance_id": "a", "response": "1", "reference": "1", "level": 1},
        {"instance_id": "b", "response": "2", "reference": "2"},
        {"instance_id": "c", "response": "3", "reference": "3", "level": 3},
    ]
    judgments = score(rows, f"{EVALUATORS}:NumericMatch")  # the level column is 1.0, NaN, 3.0
    assert judgments["level"].tolist() == ["1", pd.NA, "3"]


def test_pass_at_k_first_depends_on_the_order_and_skips_short_histories():
    frame = pd.DataFrame(
        {
            "model": ["m"] * 5,
            "item": ["a", "a", "a", "b", "b"],
            "replicate": [2, 0, 1, 0, 1],
            "passed": [1.0, 0.0, math.nan, 1.0, 0.0],
        }
    )
    zero = pass_at_k_first_table(frame, "item", "replicate", "passed", [1, 2, 3])
    # a in order: 0, missing (a failure), 1; b: 1, 0.
    assert zero["pass_at_k"].tolist() == [0.5, 0.5, 1.0]
    assert zero["n_instances_too_few"].tolist() == [0, 0, 1] and (zero["n_missing"] == 1).all()
    exclude = pass_at_k_first_table(frame, "item", "replicate", "passed", missing="exclude")
    # Without the missing attempt a is 0, 1: solved at k = 2.
    assert exclude["k"].tolist() == [1, 2] and exclude["pass_at_k"].tolist() == [0.5, 1.0]


def test_ensemble_weighted_accuracy_drops_unscored_responses():
    value, instances = ensemble_weighted_accuracy(
        pd.Series([1.0, math.nan, 0.0, 1.0]),
        pd.Series([0.6, 0.4, 0.5, 0.5]),
        pd.Series(["a", "a", "b", "b"]),
        pd.Series([0, 0, 0, 1]),
    )
    assert value == pytest.approx((0.6 + (0.0 + 0.5) / 2) / 2) and instances == 2
