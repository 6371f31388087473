"""The evaluation library: every mode, aggregation, input checks, generation and caching."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd
import pytest

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.evaluation import run_evaluation
from llm_feedback.params import parse_evaluate
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext, scripted, sequence
from tests.conftest import endpoints_via

RUBRIC = {"accuracy": "Is it correct?", "clarity": "Is it clear?"}


def endpoints(server: FakeLLMServer, **extra: Any) -> dict[str, Any]:
    return endpoints_via(server, structured_output=False, **extra)


def row(
    instance_id: str,
    response: str | None,
    reference: str | None = "Paris",
    model: str = "m1",
    replicate: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "instance_id": instance_id,
        "question": f"Question {instance_id}?",
        "response": response,
        "reference": reference,
        "model": model,
        "replicate": replicate,
        **extra,
    }


def evaluate(server: FakeLLMServer, rows: list[dict[str, Any]], cache=None, **params: Any):
    return run_evaluation(pd.DataFrame(rows), params, endpoints(server), cache, progress=False)


def metric(metrics: pd.DataFrame, model: str, name: str, **where: Any) -> pd.Series:
    selected = metrics[(metrics["model"] == model) & (metrics["metric"] == name)]
    for column, value in where.items():
        selected = selected[selected[column].isna() if value is None else selected[column] == value]
    assert len(selected) == 1, selected
    return selected.iloc[0]


def candidate(body: dict[str, Any]) -> str:
    """The judged response; a re-ask repeats the original prompt before its correction."""
    text = "\n".join(message["content"] for message in body["messages"])
    # The value sits in its fenced block, right after the block's BEGIN marker line.
    found = re.search(
        r"(?:\[Response\]|Candidate answer:)\n<<<[A-Z ]+ BEGIN \w+>>>\n(.*?)\n<<<", text
    )
    return found.group(1)


# --- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "vibes"}, "evaluate.mode must be one of"),
        ({"mode": "single_1_10", "score_range": [0, 5]}, "fixed scale"),
        ({"mode": "rubric", "score_range": [5, 1]}, "score_range must be"),
        ({"mode": "pairwise", "score_range": "1-10"}, "score_range must be"),
        ({"overwrite_outputs": True}, "set evaluate.overwrite_results: true as well"),
        ({"mode": "rubric", "rubric": {}}, "evaluate.rubric must map"),
        ({"missing": "ignore"}, "evaluate.missing"),
        ({"ks": [0, 1]}, "evaluate.ks"),
        ({"max_reasks": -1}, "evaluate.max_reasks must be an integer >= 0"),
        ({"n_replicates": 0}, "evaluate.n_replicates"),
        ({"binary_reply": "maybe"}, "evaluate.binary_reply"),
        ({"generation": {"temprature": 1}}, "temprature"),
        ({"modee": "binary"}, "evaluate.modee: unknown setting"),
        ({"judge": "local"}, "evaluate.judge must be a mapping {endpoint: ..."),
        ({"judge": {"endpoint": "local", "temprature": 0}}, "evaluate.judge.temprature"),
        (
            {"judge": {"endpoint": "local", "max_tokens": "many"}},
            "evaluate.judge.max_tokens must be an integer >= 1",
        ),
        ({"generate_with": "nowhere"}, "evaluate.generate_with: 'nowhere' is not defined"),
    ],
)
def test_bad_parameters_are_named(params, message):
    defined = {"local": {"backend": "openai", "model": "a", "base_url": "http://x/v1"}}
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_evaluate(params, defined)


def test_the_judge_endpoint_by_name_inline_or_from_the_environment(monkeypatch):
    defined = {"local": {"backend": "openai", "model": "a", "base_url": "http://x/v1"}}

    def judge_of(endpoint):
        return parse_evaluate({"judge": {"endpoint": endpoint}}, defined).judge.endpoint

    assert judge_of("local").model == "a"
    assert parse_evaluate({}, defined).judge.endpoint.model == "a"  # the default judge
    assert judge_of({"backend": "openai", "model": "b"}).model == "b"
    monkeypatch.setenv("MODEL_VERSION", "c")
    monkeypatch.setenv("API_TYPE", "openai")
    assert judge_of("env").model == "c"
    with pytest.raises(ConfigError, match="'nope' is not defined"):
        judge_of("nope")
    sampled = parse_evaluate({"judge": {"endpoint": "local", "max_tokens": 64}}, defined)
    assert sampled.judge.sampling == {"max_tokens": 64}


# --- input checks, before any call --------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda rows: [{k: v for k, v in r.items() if k != "question"} for r in rows],
            "missing column(s) ['question']",
        ),
        (
            lambda rows: [rows[0], {**rows[1], "question": "  "}],
            "row 1 (instance_id 'b'), column 'question': is empty",
        ),
        (lambda rows: [rows[0], {**rows[1], "response": 42}], "column 'response': must be text"),
        (lambda rows: [rows[0], {**rows[1], "instance_id": None}], "column 'instance_id'"),
        (lambda rows: [rows[0], {**rows[1], "model": None}], "column 'model': is empty"),
        (lambda rows: [rows[0], {**rows[1], "replicate": -1}], "column 'replicate'"),
        (lambda rows: [rows[0], {**rows[1], "replicate": 0.5}], "column 'replicate'"),
        (lambda rows: [rows[0], {**rows[1], "weight": -2}], "column 'weight'"),
        (lambda rows: [rows[0], {**rows[1], "instance_id": "a"}], "repeats row 0"),
        (
            lambda rows: [
                rows[0],
                {**rows[1], "instance_id": "a", "model": "m2", "question": "Another?"},
            ],
            "differs from row 0",
        ),
        (lambda rows: [rows[0], {**rows[1], "response": None}], "evaluate.generate_with"),
        (
            lambda rows: [rows[0], {**rows[1], "prior_question": "Hi"}],
            "column 'prior_response': prior_question and prior_response go together",
        ),
        (
            lambda rows: [rows[0], {**rows[1], "prior_question": "Hi", "prior_response": "Yo"}],
            "single_1_10 only",
        ),
        (lambda rows: [], "has no rows"),
    ],
)
def test_bad_samples_fail_naming_row_and_column_before_any_call(change, message):
    rows = [row("a", "Paris"), row("b", "Rome")]
    changed = change(rows)
    frame = pd.DataFrame(changed) if changed else pd.DataFrame(columns=list(rows[0]))
    with FakeLLMServer() as server:
        with pytest.raises(InputError, match=re.escape(message)):
            run_evaluation(frame, {"mode": "binary"}, endpoints(server), progress=False)
        assert server.request_count == 0


def test_reference_modes_need_a_reference_column(fake_llm):
    rows = [{k: v for k, v in row("a", "x").items() if k != "reference"}]
    with pytest.raises(InputError, match=re.escape("missing column(s) ['reference']")):
        evaluate(fake_llm, rows, mode="score_0_5")
    evaluate(fake_llm, rows, mode="single_1_10")  # the other modes judge without one


# --- binary -------------------------------------------------------------------------------


def test_binary_exact_match_and_unknown_reference_skip_the_judge():
    reply = (
        "extracted_final_answer: Lyon\nreasoning: Lyon is not Paris.\ncorrect: no\nconfidence: 70%"
    )
    rows = [
        row("a", "The answer is: paris!", reference="Paris"),  # not an exact match: judged
        row("b", "  PARIS. "),  # exact after normalisation
        row("c", "Lyon"),
        row("d", "whatever", reference=None),
        row("e", "whatever", reference="n/a"),
    ]
    with FakeLLMServer(lambda body, ctx: reply) as server:
        judgments, metrics = evaluate(server, rows, mode="binary")
        assert server.request_count == 2  # a and c only
    by_id = judgments.set_index("instance_id")
    assert by_id.loc["b", "parse_status"] == "exact_match" and by_id.loc["b", "score"] == 1.0
    assert pd.isna(by_id.loc["b", "raw_reply"])
    assert list(by_id.loc[["d", "e"], "parse_status"]) == ["invalid", "invalid"]
    assert by_id.loc["c", "correct"] == False  # noqa: E712 - a nullable boolean
    assert by_id.loc["c", "extracted_final_answer"] == "Lyon"
    assert by_id.loc["c", "reasoning"] == "Lyon is not Paris."
    assert by_id.loc["c", "confidence"] == 70.0
    assert metric(metrics, "m1", "n_invalid")["value"] == 2
    assert metric(metrics, "m1", "n_exact_match")["value"] == 1
    assert metric(metrics, "m1", "mean")["value"] == pytest.approx(1 / 3)  # invalid left out


def test_binary_single_token_replies():
    with FakeLLMServer(lambda body, ctx: "Yes" if "Paris" in candidate(body) else "No") as server:
        judgments, _ = evaluate(
            server, [row("a", "It's Paris"), row("b", "Rome")], mode="binary", binary_reply="yes/no"
        )
    assert list(judgments["score"]) == [1.0, 0.0]
    assert "single word: yes" in judgments["prompt"].iloc[0]


def test_pass_at_k_over_replicates_matches_hand_computed_values():
    # m1: instance a correct in 1 of 3 replicates, b in 2 of 3; m2: a 0 of 3, b 3 of 3.
    outcomes = {
        ("m1", "a"): [1, 0, 0],
        ("m1", "b"): [1, 1, 0],
        ("m2", "a"): [0, 0, 0],
        ("m2", "b"): [1, 1, 1],
    }
    rows = [
        row(
            instance, "Paris" if correct else f"wrong {replicate}", model=model, replicate=replicate
        )
        for (model, instance), marks in outcomes.items()
        for replicate, correct in enumerate(marks)
    ]
    with FakeLLMServer(lambda body, ctx: "0") as server:
        _, metrics = evaluate(server, rows, mode="binary", binary_reply="0/1")
    # pass@k = 1 - C(n-c, k) / C(n, k), averaged over instances.
    expected = {
        ("m1", 1): (1 / 3 + 2 / 3) / 2,
        ("m1", 2): ((1 - 1 / 3) + 1.0) / 2,
        ("m1", 3): 1.0,
        ("m2", 1): (0 + 1) / 2,
        ("m2", 2): (0 + 1) / 2,
        ("m2", 3): (0 + 1) / 2,
    }
    for (model, k), value in expected.items():
        found = metric(metrics, model, "pass_at_k", k=k)
        assert found["value"] == pytest.approx(value) and found["n"] == 2


def test_weighted_accuracy_over_weighted_responses():
    rows = [
        row("a", "Paris", weight=3.0),
        row("b", "Rome", weight=1.0),
        row("c", "Paris", replicate=0),
        row("c", "Lyon", replicate=1, weight=0.5),
    ]
    with FakeLLMServer(lambda body, ctx: "0") as server:
        _, metrics = evaluate(server, rows, mode="binary", binary_reply="0/1")
    # A missing weight counts as 1. Pooled: (3*1 + 1*0 + 1*1 + 0.5*0) / 5.5; genlm's, per
    # instance the mean over replicates of score x weight: (3 + 0 + (1 + 0) / 2) / 3.
    assert metric(metrics, "m1", "pooled_weighted_accuracy")["value"] == pytest.approx(4 / 5.5)
    assert metric(metrics, "m1", "weighted_accuracy")["value"] == pytest.approx(3.5 / 3)


def test_unparsed_binary_replies_count_as_wrong_or_are_excluded():
    rows = [row("a", "Paris!!"), row("b", "Rome")]  # a is an exact match, b is asked
    with FakeLLMServer(lambda body, ctx: "hmm") as server:
        judgments, zero = evaluate(server, rows, mode="binary", binary_reply="0/1")
        _, exclude = evaluate(server, rows, mode="binary", binary_reply="0/1", missing="exclude")
    assert judgments.set_index("instance_id").loc["b", "parse_status"] == "no_match"
    assert metric(zero, "m1", "mean")["value"] == 0.5
    assert metric(exclude, "m1", "mean")["value"] == 1.0
    assert metric(zero, "m1", "mean")["n_missing"] == 1
    assert metric(exclude, "m1", "mean")["n_missing"] == 1
    assert metric(zero, "m1", "pass_at_k", k=1)["value"] == 0.5


# --- score_0_5 ----------------------------------------------------------------------------


def test_score_0_5_normalises_to_100_and_counts_unrated_replies_as_zero():
    ratings = {
        "good": "Rating: 5",
        "fair": "Rating: 3",
        "poor": "Rating: 1",
        "rambling": "I cannot decide.",
    }
    rows = [row(name, name) for name in ratings] + [row("none", "x", reference=None)]
    judge = lambda body, ctx: ratings[candidate(body)]  # noqa: E731
    with FakeLLMServer(judge) as server:
        judgments, zero = evaluate(server, rows, mode="score_0_5")
        _, exclude = evaluate(server, rows, mode="score_0_5", missing="exclude")
    assert judgments.set_index("instance_id").loc["rambling", "parse_status"] == "no_match"
    assert metric(zero, "m1", "mean")["value"] == pytest.approx(9 / 4)
    assert metric(zero, "m1", "normalised_mean")["value"] == pytest.approx(9 / 4 * 20)
    assert metric(zero, "m1", "mean")["n_missing"] == 1
    assert metric(exclude, "m1", "normalised_mean")["value"] == pytest.approx(3 * 20)
    assert metric(exclude, "m1", "mean")["n_missing"] == 1
    assert metric(zero, "m1", "n_invalid")["value"] == 1


# --- single_1_10 --------------------------------------------------------------------------


def test_single_1_10_uses_references_where_known_and_the_conversation_for_turn_2():
    rows = [
        row("a", "Four.", reference="4"),
        row("b", "A poem.", reference=None),
        row(
            "a",
            "Eight.",
            reference="8",
            prior_question="Question a?",
            prior_response="Four.",
            prior_reference="4",
        )
        | {"question": "Double it?"},
    ]
    with FakeLLMServer(lambda body, ctx: "Fine. Rating: [[6]]") as server:
        judgments, metrics = evaluate(server, rows, mode="single_1_10")
    assert list(judgments["turn"]) == [1, 1, 2]
    assert (judgments["score"] == 6.0).all()
    first, poem, second = judgments["prompt"]
    assert "Reference answer" in first and "Reference answer" not in poem
    assert all(text in second for text in ("Question a?", "Four.", "Double it?", "Eight.", "8"))
    assert metric(metrics, "m1", "normalised_mean")["value"] == pytest.approx(5 / 9 * 100)


# --- rubric -------------------------------------------------------------------------------


def test_rubric_gives_one_row_per_criterion_and_means_per_criterion():
    replies = {
        "clear": '{"scores": {"accuracy": 5, "clarity": 4}}',
        "muddled": '{"scores": {"accuracy": 3}}',
    }
    judge = lambda body, ctx: replies[candidate(body)]  # noqa: E731
    with FakeLLMServer(judge) as server:
        judgments, metrics = evaluate(
            server,
            [row("a", "clear"), row("b", "muddled")],
            mode="rubric",
            rubric=RUBRIC,
            missing="exclude",
        )
    assert len(judgments) == 4 and set(judgments["criterion"]) == set(RUBRIC)
    muddled = judgments[judgments["instance_id"] == "b"].set_index("criterion")
    assert muddled.loc["accuracy", "score"] == 3 and pd.isna(muddled.loc["clarity", "score"])
    assert muddled["parse_status"].eq("partial").all() and muddled["reasks"].eq(1).all()
    assert metric(metrics, "m1", "n_reasks")["value"] == 1  # one call, however many criteria
    assert metric(metrics, "m1", "mean", criterion="accuracy")["value"] == 4.0
    assert metric(metrics, "m1", "mean", criterion="clarity")["n_missing"] == 1
    overall = metric(metrics, "m1", "normalised_mean", criterion=None)
    assert overall["value"] == pytest.approx(((5 + 4 + 3) / 3 - 1) / 4 * 100)


# --- pairwise -----------------------------------------------------------------------------


def pair_rows(replicates: int = 1) -> list[dict[str, Any]]:
    return [
        row(instance, f"{model} says {instance}", model=model, replicate=replicate)
        for instance in ("a", "b")
        for model in ("m1", "m2", "m3")
        for replicate in range(replicates)
    ]


def first_shown(body: dict[str, Any]) -> str:
    return re.search(
        r"\[Response A - start\]\n<<<RESPONSE A BEGIN \w+>>>\n(.*?)\n",
        body["messages"][-1]["content"],
    ).group(1)


def test_pairwise_judges_each_pair_in_both_orders():
    def prefers_m3(body: dict[str, Any], ctx: RequestContext) -> str:
        text = body["messages"][-1]["content"]
        if "m3 says" not in text:
            return "Equal. [[C]]"
        return "[[A]]" if first_shown(body).startswith("m3") else "[[B]]"

    with FakeLLMServer(prefers_m3) as server:
        judgments, metrics = evaluate(server, pair_rows(), mode="pairwise")
        assert server.request_count == 2 * 6  # 3 pairs per instance, both orders
    assert list(judgments[["model_a", "model_b"]].drop_duplicates().itertuples(index=False)) == [
        ("m1", "m2"),
        ("m1", "m3"),
        ("m2", "m3"),
    ]
    assert judgments["consistent"].all()
    assert metric(metrics, "m3", "win_rate")["value"] == 1.0
    assert metric(metrics, "m1", "win_rate")["value"] == pytest.approx(0.25)  # one tie, one loss
    assert metric(metrics, "m1", "ties")["value"] == 2


def test_pairwise_position_bias_counts_as_a_tie():
    with FakeLLMServer(lambda body, ctx: "The first one. [[A]]") as server:
        judgments, metrics = evaluate(server, pair_rows(), mode="pairwise")
    assert judgments["outcome"].eq("tie").all() and not judgments["consistent"].any()
    assert judgments["reasks"].eq(0).all() and metric(metrics, "m1", "n_reasks")["value"] == 0
    assert judgments["verdict_a_first"].eq("A").all() and judgments["verdict_b_first"].eq("B").all()
    for model in ("m1", "m2", "m3"):
        assert metric(metrics, model, "win_rate")["value"] == 0.5
        assert metric(metrics, model, "n_inconsistent")["value"] == 4


def test_identical_responses_are_a_tie_without_a_call():
    rows = [r for r in pair_rows() if (r["instance_id"], r["model"]) != ("a", "m3")]
    rows[1]["response"] = rows[0]["response"]  # instance a: m2 wrote what m1 wrote
    asked: list[str] = []

    def first_one(body: dict[str, Any], ctx: RequestContext) -> str:
        asked.append(body["messages"][-1]["content"])
        return "The first one. [[A]]"

    with FakeLLMServer(first_one) as server:
        judgments, _ = evaluate(server, rows, mode="pairwise")
        assert server.request_count == 2 * 3  # instance b's three pairs; a's is not asked
    same = judgments[(judgments["instance_id"] == "a") & (judgments["model_b"] == "m2")].iloc[0]
    assert same["parse_status"] == "identical" and same["outcome"] == "tie"
    assert same["consistent"] and (same["verdict_a_first"], same["verdict_b_first"]) == (
        "tie",
        "tie",
    )
    assert pd.isna(same["raw_reply_a_first"]) and not any(
        "m2 says a" in text and "m1 says a" in text for text in asked
    )
    others = judgments[judgments["parse_status"] != "identical"]
    assert len(others) == 3 and (others["parse_status"] == "ok").all()


# --- re-asks ------------------------------------------------------------------------------


def test_unreadable_judgments_are_re_asked_once_and_a_cached_rerun_asks_nothing(tmp_path):
    cache = tmp_path / "cache.sqlite"
    responder = scripted(
        [
            ("\nlate\n<<<CANDIDATE ANSWER END", sequence(["hmm", "1"])),
            ("\nhopeless\n<<<CANDIDATE ANSWER END", "I cannot tell."),
            ("\nrefused\n<<<CANDIDATE ANSWER END", Reply(status=400, error_message="bad request")),
        ],
        default=lambda body, ctx: "0",
    )
    rows = [
        row("late", "late"),
        row("hopeless", "hopeless"),
        row("refused", "refused"),
        row("fine", "fine"),
        row("exact", "Paris"),
    ]
    params = {"mode": "binary", "binary_reply": "0/1"}
    with FakeLLMServer(responder) as server:
        judgments, metrics = evaluate(server, rows, cache, **params)
        # One call per judged row, one re-ask each for "late" and "hopeless".
        assert server.request_count == 4 + 2
        again, _ = evaluate(server, rows, cache, **params)
        assert server.request_count == 6 + 1  # only the failed call is made again
        _, without = evaluate(server, rows, cache, **params, max_reasks=0)
        assert server.request_count == 7 + 1
    by_id = judgments.set_index("instance_id")
    assert by_id.loc["late", ["score", "parse_status", "raw_reply", "reasks"]].tolist() == [
        1.0,
        "ok",
        "1",
        1,
    ]
    assert pd.isna(by_id.loc["hopeless", "score"]) and by_id.loc["hopeless", "reasks"] == 1
    assert by_id.loc["hopeless", ["parse_status", "raw_reply"]].tolist() == [
        "no_match",
        "I cannot tell.",
    ]
    assert by_id.loc["refused", ["parse_status", "reasks"]].tolist() == ["call_failed", 0]
    assert by_id.loc[["fine", "exact"], "reasks"].tolist() == [0, 0]
    assert metric(metrics, "m1", "n_reasks")[["value", "n"]].tolist() == [2, 5]
    assert metric(metrics, "m1", "mean")["n_missing"] == 2  # hopeless and refused
    assert again.set_index("instance_id").loc[["late", "hopeless"], "cached"].all()
    assert again["score"].equals(judgments["score"]) and again["reasks"].equals(judgments["reasks"])
    assert metric(without, "m1", "n_reasks")["value"] == 0
    assert metric(without, "m1", "mean")["n_missing"] == 3  # "late" is read from "hmm" alone


# --- selection, generation, caching -------------------------------------------------------


def test_max_instances_and_n_replicates_select_samples(fake_llm):
    rows = [
        row(instance, "Rome", replicate=replicate)
        for instance in ("a", "b", "c")
        for replicate in range(3)
    ]
    judgments, _ = evaluate(fake_llm, rows, mode="score_0_5", max_instances=2, n_replicates=2)
    assert sorted(set(judgments["instance_id"])) == ["a", "b"]
    assert sorted(set(judgments["replicate"])) == [0, 1]
    with pytest.raises(InputError, match="n_replicates is 4: set evaluate.generate_with"):
        evaluate(fake_llm, rows, mode="score_0_5", n_replicates=4)


def test_missing_responses_are_generated_cached_and_regenerated(tmp_path):
    cache = tmp_path / "cache.sqlite"

    def responder(body: dict[str, Any], ctx: RequestContext) -> str:
        if len(body["messages"]) == 1:  # a generation: the bare question
            return f"Paris (draw {ctx.call_index})"
        return "1"

    rows = [row("a", None), row("b", "Rome")]
    params = {"mode": "binary", "binary_reply": "0/1", "generate_with": "local", "n_replicates": 2}
    with FakeLLMServer(responder) as server:
        judgments, _ = evaluate(server, rows, cache, **params)
        generated = [body for body in server.requests if len(body["messages"]) == 1]
        assert len(generated) == 3  # a: replicates 0 and 1; b: replicate 1
        assert judgments["response"].str.startswith("Paris").sum() == 3
        assert server.request_count == 7

        again, _ = evaluate(server, rows, cache, **params)
        assert server.request_count == 7 and again["cached"].all()

        with pytest.raises(ConfigError, match="overwrite_results"):
            evaluate(server, rows, cache, **params, overwrite_outputs=True)
        evaluate(server, rows, cache, **params, overwrite_outputs=True, overwrite_results=True)
        assert server.request_count == 14


def test_replicates_are_judged_separately_even_when_identical(tmp_path):
    rows = [row("a", "Rome", replicate=0), row("a", "Rome", replicate=1)]
    with FakeLLMServer(lambda body, ctx: ["1", "0"][ctx.key_call_index % 2]) as server:
        judgments, _ = evaluate(
            server, rows, tmp_path / "c.sqlite", mode="binary", binary_reply="0/1"
        )
        assert server.request_count == 2
    assert sorted(judgments["score"]) == [0.0, 1.0]


def test_failed_generation_is_a_missing_judgment():
    def responder(body: dict[str, Any], ctx: RequestContext) -> Any:
        if len(body["messages"]) == 1:
            return Reply(status=400, error_message="no such model")
        return "1"

    with FakeLLMServer(responder) as server:
        judgments, metrics = evaluate(
            server, [row("a", None), row("b", "Paris")], mode="binary", generate_with="local"
        )
    failed = judgments.set_index("instance_id").loc["a"]
    assert failed["parse_status"] == "no_response" and "no such model" in failed["error"]
    assert metric(metrics, "m1", "mean")["n_missing"] == 1
    assert math.isclose(metric(metrics, "m1", "mean")["value"], 0.5)
