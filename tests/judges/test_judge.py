"""The Judge over real HTTP against the project's fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from typing import Any

import pytest

from llm_feedback.core.errors import ConfigError, InputError
from llm_feedback.judges import CALL_FAILED, Judge, Judgment, combine_orders
from llm_feedback.replies.fencing import fenced_block
from llm_feedback.testing.server import FakeLLMServer, Reply, RequestContext, scripted, sequence

RESULT_KEYS = {"raw_response", "model", "prompt", "success", "status", "error", "cached", "reasks"}
RUBRIC = {"accuracy": "Is it correct?", "clarity": "Is it clear?"}


def endpoint(server: FakeLLMServer, **extra: Any) -> dict[str, Any]:
    """Free-text replies by default: most tests script the judge's exact words."""
    return {
        "backend": "openai",
        "model": "judge-x",
        "base_url": server.base_url,
        "structured_output": False,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.02,
        "max_retries": 1,
        **extra,
    }


def user_text(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def candidate(body: dict[str, Any]) -> str:
    """The candidate answer shown by the binary and grading prompts (a re-ask repeats them)."""
    text = "\n".join(message["content"] for message in body["messages"])
    # The value sits in its fenced block, right after the block's BEGIN marker line.
    match = re.search(
        r"(?:Candidate answer:|\[Response\])\n<<<[A-Z ]+ BEGIN \w+>>>\n(.*?)\n<<<", text
    )
    return match.group(1) if match else ""


# --- binary ---------------------------------------------------------------------------------


def test_binary_in_both_reply_formats_and_malformed_replies():
    answers = {"Paris": "1", "Lyon": "0", "Nice": "Yes.", "Metz": "No", "Pau": "I am not sure."}
    responder = lambda body, ctx: answers[candidate(body)]  # noqa: E731
    with FakeLLMServer(responder) as server, Judge(endpoint(server)) as judge:
        assert judge.evaluate_binary("Capital of France?", "Paris", "Paris")["result"] == 1
        assert judge.evaluate_binary("Capital of France?", "Paris", "Lyon")["result"] == 0
        yes = judge.evaluate_binary("Capital?", "Paris", "Nice", output_format="yes/no")
        no = judge.evaluate_binary("Capital?", "Paris", "Metz", output_format="yes/no")
        unsure = judge.evaluate_binary("Capital?", "Paris", "Pau")
    assert (yes["result"], no["result"]) == (1, 0)
    assert "yes if the candidate answer is correct" in yes["prompt"]
    assert set(yes) == RESULT_KEYS | {"result"}
    assert yes["success"] and yes["status"] == "ok" and yes["model"] == "judge-x"
    assert yes["raw_response"] == "Yes." and not yes["cached"]
    assert unsure["result"] is None and not unsure["success"] and unsure["status"] == "no_match"
    assert unsure["raw_response"] == "I am not sure." and unsure["reasks"] == 1


def test_graded_binary_reply_is_parsed_into_fields():
    reply = (
        "extracted_final_answer: 42\nreasoning: It matches the reference.\n"
        "correct: yes\nconfidence: 85%"
    )
    with FakeLLMServer(lambda body, ctx: reply) as server, Judge(endpoint(server)) as judge:
        outcome = judge.evaluate_binary("6 x 7?", "42", "It is 42.", output_format="graded")
    assert outcome["result"] == 1 and outcome["success"]
    assert outcome["details"] == {
        "extracted_final_answer": "42",
        "reasoning": "It matches the reference.",
        "confidence": 85.0,
    }
    assert "extracted_final_answer" in outcome["prompt"]


def test_graded_reply_without_a_verdict_fails_but_keeps_what_it_read():
    reply = "extracted_final_answer: 41\nconfidence: 20%"
    with FakeLLMServer(lambda body, ctx: reply) as server, Judge(endpoint(server)) as judge:
        outcome = judge.evaluate_binary("6 x 7?", "42", "41", output_format="graded")
    assert outcome["result"] is None and not outcome["success"]
    assert outcome["status"] == "no_match"
    assert outcome["details"]["extracted_final_answer"] == "41"


def test_unknown_output_format_is_a_config_error():
    with FakeLLMServer() as server, Judge(endpoint(server)) as judge:
        with pytest.raises(ConfigError, match="output_format"):
            judge.evaluate_binary("q", "a", "p", output_format="maybe")
        assert server.request_count == 0


# --- single-answer grades ----------------------------------------------------------------------


def test_single_grade_on_each_kind_of_scale():
    def responder(body: dict[str, Any], ctx: RequestContext) -> str:
        text = user_text(body)
        if "[[6]]" in text:  # the 1-10 prompt shows the format with an example
            return "Helpful but shallow. Rating: [[7]] (not [[3]])"
        if "from 0 to 5" in text:
            return "Mostly right.\nRating: 4"
        return json.dumps({"scores": {"overall": 6}, "justification": "fine"})

    with FakeLLMServer(responder) as server, Judge(endpoint(server)) as judge:
        mt_bench = judge.evaluate_single("Tell a joke.", "Knock knock.")
        with_reference = judge.evaluate_single("2+2?", "4", reference="4", score_range=(0, 5))
        seven_point = judge.evaluate_single("2+2?", "4", score_range=(1, 7))
    assert mt_bench["result"] == 7.0  # the first [[N]], as FastChat reads it
    assert with_reference["result"] == 4.0 and "Reference answer" in with_reference["prompt"]
    assert seven_point["result"] == 6 and "from 1 (worst) to 7 (best)" in seven_point["prompt"]


@pytest.mark.parametrize(
    ("reply", "status"),
    [("", "empty"), ("Good answer, no rating.", "no_match"), ("Rating: [[12]]", "out_of_range")],
)
def test_malformed_single_grades(reply, status):
    with FakeLLMServer(lambda body, ctx: reply) as server, Judge(endpoint(server)) as judge:
        outcome = judge.evaluate_single("q", "a")
    assert outcome["result"] is None and not outcome["success"]
    assert outcome["status"] == status and outcome["raw_response"] == reply


def test_two_turn_grade_shows_the_whole_conversation():
    reply = "The follow-up is handled well. Rating: [[8]]"
    with FakeLLMServer(lambda body, ctx: reply) as server, Judge(endpoint(server)) as judge:
        outcome = judge.evaluate_multi_turn(
            ["Name a fruit.", "Another one?"], ["Apple.", "Pear."], references=["Fig", "Plum"]
        )
    assert outcome["result"] == 8.0
    for text in ("Name a fruit.", "Apple.", "Another one?", "Pear.", "Plum"):
        assert text in outcome["prompt"]


# --- rubric --------------------------------------------------------------------------------------


def test_rubric_scores_as_json_and_a_partial_reply():
    replies = iter(
        [
            '```json\n{"scores": {"accuracy": 5, "clarity": 3}, "justification": "ok"}\n```',
            '{"scores": {"accuracy": 4, "clarity": 9}}',
        ]
    )
    # No re-ask: the partial reply itself is under test.
    with (
        FakeLLMServer(lambda body, ctx: next(replies)) as server,
        Judge(endpoint(server, max_concurrent=1), max_reasks=0) as judge,
    ):
        full = judge.evaluate_with_rubric("q", "a", RUBRIC)
        partial = judge.evaluate_with_rubric("q", "b", RUBRIC)
    assert set(full) == RESULT_KEYS | {"scores"}
    assert full["scores"] == {"accuracy": 5, "clarity": 3} and full["success"]
    assert partial["scores"] == {"accuracy": 4, "clarity": None}  # 9 is off the 1-5 scale
    assert not partial["success"] and partial["status"] == "partial"
    assert "- accuracy: Is it correct?" in full["prompt"]


def test_structured_requests_carry_the_schema(fake_llm):
    with Judge(endpoint(fake_llm, structured_output=True)) as judge:
        outcome = judge.evaluate_with_rubric("q", "a", RUBRIC, score_range=(0, 3))
    schema = fake_llm.requests[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]["scores"]["properties"]) == set(RUBRIC)
    assert outcome["success"] and all(0 <= s <= 3 for s in outcome["scores"].values())


# --- comparative --------------------------------------------------------------------------------


def first_response(body: dict[str, Any]) -> str:
    return re.search(
        r"\[Response A - start\]\n<<<RESPONSE A BEGIN \w+>>>\n(.*?)\n", user_text(body)
    ).group(1)


def test_comparative_judges_both_orders_and_agreeing_orders_win():
    def prefers_long(body: dict[str, Any], ctx: RequestContext) -> str:
        if first_response(body) == "a long answer":
            return "Score A: 8\nScore B: 3\nVerdict: [[A]]"
        return "Score A: 3\nScore B: 8\nVerdict: [[B]]"

    with FakeLLMServer(prefers_long) as server, Judge(endpoint(server)) as judge:
        outcome = judge.evaluate_comparative("q", "short", "a long answer")
        assert server.request_count == 2
        orders = [first_response(body) for body in server.requests]
    assert sorted(orders) == ["a long answer", "short"]
    result = outcome["result"]
    assert result["winner"] == "B" and result["consistent"] is True
    assert result["verdicts"] == ["B", "B"] and result["scores"] == [3.0, 8.0]
    assert outcome["scores"] == (3.0, 8.0)  # the seed's top-level (response1, response2)
    assert len(outcome["raw_response"]) == 2 and len(outcome["prompt"]) == 2
    assert outcome["success"] and outcome["status"] == "ok"


def test_position_bias_makes_a_tie():
    always_first = lambda body, ctx: "Response A is better. [[A]]"  # noqa: E731
    with FakeLLMServer(always_first) as server, Judge(endpoint(server)) as judge:
        outcome = judge.evaluate_comparative("q", "one", "two")
        one_order = judge.evaluate_comparative("q", "one", "two", swap=False)
        assert server.request_count == 3
    assert outcome["result"]["winner"] == "tie" and outcome["result"]["consistent"] is False
    assert outcome["result"]["verdicts"] == ["A", "B"]
    assert one_order["result"]["winner"] == "A" and one_order["result"]["consistent"] is None
    assert outcome["scores"] == one_order["scores"] == (None, None)  # no score was given


def test_identical_responses_are_a_tie_without_a_call():
    """As the pipeline's pairwise mode (and AlpacaEval) records it: the same text on both
    sides is a tie, status `identical`, and the judge is not asked."""
    prefers_b = lambda body, ctx: "Verdict: [[B]]"  # noqa: E731
    with FakeLLMServer(prefers_b) as server, Judge(endpoint(server)) as judge:
        same = judge.evaluate_comparative("q", "the same answer", "the same answer")
        one_order = judge.evaluate_comparative("q", "same", "same", swap=False)
        assert server.request_count == 0
        batch = judge.evaluate_comparative_batch(
            ["q1", "q2", "q3"], ["x", "y", "z"], ["x", "w", "z"]
        )
        assert server.request_count == 2  # only q2, in both orders
        together = asyncio.run(
            judge.evaluate_comparative_batch_async(["q"] * 2, ["a", "b"], ["a", "c"], swap=False)
        )
        assert server.request_count == 3
        alone = asyncio.run(judge.evaluate_comparative_async("q", "r", "r"))
        assert server.request_count == 3
    for outcome in (same, one_order, batch[0], batch[2], together[0], alone):
        assert outcome["result"]["winner"] == "tie"
        assert outcome["status"] == "identical" and outcome["success"]
        assert outcome["scores"] == (None, None) and outcome["model"] == "judge-x"
        assert not any(outcome["raw_response"])
    assert same["result"]["consistent"] is True and len(same["raw_response"]) == 2
    assert one_order["result"]["consistent"] is None and len(one_order["raw_response"]) == 1
    # The pairs between them were judged, in their places.
    assert batch[1]["result"]["winner"] == "tie"  # [[B]] in both orders: position bias
    assert batch[1]["status"] == "ok" and together[1]["result"]["winner"] == "B"


def test_combining_orders_with_a_missing_verdict():
    def judged(verdict, scores, status="ok", reasks=0):
        return Judgment(
            value={"verdict": verdict, "scores": scores},
            status=status,
            success=verdict is not None,
            raw_reply="r",
            prompt="p",
            model="m",
            cached=True,
            reasks=reasks,
        )

    combined = combine_orders(judged("A", [9, 2]), judged(None, [None, 7], "no_match", 2))
    assert combined.winner is None and not combined.success
    assert combined.reasks == 2
    assert combined.status == "no_match"
    assert combined.scores == (8.0, 2.0)  # response1: 9 then 7; response2: 2
    seed = combined.as_dict()
    assert seed["result"]["winner"] is None and not seed["success"]
    assert seed["result"]["scores"] == [8.0, 2.0] and seed["raw_response"] == ["r", "r"]


# --- batches, concurrency, event loops --------------------------------------------------------


def test_batches_keep_input_order_under_concurrency():
    def rate_by_number(body: dict[str, Any], ctx: RequestContext) -> Reply:
        number = int(re.search(r"answer number (\d+)", user_text(body)).group(1))
        # Later items answer sooner, so completion order is the reverse of input order.
        return Reply(content=f"Rating: [[{number % 10 + 1}]]", delay_s=0.002 * (20 - number))

    with FakeLLMServer(rate_by_number) as server, Judge(endpoint(server)) as judge:
        outcomes = judge.evaluate_single_batch(
            ["q"] * 20, [f"answer number {i}" for i in range(20)]
        )
    assert [outcome["result"] for outcome in outcomes] == [i % 10 + 1.0 for i in range(20)]


def test_batches_of_different_lengths_are_rejected_before_any_call():
    with FakeLLMServer() as server, Judge(endpoint(server)) as judge:
        with pytest.raises(InputError, match="differ in length"):
            judge.evaluate_binary_batch(["q1", "q2"], ["a1", "a2"], ["p1"])
        with pytest.raises(InputError, match="differ in length"):
            judge.evaluate_comparative_batch(["q"], ["r1"], ["r2"], contexts=["c1", "c2"])
        with pytest.raises(InputError, match="must be a list"):
            judge.evaluate_single_batch("q", ["a"])
        assert server.request_count == 0


def test_max_concurrent_bounds_calls_in_flight():
    reply = lambda body, ctx: "Rating: [[5]]"  # noqa: E731
    with (
        FakeLLMServer(reply, latency_s=0.1) as server,
        Judge(endpoint(server), max_concurrent=2) as judge,
    ):
        assert judge.max_concurrent == 2
        started = time.perf_counter()
        judge.evaluate_single_batch(["q"] * 8, [f"a{i}" for i in range(8)])
        elapsed = time.perf_counter() - started
    assert elapsed >= 4 * 0.1 * 0.9  # 8 calls of 100 ms, two at a time


def test_async_batches_share_the_bound_and_sync_calls_work_inside_a_running_loop():
    reply = lambda body, ctx: "1"  # noqa: E731
    with (
        FakeLLMServer(reply, latency_s=0.1) as server,
        Judge(endpoint(server), max_concurrent=3) as judge,
    ):

        async def notebook_cell() -> tuple[list, dict, float]:
            started = time.perf_counter()
            batches = await asyncio.gather(
                judge.evaluate_binary_batch_async(["q"] * 3, ["a"] * 3, ["x", "y", "z"]),
                judge.evaluate_binary_batch_async(["q"] * 3, ["a"] * 3, ["u", "v", "w"]),
            )
            elapsed = time.perf_counter() - started
            # A sync call from inside the running loop, as in Jupyter.
            return batches, judge.evaluate_binary("q", "a", "p"), elapsed

        batches, sync_outcome, elapsed = asyncio.run(notebook_cell())
    assert [[o["result"] for o in batch] for batch in batches] == [[1, 1, 1], [1, 1, 1]]
    assert sync_outcome["result"] == 1
    assert elapsed >= 2 * 0.1 * 0.9  # six calls, three at a time, across both batches


def test_every_async_form_answers():
    with FakeLLMServer() as server, Judge(endpoint(server, structured_output=True)) as judge:

        async def all_forms() -> list[dict]:
            return [
                await judge.evaluate_binary_async("q", "a", "p"),
                await judge.evaluate_single_async("q", "p", reference="a"),
                await judge.evaluate_multi_turn_async(["q1", "q2"], ["a1", "a2"]),
                await judge.evaluate_with_rubric_async("q", "p", RUBRIC),
                await judge.evaluate_comparative_async("q", "r1", "r2"),
                (await judge.evaluate_single_batch_async(["q"], ["p"]))[0],
                (await judge.evaluate_with_rubric_batch_async(["q"], ["p"], RUBRIC))[0],
                (await judge.evaluate_comparative_batch_async(["q"], ["r1"], ["r2"]))[0],
            ]

        outcomes = asyncio.run(all_forms())
    assert all(outcome["success"] for outcome in outcomes)


# --- re-asks of unreadable replies ------------------------------------------------------------


def calls_about(server: FakeLLMServer, text: str) -> int:
    """How many requests showed `text` (a re-ask repeats the original prompt)."""
    return sum(
        any(text in message["content"] for message in body["messages"]) for body in server.requests
    )


def test_an_unreadable_reply_is_re_asked_with_what_was_wrong():
    responder = scripted(
        [
            ("late", sequence(["No idea.", "On reflection: Rating: [[8]]"])),
            ("prompt", "Rating: [[5]]"),
        ]
    )
    with FakeLLMServer(responder) as server, Judge(endpoint(server)) as judge:
        late, prompt = judge.evaluate_single_batch(["q", "q"], ["late", "prompt"])
        assert server.request_count == 3
        reask = server.requests[-1]["messages"]
    assert (late["result"], late["success"], late["status"]) == (8.0, True, "ok")
    assert late["reasks"] == 1 and late["raw_response"] == "On reflection: Rating: [[8]]"
    assert late["prompt"] == reask[-3]["content"]  # the original question, not the correction
    assert reask[-2] == {"role": "assistant", "content": "No idea."}
    assert "no answer in the requested format" in reask[-1]["content"]
    assert (prompt["result"], prompt["reasks"]) == (5.0, 0)


def test_a_reply_unreadable_every_time_is_missing_after_max_reasks():
    responder = scripted([("hopeless", "I would rather not say."), ("fine", "Rating: [[5]]")])
    with FakeLLMServer(responder) as server, Judge(endpoint(server), max_reasks=2) as judge:
        outcomes = judge.evaluate_single_batch(["q"] * 3, ["hopeless", "fine 1", "fine 2"])
        assert calls_about(server, "hopeless") == 1 + 2
        assert server.request_count == 3 + 2  # nothing more for the readable replies
    hopeless = outcomes[0]
    assert hopeless["result"] is None and not hopeless["success"]
    assert hopeless["status"] == "no_match" and hopeless["reasks"] == 2
    assert hopeless["raw_response"] == "I would rather not say." and hopeless["error"] is None
    assert [outcome["result"] for outcome in outcomes[1:]] == [5.0, 5.0]


def test_failed_calls_are_not_re_asked():
    refused = Reply(status=400, error_message="bad request")
    responder = scripted(
        [
            ("refused", refused),
            ("flaky", sequence(["No idea.", refused])),
            ("fine", "Rating: [[5]]"),
        ]
    )
    with FakeLLMServer(responder) as server, Judge(endpoint(server), max_reasks=3) as judge:
        refused_outcome, flaky, _ = judge.evaluate_single_batch(
            ["q"] * 3, ["refused", "flaky", "fine"]
        )
        assert calls_about(server, "refused") == 1
        assert calls_about(server, "flaky") == 2  # its failed re-ask ends its re-asks
    assert refused_outcome["status"] == CALL_FAILED and refused_outcome["reasks"] == 0
    # A failed re-ask keeps the unreadable reply and says why it was not replaced.
    assert flaky["status"] == "no_match" and flaky["raw_response"] == "No idea."
    assert flaky["reasks"] == 1 and "HTTP 400" in flaky["error"]


def test_max_reasks_zero_never_re_asks_and_a_negative_bound_is_rejected():
    with (
        FakeLLMServer(lambda body, ctx: "No idea.") as server,
        Judge(endpoint(server), max_reasks=0) as judge,
    ):
        outcome = judge.evaluate_single("q", "a")
        assert server.request_count == 1
        with pytest.raises(ConfigError, match="max_reasks"):
            Judge(endpoint(server), max_reasks=-1)
    assert outcome["status"] == "no_match" and outcome["reasks"] == 0


def test_async_batches_and_comparisons_re_ask_too():
    # "other" wins both orders, but the order showing "late" first is unreadable at first.
    responder = scripted(
        [("late\n<<<RESPONSE A END", sequence(["Hmm.", "[[B]]"]))],
        default=lambda body, ctx: "[[A]]",
    )
    with FakeLLMServer(responder) as server, Judge(endpoint(server)) as judge:
        outcome = asyncio.run(judge.evaluate_comparative_async("q", "late", "other"))
        assert server.request_count == 3  # both orders, then the unreadable one again
    assert outcome["success"] and outcome["reasks"] == 1
    assert outcome["result"]["winner"] == "B" and outcome["result"]["consistent"]


def test_a_cached_rerun_replays_the_re_asks_without_a_call(tmp_path):
    cache = tmp_path / "judge.sqlite"
    responder = scripted([("late", sequence(["No idea.", "Rating: [[8]]"]))])
    with FakeLLMServer(responder) as server:
        with Judge(endpoint(server), cache) as judge:
            first = judge.evaluate_single("q", "late")
        with Judge(endpoint(server), cache) as judge:
            again = judge.evaluate_single("q", "late")
        assert server.request_count == 2
    assert (first["result"], first["reasks"], first["cached"]) == (8.0, 1, False)
    assert (again["result"], again["reasks"], again["cached"]) == (8.0, 1, True)


# --- failures, availability, endpoint, cache ---------------------------------------------------


def test_a_failed_call_is_a_failure_not_an_exception():
    refuse = lambda body, ctx: Reply(status=400, error_message="bad request")  # noqa: E731
    with FakeLLMServer(refuse) as server, Judge(endpoint(server)) as judge:
        binary = judge.evaluate_binary("q", "a", "p")
        rubric = judge.evaluate_with_rubric("q", "p", RUBRIC)
    assert binary["status"] == CALL_FAILED and not binary["success"]
    assert "HTTP 400" in binary["error"] and binary["raw_response"] is None
    assert rubric["scores"] == {"accuracy": None, "clarity": None}


def test_is_available_is_a_cheap_health_check():
    with FakeLLMServer() as server, Judge(endpoint(server)) as judge:
        assert judge.is_available()
        assert server.request_count == 0  # the model list, not a chat completion
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    dead = {"backend": "openai", "model": "m", "base_url": f"http://127.0.0.1:{closed_port}/v1"}
    with Judge(dead) as judge:
        assert not judge.is_available(timeout_s=2)


@pytest.mark.parametrize("url_variable", ["OPENAI_BASE_URL", "OPENAI_API_URL"])
def test_endpoint_from_environment_variables(monkeypatch, url_variable):
    with FakeLLMServer(lambda body, ctx: "1") as server:
        for variable in ("OPENAI_BASE_URL", "OPENAI_API_URL"):
            monkeypatch.delenv(variable, raising=False)
        monkeypatch.setenv("MODEL_VERSION", "env-judge")
        monkeypatch.setenv("API_TYPE", "openai")
        monkeypatch.setenv(url_variable, server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        with Judge() as judge:
            outcome = judge.evaluate_binary("q", "a", "p")
        assert server.requests[0]["model"] == "env-judge"
    assert outcome["result"] == 1 and outcome["model"] == "env-judge"


def test_a_cached_judgment_is_reused_and_refresh_asks_again(tmp_path):
    cache = tmp_path / "judge.sqlite"
    with FakeLLMServer(lambda body, ctx: "Rating: [[9]]") as server:
        with Judge(endpoint(server), cache) as judge:
            first = judge.evaluate_single("q", "a")
        with Judge(endpoint(server), cache) as judge:
            again = judge.evaluate_single("q", "a")
            assert judge.stats.cache_hits == 1
        assert server.request_count == 1
        with Judge(endpoint(server), cache, refresh=True) as judge:
            redone = judge.evaluate_single("q", "a")
        assert server.request_count == 2
    assert (first["cached"], again["cached"], redone["cached"]) == (False, True, False)
    assert again["result"] == first["result"] == 9.0


def test_attempts_make_identical_judgments_separate_calls(fake_llm):
    # The echoing fake judge gives no rating: no re-asks, so only the judgments are counted.
    with Judge(endpoint(fake_llm), max_reasks=0) as judge:
        tasks = [judge.single_task("q", "a", attempt=attempt) for attempt in (0, 0, 1)]
        judge.run(tasks)
    assert fake_llm.request_count == 2  # the two attempt-0 calls were one


def test_sampling_overrides_and_unknown_settings(fake_llm):
    with Judge(endpoint(fake_llm), sampling={"max_tokens": 64, "seed": 7}) as judge:
        judge.evaluate_single("q", "a")
    assert fake_llm.requests[0]["max_tokens"] == 64 and fake_llm.requests[0]["seed"] == 7
    with pytest.raises(ConfigError, match="temprature"):
        Judge(endpoint(fake_llm), sampling={"temprature": 0})
    with pytest.raises(ConfigError, match="max_concurrent"):
        Judge(endpoint(fake_llm), max_concurrent=0)


def test_custom_prompt_replaces_the_user_message(fake_llm):
    template = "Q: {question}\nGold: {reference}\nGuess: {prediction}\nReply 1 or 0."
    with Judge(endpoint(fake_llm), max_reasks=0) as judge:  # the echo is no verdict
        outcome = judge.evaluate_binary("2+2?", "4", "four", custom_prompt=template)
        with pytest.raises(ConfigError, match="unknown field"):
            judge.evaluate_binary("q", "a", "p", custom_prompt="{question} {gold} {prediction}")
    nonce = re.search(r"BEGIN (\w+)>>>", outcome["prompt"]).group(1)
    assert outcome["prompt"] == (
        f"Q: {fenced_block('QUESTION', '2+2?', nonce)}\n"
        f"Gold: {fenced_block('REFERENCE ANSWER', '4', nonce)}\n"
        f"Guess: {fenced_block('CANDIDATE ANSWER', 'four', nonce)}\nReply 1 or 0."
    )
    assert fake_llm.request_count == 1
