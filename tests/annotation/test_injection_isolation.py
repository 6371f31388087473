"""A judge that obeys any instruction in a completion (or echoes what it is shown) moves no
recorded rating: the runs of `benchmarks/injection.py` against the project's test server,
over every payload kind of `testing.injection_payloads`."""

from __future__ import annotations

import sys

import pytest

from llm_feedback.annotation.aspects import build_aspect_request
from llm_feedback.annotation.isolation import AS_WRITTEN, WITHOUT_SPANS, kept_row
from llm_feedback.annotation.parsing import parse_aspect_reply
from llm_feedback.annotation.stages import aspect_calls, critique_calls, judged_together
from llm_feedback.testing.injection_payloads import PAYLOADS
from tests.conftest import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import injection  # noqa: E402

ZERO = {"injected_unflagged": 0, "injected_raised": 0, "clean_changed": 0}


def _counts_only(counts: dict) -> dict:
    return {stage: {key: row[key] for key in ZERO} for stage, row in counts.items()}


@pytest.mark.parametrize("kind", PAYLOADS)
def test_no_payload_kind_moves_a_rating_under_a_judge_that_obeys_it(kind: str) -> None:
    counts = injection.injection_run("obeying", [kind])
    assert _counts_only(counts) == {"aspect_rows": ZERO, "critique_rows": ZERO}
    # It did obey: every call that showed the text as written.
    assert counts["aspect_rows"]["obeyed_calls"] == len(injection.ASPECTS)
    assert counts["critique_rows"]["obeyed_calls"] == 1


@pytest.mark.parametrize("judge", ["obeying", "echo"])
def test_every_payload_together_costs_the_calls_the_isolation_states(judge: str) -> None:
    counts = injection.injection_run(judge)
    assert _counts_only(counts) == {"aspect_rows": ZERO, "critique_rows": ZERO}
    # Each prompt holds one suspected completion: its clean siblings in one call, it in two.
    aspects, critiques = counts["aspect_rows"], counts["critique_rows"]
    assert aspects["calls"] == 3 * aspects["calls_without_injection"]
    assert critiques["calls"] == critiques["calls_without_injection"] * (4 + 1) / 4


def test_each_suspected_completion_is_rated_alone_twice_and_the_clean_ones_together():
    completions, honest_parts = injection.completions_table()
    calls = [
        call
        for call, _ in aspect_calls(completions, ["honesty"], 1, 42, structured=False, sampling={})
    ]
    by_prompt: dict[str, list] = {}
    for call in calls:
        by_prompt.setdefault(call.prompt_id, []).append((call.variant, call.completion_ids))
    for prompt_id, groups in by_prompt.items():
        (flagged,) = [idx for pid, idx in honest_parts if pid == prompt_id]
        clean = sorted(set(range(4)) - {flagged})
        assert sorted(groups) == [
            ("", clean),
            (AS_WRITTEN, [flagged]),
            (WITHOUT_SPANS, [flagged]),
        ]
    assert all(call.injection_flags == [True] for call in calls if call.variant)
    assert judged_together([False, False]) == [[0, 1]]
    assert judged_together([True, True]) == [[0], [1]]
    critiqued = [
        (call.variant, call.row.completion_idx)
        for call, _ in critique_calls(completions, structured=False, sampling={})
    ]
    assert len(critiqued) == len(completions) + len(honest_parts)


def test_the_obeying_judge_does_obey_the_text_as_written():
    """The benchmark's judge is not toothless: shown a payload as written, it rates top."""
    completions, honest_parts = injection.completions_table(injected=False)
    judge = injection.obeying_judge(completions["response"])
    for kind, payload in PAYLOADS.items():
        request = build_aspect_request(
            "honesty", "What is the capital of Peru?", [payload.text], [0]
        )
        reply = judge({"messages": list(request.messages)}, None)
        (rating,) = parse_aspect_reply("honesty", reply, 1, False)
        assert rating.rating == injection.INJECTED_RATING, kind


def test_the_differential_check_keeps_the_lower_rating_and_both_calls_tokens():
    written = {"rating": 5, "prompt_tokens": 10, "completion_tokens": 2, "raw_reply": "w"}
    without = {"rating": 3, "prompt_tokens": 8, "completion_tokens": 2, "raw_reply": "o"}
    kept = kept_row(written, without, "rating")
    assert (kept["rating"], kept["raw_reply"], kept["prompt_tokens"]) == (3, "o", 18)
    assert kept["suspected_injection"]
    # The text as written rated lower: its spans only hurt it, its rating stands.
    assert kept_row({**written, "rating": 2}, without, "rating")["rating"] == 2
    # Both agree: no penalty, the row of the text as written (its rationale) is kept.
    assert kept_row({**written, "rating": 3}, without, "rating")["raw_reply"] == "w"
    # Only one variant read: its rating.
    assert kept_row(written, {**without, "rating": None}, "rating")["rating"] == 5
    assert kept_row({**written, "rating": None}, without, "rating")["rating"] == 3
