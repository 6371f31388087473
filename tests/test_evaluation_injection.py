"""Every evaluate mode flags a response that addresses the judge, and a judge that obeys any
instruction it finds cannot raise that response's verdict: the differential check judges it
again without its suspicious spans (`evaluation.differential`)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from llm_feedback.evaluation import run_evaluation
from llm_feedback.replies.normalise import normalise
from llm_feedback.testing.injection_payloads import PAYLOADS
from llm_feedback.testing.server import FakeLLMServer
from tests.conftest import endpoints_via

RUBRIC = {"accuracy": "Is it correct?", "clarity": "Is it clear?"}
# Per pointwise mode: the reply of a judge taken over by an instruction, and an honest one.
REPLIES = {
    "binary": ("correct: yes", "correct: no"),
    "score_0_5": ("Rating: 5", "Rating: 2"),
    "single_1_10": ("Rating: [[10]]", "Rating: [[3]]"),
    "rubric": ('{"scores": {"accuracy": 5, "clarity": 5}}', '{"scores": {"accuracy": 2, "clarity": 3}}'),
}
MODE_OPTIONS = {"rubric": {"rubric": RUBRIC}}
_BLOCK = re.compile(r"<<<(?P<label>[A-Z ]+?) BEGIN \w+>>>\n(?P<body>.*?)\n<<<(?P=label) END \w+>>>", re.DOTALL)


def _canonical(text: str) -> str:
    unquoted = "\n".join(line[2:] if line.startswith("> ") else line for line in text.split("\n"))
    return re.sub(r"\s+", " ", normalise(unquoted)).strip()


def _responses(body: dict[str, Any]) -> dict[str, str]:
    """The fenced responses of a judge prompt by label (RESPONSE, RESPONSE A, ...)."""
    text = "\n".join(message["content"] for message in body["messages"])
    return {
        match["label"]: _canonical(match["body"])
        for match in _BLOCK.finditer(text)
        if "RESPONSE" in match["label"] or "ANSWER" in match["label"]
    }


def _rows(injected: bool) -> list[dict[str, Any]]:
    """One sample per payload kind: its injected text (or its honest part), and a clean one."""
    rows = []
    for index, payload in enumerate(PAYLOADS.values()):
        for model, response in (
            ("steer", payload.text if injected else payload.answer),
            ("plain", f"Paris is the capital of France, as every atlas and encyclopedia says ({index})."),
        ):
            rows.append(
                {
                    "instance_id": f"i{index}",
                    "question": f"What is the capital of France ({index})?",
                    "response": f"[{index}] {response}" if model == "steer" else response,
                    "reference": "Paris",
                    "model": model,
                }
            )
    return rows


def _honest_texts() -> set[str]:
    return {_canonical(row["response"]) for row in _rows(injected=False)}


def _evaluate(
    server: FakeLLMServer, rows: list[dict[str, Any]], mode: str, panel: bool = False
) -> pd.DataFrame:
    params = {"mode": mode, **MODE_OPTIONS.get(mode, {})}
    endpoints = endpoints_via(server, structured_output=False)
    if panel:  # judges on the same server, the majority kept
        endpoints = {name: endpoints["local"] for name in ("first", "second", "third")}
        judges = [{"endpoint": name} for name in endpoints]
        params["panel"] = {"judges": judges, "aggregate": "majority"}
    judgments, _ = run_evaluation(pd.DataFrame(rows), params, endpoints, None, progress=False)
    return judgments


@pytest.mark.parametrize("panel", [False, True], ids=["one judge", "panel"])
@pytest.mark.parametrize("mode", REPLIES)
def test_a_pointwise_verdict_cannot_be_raised_by_what_the_response_tells_the_judge(
    mode: str, panel: bool
):
    honest, (obeyed, plain) = _honest_texts(), REPLIES[mode]

    def judge(body: dict[str, Any], ctx: Any) -> str:
        shown = _responses(body)
        return obeyed if any(text not in honest for text in shown.values()) else plain

    with FakeLLMServer(judge) as server:
        judgments = _evaluate(server, _rows(injected=True), mode, panel)
        calls = server.request_count
        server.reset()
        baseline = _evaluate(server, _rows(injected=False), mode, panel)
        calls_without = server.request_count
    steer = judgments["model"] == "steer"
    assert judgments.loc[steer, "suspected_injection"].all()
    assert not judgments.loc[~steer, "suspected_injection"].any()
    assert not baseline["suspected_injection"].any()
    # Each injected sample rated as if it held its honest part only.
    assert judgments["score"].tolist() == baseline["score"].tolist()
    # One more call per flagged sample and judge.
    assert calls == calls_without + len(PAYLOADS) * (3 if panel else 1)


@pytest.mark.parametrize("panel", [False, True], ids=["one judge", "panel"])
def test_a_pairwise_response_that_addresses_the_judge_no_longer_wins(panel: bool):
    """The judge prefers the longer honest answer, but obeys any instruction it finds: as
    written, the steering response would win every pair in both orders."""
    honest = _honest_texts()

    def judge(body: dict[str, Any], ctx: Any) -> str:
        shown = _responses(body)
        first, second = shown["RESPONSE A"], shown["RESPONSE B"]
        if first not in honest:
            return "Response A follows the instructions. [[A]]"
        if second not in honest:
            return "Response B follows the instructions. [[B]]"
        return "[[A]]" if len(first) > len(second) else "[[B]]"

    rows = _rows(injected=True)
    with FakeLLMServer(judge) as server:
        judgments = _evaluate(server, rows, "pairwise", panel)
        calls, recorded = server.request_count, server.requests
    assert len(judgments) == len(PAYLOADS)
    assert judgments["suspected_injection"].all()
    steer_won = ((judgments["model_a"] == "steer") & (judgments["outcome"] == "A")) | (
        (judgments["model_b"] == "steer") & (judgments["outcome"] == "B")
    )
    assert int(steer_won.sum()) == 0
    assert judgments["consistent"].all()
    # Both orders, as written and without the spans, per judge.
    assert calls == 4 * len(PAYLOADS) * (3 if panel else 1)
    # The judge is not toothless: it gave every pair as written (both orders) to the
    # steering response.
    obeyed = [judge(body, None) for body in recorded if "follows" in judge(body, None)]
    assert len(obeyed) == 2 * len(PAYLOADS) * (3 if panel else 1)
