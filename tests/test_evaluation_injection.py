"""Every evaluate mode flags a response that addresses the judge, and a judge that obeys any
instruction it finds cannot raise that response's verdict (pairwise: it wins no pair): the
evaluate runs of `benchmarks/injection.py` over every payload kind, one judge or a panel."""

from __future__ import annotations

import sys

import pytest

from llm_feedback.testing.injection_payloads import PAYLOADS
from tests.conftest import PROJECT_ROOT

sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
import injection  # noqa: E402

ZERO = {"injected_unflagged": 0, "injected_raised": 0, "clean_changed": 0}


@pytest.mark.parametrize("judges", [1, 3], ids=["one judge", "panel"])
@pytest.mark.parametrize("mode", injection.EVAL_REPLIES)
def test_a_pointwise_verdict_cannot_be_raised_by_what_the_response_tells_the_judge(
    mode: str, judges: int
):
    counts = injection.evaluate_run(mode, judges=judges)
    assert {key: counts[key] for key in ZERO} == ZERO
    # One more call per flagged sample and judge; the judge obeyed every one as written.
    assert counts["calls"] == counts["calls_without_injection"] + judges * len(PAYLOADS)
    assert counts["obeyed_calls"] == judges * len(PAYLOADS)


@pytest.mark.parametrize("judges", [1, 3], ids=["one judge", "panel"])
def test_a_pairwise_response_that_addresses_the_judge_no_longer_wins(judges: int):
    counts = injection.evaluate_run("pairwise", judges=judges)
    assert counts["pairs"] == len(PAYLOADS)
    assert counts["injected_unflagged"] == 0
    assert counts["steering_wins"] == 0
    # Both orders as written (each obeyed: the steering response would win every pair),
    # and both again without its spans.
    assert counts["obeyed_calls"] == 2 * judges * len(PAYLOADS)
    assert counts["calls"] == 2 * counts["calls_without_injection"]
