"""Pairwise judging of MT-Bench's second turn: both conversations shown whole, both orders,
human judgments kept on both turns and the judge's vote-by-vote agreement with them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from llm_feedback.evaluation.human_agreement import (
    WITH_TIES,
    WITHOUT_TIES,
    agreement_metric_rows,
    vote_agreement,
)
from llm_feedback.judges import JudgeItem
from llm_feedback.judges.kinds.pairwise import KIND, build_pairwise_request
from llm_feedback.judges.kinds.spec import Asking, KindOptions
from llm_feedback.testing.server import FakeLLMServer, RequestContext
from tests.conftest import SHARED_DATA, endpoints_via
from tests.validation.test_formats import MTBENCH_ROWS, conversation

MT_BENCH = SHARED_DATA / "mt_bench"
# FastChat's MT-Bench human and GPT-4 pair judgments (the `human` and `gpt4_pair` splits of
# its published judgments), where copies have been put beside the shared data.
HUMAN_JUDGMENTS = MT_BENCH / "human_judgments.json"
GPT4_PAIR_JUDGMENTS = MT_BENCH / "gpt4_pair_judgments.json"
_BLOCK = re.compile(
    r"<<<(?P<name>[A-Z0-9 ]+) BEGIN (?P<nonce>\w+)>>>\n(?P<text>.*?)\n?<<<(?P=name) END",
    re.DOTALL,
)


def blocks(prompt: str) -> dict[str, str]:
    return {match["name"]: match["text"] for match in _BLOCK.finditer(prompt)}


def test_second_turn_request_shows_both_conversations_and_names_the_second_answer():
    item = JudgeItem(
        question="Now make it rhyme.",
        response="gpt rhyme",
        other_response="llama rhyme",
        prior_question="Write a haiku.",
        prior_response="gpt haiku",
        other_prior_response="llama haiku",
    )
    options = KindOptions(scale=KIND.default_scale)
    prompts = [KIND.ask(order, options, Asking())[0] for order in item.both_orders()]
    shown = [blocks(request.messages[-1]["content"]) for request in prompts]
    assert shown[0] == {
        "QUESTION 1": "Write a haiku.",
        "ANSWER A 1": "gpt haiku",
        "ANSWER B 1": "llama haiku",
        "QUESTION 2": "Now make it rhyme.",
        "ANSWER A 2": "gpt rhyme",
        "ANSWER B 2": "llama rhyme",
    }
    # Swapped: each assistant keeps its own first answer.
    assert shown[1]["ANSWER A 1"] == "llama haiku" and shown[1]["ANSWER A 2"] == "llama rhyme"
    assert shown[1]["ANSWER B 1"] == "gpt haiku" and shown[1]["ANSWER B 2"] == "gpt rhyme"
    text = prompts[0].messages[-1]["content"]
    assert "second user message" in text and "[[A]]" in text
    # A's whole conversation comes before B's.
    assert text.index("gpt haiku") < text.index("gpt rhyme") < text.index("llama haiku")
    with_reference = build_pairwise_request(
        "q2", "a2", "b2", prior_question="q1", prior_responses=("a1", "b1"), reference="r2"
    )
    assert blocks(with_reference.messages[-1]["content"])["REFERENCE ANSWER"] == "r2"


class ConversationJudge:
    """Prefers the assistant whose second answer is longer; records what it was shown."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    def __call__(self, body: dict[str, Any], ctx: RequestContext) -> str:
        shown = blocks(body["messages"][-1]["content"])
        self.seen.append(shown)
        if "ANSWER A 2" in shown:
            first, second = shown["ANSWER A 2"], shown["ANSWER B 2"]
        else:
            first, second = shown["RESPONSE A"], shown["RESPONSE B"]
        if len(first) == len(second):
            return "Equal.\nVerdict: [[C]]"
        return f"Longer wins.\nVerdict: [[{'A' if len(first) > len(second) else 'B'}]]"


def human_rows() -> list[dict[str, Any]]:
    """MTBENCH_ROWS and a second-turn judgment whose pair the judge decides."""
    return [
        *MTBENCH_ROWS,
        {
            "question_id": 82,
            "model_a": "gpt-4",
            "model_b": "llama-13b",
            "winner": "model_a",
            "judge": "expert_2",
            "turn": 2,
            "conversation_a": conversation("gpt haiku", "a long rhyming gpt haiku"),
            "conversation_b": conversation("llama haiku", "short"),
        },
        {
            "question_id": 82,
            "model_a": "llama-13b",
            "model_b": "gpt-4",
            "winner": "model_b",  # gpt-4, shown second to this judge
            "judge": "expert_3",
            "turn": 2,
            "conversation_a": conversation("llama haiku", "short"),
            "conversation_b": conversation("gpt haiku", "a long rhyming gpt haiku"),
        },
    ]


def test_mtbench_human_judgments_are_judged_on_both_turns(run_kedro, tmp_path: Path):
    path = tmp_path / "human.json"
    path.write_text(json.dumps(human_rows()), encoding="utf-8")
    judge = ConversationJudge()
    with FakeLLMServer(responder=judge) as server:
        params = {
            "endpoints": endpoints_via(server, max_concurrent=4, structured_output=False),
            "eval_samples_path": str(path),
            "evaluate": {"mode": "pairwise"},
        }
        run = run_kedro("evaluate", params)
    judgments = run["catalog"].load("eval_judgments")
    assert sorted(judgments["turn"].tolist()) == [1, 2, 2]
    assert len(judge.seen) == 2 * len(judgments)
    second = [shown for shown in judge.seen if "QUESTION 2" in shown]
    assert len(second) == 4  # two second-turn pairs, both orders
    assert {(s["ANSWER A 1"], s["ANSWER A 2"]) for s in second} >= {
        ("gpt haiku", "a long rhyming gpt haiku"),
        ("llama haiku", "short"),
    }
    by_id = judgments.set_index("instance_id")
    turn2 = by_id.loc["mtbench-82-turn2:gpt-4~llama-13b"]
    assert turn2["outcome"] == "A" and bool(turn2["consistent"])
    # Expected agreement from the rows themselves, vote by vote.
    expected = {1: [], 2: []}
    for _, row in judgments.iterrows():
        expected[int(row["turn"])] += [vote == row["outcome"] for vote in row["gold_labels"]]
    metrics = run["catalog"].load("eval_metrics")
    votes = metrics[metrics["raters"].str.endswith("~humans", na=False)]
    values = dict(zip(votes["metric"], votes["value"], strict=True))
    for turn, agreed in expected.items():
        assert values[f"{WITH_TIES}_turn{turn}"] == pytest.approx(sum(agreed) / len(agreed))
    # Turn 2: question 81's humans said tie (left out without ties), 82's both said gpt-4.
    assert values[f"{WITHOUT_TIES}_turn2"] == 1.0
    assert values[WITH_TIES] == pytest.approx(
        sum(expected[1] + expected[2]) / len(expected[1] + expected[2])
    )


def test_vote_agreement_counts_vote_pairs_with_and_without_ties():
    judgments = pd.DataFrame(
        {
            "turn": [1, 1, 2, 2],
            "outcome": ["A", "tie", "B", None],
            "gold_labels": [["A", "B", "A"], ["tie", "A"], ["B"], ["A", "A"]],
        }
    )
    table = vote_agreement(judgments).set_index(["turn", "metric"])
    # Turn 1: five vote pairs, agreeing A=A, A=A, tie=tie; without ties: A/A, A/B, A/A.
    assert table.loc[(1, WITH_TIES), "value"] == pytest.approx(3 / 5)
    assert table.loc[(1, WITHOUT_TIES), "value"] == pytest.approx(2 / 3)
    assert table.loc[(2, WITH_TIES), "n"] == 1 and table.loc[(2, WITH_TIES), "n_missing"] == 2
    empty = agreement_metric_rows(judgments.drop(columns="gold_labels"), "pairwise", "j")
    assert empty.empty


@pytest.mark.skipif(not MT_BENCH.is_dir(), reason="../shared/data/mt_bench is not here")
def test_shared_mt_bench_answers_are_compared_on_turn_two_in_both_orders(run_kedro, tmp_path):
    """The two published models' answers to MT-Bench's second turns, as eval_samples rows
    with the first exchange, judged pairwise: every comparison asked in both orders."""
    questions = {
        row["question_id"]: row
        for row in map(json.loads, (MT_BENCH / "question.jsonl").read_text().splitlines())
    }
    rows = []
    for answers in sorted((MT_BENCH / "model_answer").glob("*.jsonl")):
        for line in answers.read_text("utf-8").splitlines()[:5]:
            answer = json.loads(line)
            turns = answer["choices"][0]["turns"]
            question = questions[answer["question_id"]]
            rows.append(
                {
                    "instance_id": f"mt-{answer['question_id']}",
                    "model": answers.stem,
                    "question": question["turns"][1],
                    "response": turns[1],
                    "prior_question": question["turns"][0],
                    "prior_response": turns[0],
                    "category": question["category"],
                }
            )
    path = tmp_path / "turn2.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    judge = ConversationJudge()
    with FakeLLMServer(responder=judge) as server:
        params = {
            "endpoints": endpoints_via(server, max_concurrent=4, structured_output=False),
            "eval_samples_path": str(path),
            "evaluate": {"mode": "pairwise"},
        }
        judgments = run_kedro("evaluate", params)["catalog"].load("eval_judgments")
    assert len(judgments) == 5 and (judgments["turn"] == 2).all()
    assert judgments["verdict_a_first"].notna().all()
    assert judgments["verdict_b_first"].notna().all()
    # A pair with a suspected injection is judged again without its spans, both orders.
    flagged = int(judgments["suspected_injection"].sum())
    assert len(judge.seen) == 10 + 2 * flagged
    assert all("QUESTION 2" in shown for shown in judge.seen)
    answers = {row["model"]: row for row in rows if row["instance_id"] == "mt-81"}
    firsts = {shown["ANSWER A 1"] for shown in judge.seen if shown["QUESTION 1"]}
    assert {answers[model]["prior_response"] for model in answers} <= firsts


def _instances(samples: pd.DataFrame) -> dict[tuple[str, int, frozenset], tuple[str, list]]:
    """{(question, turn, models): (model shown as A, labels)} of `read_samples` pairs."""
    found = {}
    for a, b in zip(samples.iloc[::2].itertuples(), samples.iloc[1::2].itertuples(), strict=True):
        key = (str(a.question_id), int(a.turn), frozenset((a.model, b.model)))
        found[key] = (a.model, list(a.gold_labels))
    return found


@pytest.mark.skipif(
    not (HUMAN_JUDGMENTS.is_file() and GPT4_PAIR_JUDGMENTS.is_file()),
    reason="../shared/data has no MT-Bench human and GPT-4 pair judgments",
)
def test_published_gpt4_pair_judgments_agree_with_humans_as_fastchat_reports():
    """FastChat's figure (GPT-4 pair vs humans on turn 1: 66% with ties, 85% without) from
    the published judgments in `mtbench_human` format, where they are available."""
    from llm_feedback.validation.formats import read_samples  # noqa: PLC0415

    humans = _instances(read_samples(HUMAN_JUDGMENTS, "mtbench_human"))
    gpt4 = _instances(read_samples(GPT4_PAIR_JUDGMENTS, "mtbench_human"))
    flipped = {"A": "B", "B": "A", "tie": "tie"}
    rows = []
    for key, (first, votes) in humans.items():
        if key not in gpt4:
            continue
        gpt4_first, (verdict, *_) = gpt4[key]
        outcome = verdict if gpt4_first == first else flipped[verdict]
        rows.append({"turn": key[1], "outcome": outcome, "gold_labels": votes})
    table = vote_agreement(pd.DataFrame(rows)).set_index(["turn", "metric"])
    assert table.loc[(1, WITH_TIES), "value"] == pytest.approx(0.66, abs=0.01)
    assert table.loc[(1, WITHOUT_TIES), "value"] == pytest.approx(0.85, abs=0.01)
