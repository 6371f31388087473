"""A judge that obeys (or echoes) rating instructions in a completion moves no recorded
rating: the runs of `benchmarks/injection.py` against the project's test server."""

from __future__ import annotations

import sys

import pandas as pd

from llm_feedback.annotation.stages import aspect_calls, judged_together
from tests.conftest import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import injection  # noqa: E402


def test_an_obeying_judge_records_no_injected_rating_unflagged_and_no_sibling_moves():
    counts = injection.injection_run("obeying")
    assert counts == {
        "aspect_rows": {"injected_unflagged": 0, "clean_changed": 0},
        "critique_rows": {"injected_unflagged": 0, "clean_changed": 0},
    }


def test_an_echo_judge_hands_over_no_rating():
    counts = injection.injection_run("echo")
    assert counts == {
        "aspect_rows": {"injected_unflagged": 0, "clean_changed": 0},
        "critique_rows": {"injected_unflagged": 0, "clean_changed": 0},
    }


def test_each_suspected_completion_is_rated_alone_and_the_clean_ones_together():
    completions, injected = injection.completions_table()
    calls = [
        call
        for call, _ in aspect_calls(completions, ["honesty"], 1, 42, structured=False, sampling={})
    ]
    by_prompt = {}
    for call in calls:
        by_prompt.setdefault(call.prompt_id, []).append(sorted(call.completion_ids))
    for prompt_id, groups in by_prompt.items():
        (flagged,) = [idx for pid, idx in injected if pid == prompt_id]
        assert sorted(groups) == sorted([[flagged], sorted(set(range(4)) - {flagged})])
    assert all(call.injection_flags == [True] for call in calls if len(call.order) == 1)
    assert judged_together([False, False]) == [[0, 1]]
    assert judged_together([True, True]) == [[0], [1]]


def test_the_obeying_judge_does_obey_a_shown_injection():
    """The judge of the benchmark is not toothless: the injected rows it rated alone hold
    the injected rating, flagged."""
    completions, injected = injection.completions_table()
    from llm_feedback.annotation.stages import aspect_annotations_table
    from llm_feedback.backends import EndpointConfig, LLMClient
    from llm_feedback.testing.server import FakeLLMServer

    clean = set(completions["response"]) - {injection.INJECTIONS["plain"]}
    with FakeLLMServer(injection.obeying_judge(clean)) as server:
        config = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": "m",
                "base_url": server.base_url,
                "structured_output": False,
            },
            name="obeying",
        )
        with LLMClient(config, None, progress=False) as client:
            rows = aspect_annotations_table(completions, client, aspects=["honesty"]).frame()
    keys = pd.MultiIndex.from_frame(rows[["prompt_id", "completion_idx"]])
    flagged_rows = rows[keys.isin(list(injected))]
    assert flagged_rows["suspected_injection"].all()
    plain = flagged_rows[flagged_rows["prompt_id"] == "p0"]
    assert plain["rating"].tolist() == [injection.INJECTED_RATING]
