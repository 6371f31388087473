"""The task engine over real HTTP against the project's fake server."""

import asyncio

import pytest

from llm_feedback.annotation import build_aspect_request, parse_aspect_reply
from llm_feedback.annotation.stages import rating_problems
from llm_feedback.backends import ChatRequest, ChatResult, EndpointConfig, LLMClient
from llm_feedback.core.errors import ConfigError
from llm_feedback.engine import Reading, Task, TaskEngine, reask_request
from llm_feedback.replies.status import CALL_FAILED, NO_MATCH
from llm_feedback.testing.server import FakeLLMServer, Reply, scripted, sequence


def endpoint(server, **extra):
    definition = {
        "backend": "openai",
        "model": "judge-x",
        "base_url": server.base_url,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.02,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="test")


def read_digit(text):
    """A toy judge reader: the reply must be a single digit."""
    if text is not None and text.strip().isdigit():
        return Reading(int(text))
    return Reading(None, NO_MATCH, ok=False, problem="answer with one digit")


def digit_task(question, **sampling):
    return Task(ChatRequest.from_prompt(question, temperature=0.0, **sampling), read_digit)


def test_reask_shows_the_bad_reply_and_what_to_fix():
    request = build_aspect_request("honesty", "Q?", ["a", "b"], [1, 0], structured=True)
    reply = '{"ratings": [{"text": 1, "rating": 9, "rationale": "r"}]}'
    problems = rating_problems(parse_aspect_reply("honesty", reply, 2, structured=True))
    assert len(problems) == 2 and problems[0].startswith("Text 1: rating 9")
    reask = reask_request(request, ChatResult(reply, finish_reason="stop"), "; ".join(problems))
    assert reask.attempt == request.attempt + 1
    assert reask.messages[: len(request.messages)] == request.messages
    assert reask.messages[-2] == {"role": "assistant", "content": reply}
    assert "Text 2: no item for Text 2" in reask.messages[-1]["content"]
    assert reask.json_schema == request.json_schema
    assert reask.max_tokens == request.max_tokens
    assert reask.cache_key("b", "m") != request.cache_key("b", "m")


def test_reask_after_an_empty_reply_repeats_the_request():
    request = build_aspect_request("honesty", "Q?", ["a"], [0])
    reask = reask_request(request, ChatResult("", finish_reason="stop"), "empty reply")
    assert reask.messages == request.messages and reask.attempt == 1


def test_a_reply_cut_off_by_max_tokens_is_reasked_with_twice_the_budget():
    request = ChatRequest.from_prompt("Q?", max_tokens=100)
    reask = reask_request(request, ChatResult('{"rat', finish_reason="length"), "cut off")
    assert reask.max_tokens == 200 and reask.attempt == 1


def test_only_unreadable_replies_are_reasked_with_the_problem_shown():
    responder = scripted(
        [
            ("could not be read", "7"),
            ("question bad", "no idea"),
        ],
        default=lambda body, ctx: "3",
    )
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            engine = TaskEngine(client, max_reasks=2)
            outcomes = engine.run([digit_task("question ok"), digit_task("question bad")])
        bodies = server.requests
    assert [o.value for o in outcomes] == [3, 7]
    assert [o.reasks for o in outcomes] == [0, 1]
    assert len(bodies) == 3
    assert "answer with one digit" in bodies[-1]["messages"][-1]["content"]
    assert engine.last_summary.reasked == 1 and engine.last_summary.unreadable == 0
    assert outcomes[1].prompt_tokens > outcomes[0].prompt_tokens  # both calls counted


def test_reasks_stop_at_max_reasks_and_the_last_reading_stays_unreadable():
    with FakeLLMServer(lambda body, ctx: "never a digit") as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            engine = TaskEngine(client, max_reasks=2)
            (outcome,) = engine.run([digit_task("q")])
        assert server.request_count == 3
    assert outcome.value is None and outcome.status == NO_MATCH and not outcome.ok
    assert outcome.reasks == 2 and outcome.error is None
    assert engine.last_summary.unreadable == 1


def test_a_cut_off_reply_is_reasked_with_a_doubled_budget_over_http():
    replies = sequence([Reply("12 and then", finish_reason="length"), Reply("5")])
    with FakeLLMServer(replies) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            (outcome,) = TaskEngine(client).run([digit_task("q", max_tokens=50)])
        budgets = [body["max_tokens"] for body in server.requests]
    assert budgets == [50, 100] and outcome.value == 5


def test_a_failed_call_is_never_reasked_and_keeps_the_readers_shape():
    with FakeLLMServer(lambda body, ctx: Reply(status=400, error_message="bad")) as server:
        with LLMClient(endpoint(server, max_retries=0), None, progress=False) as client:
            (outcome,) = TaskEngine(client).run([digit_task("q")])
        assert server.request_count == 1
    assert outcome.status == CALL_FAILED and not outcome.ok and "HTTP 400" in outcome.error
    assert outcome.value is None and not outcome.reply.ok


def test_merge_keeps_what_the_earlier_reply_got_right():
    def read_pair(text):
        parts = (text or "").split(",")
        values = [int(p) if p.strip().isdigit() else None for p in parts[:2]]
        values += [None] * (2 - len(values))
        ok = None not in values
        return Reading(values, ok=ok, status="ok" if ok else NO_MATCH)

    def merge(earlier, fresh):
        pairs = zip(earlier.value, fresh.value, strict=True)
        values = [old if old is not None else new for old, new in pairs]
        return Reading(values, ok=None not in values)

    replies = sequence(["4,x", "x,2"])
    with FakeLLMServer(replies) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            task = Task(ChatRequest.from_prompt("pair", temperature=0.0), read_pair, merge)
            (outcome,) = TaskEngine(client).run([task])
    assert outcome.value == [4, 2] and outcome.ok and outcome.reasks == 1


def test_generation_tasks_take_any_reply_and_are_never_reasked():
    with FakeLLMServer(lambda body, ctx: "whatever") as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            outcomes = TaskEngine(client).run(
                Task(ChatRequest.from_prompt(f"q{i}"), reask=False) for i in range(5)
            )
        assert server.request_count == 5
    assert [o.value for o in outcomes] == ["whatever"] * 5


def test_sync_and_async_runs_are_the_same_implementation(tmp_path):
    responder = scripted(
        [("could not be read", "9")],
        default=lambda body, ctx: "1" if "even" in body["messages"][-1]["content"] else "odd",
    )
    questions = [f"{'even' if i % 2 == 0 else 'other'} {i}" for i in range(6)]
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            engine = TaskEngine(client)
            synchronous = engine.run([digit_task(q) for q in questions])

            async def main():
                return await engine.arun([digit_task(q) for q in questions])

            asynchronous = asyncio.run(main())
    assert [(o.value, o.reasks) for o in synchronous] == [(o.value, o.reasks) for o in asynchronous]
    assert [o.value for o in synchronous] == [1, 9, 1, 9, 1, 9]


def test_max_reasks_must_be_a_count():
    with pytest.raises(ConfigError, match="max_reasks"):
        TaskEngine(None, max_reasks=-1)


def test_a_prompt_over_the_input_budget_is_not_sent_and_says_so():
    with FakeLLMServer(lambda body, ctx: "7") as server:
        config = endpoint(server, max_input_tokens=100)
        with LLMClient(config, None, progress=False) as client:
            engine = TaskEngine(client, fail_loud=True)
            outcomes = engine.run([digit_task("short"), digit_task("x" * 3000), digit_task("ok")])
        assert server.request_count == 2
    assert [o.value for o in (outcomes[0], outcomes[2])] == [7, 7]
    skipped = outcomes[1]
    assert skipped.status == "skipped_too_long" and not skipped.ok
    assert skipped.error.startswith("skipped_too_long: ~1") and "endpoints.test" in skipped.error
    assert engine.last_summary.skipped == 1 and engine.last_summary.failed == 0


def test_the_local_model_budget_counts_the_reply_too():
    from llm_feedback.engine.engine import too_long

    local = EndpointConfig.from_dict(
        {"backend": "local", "model": "m", "context_per_slot": 1024}, name="local"
    )
    assert too_long(local, ChatRequest.from_prompt("q" * 300, max_tokens=512)) is None
    assert too_long(local, ChatRequest.from_prompt("q" * 300, max_tokens=1000)) is not None


def test_a_node_with_not_one_answered_call_fails_loudly():
    from llm_feedback.core.errors import EndpointError

    with FakeLLMServer(lambda body, ctx: "7") as server:
        with LLMClient(endpoint(server, max_input_tokens=10), None, progress=False) as client:
            with pytest.raises(EndpointError, match="not one call was answered"):
                TaskEngine(client, fail_loud=True).run([digit_task("x" * 300)] * 2, desc="d")
            # A library caller without fail_loud gets the rows, each saying why.
            outcomes = TaskEngine(client).run([digit_task("x" * 300)])
        assert server.request_count == 0
    assert outcomes[0].status == "skipped_too_long"


def test_run_into_hands_each_final_outcome_over_once_and_keeps_none():
    # "q1" is read after two re-asks, "q3" after one; the others at once.
    readable_after = {"q1": 2, "q3": 1}

    def responder(body, ctx):
        messages = body["messages"]
        reasks = (len(messages) - 1) // 2
        return "5" if reasks >= readable_after.get(messages[0]["content"], 0) else "no"

    delivered = []
    with FakeLLMServer(responder) as server:
        with LLMClient(endpoint(server), None, progress=False) as client:
            engine = TaskEngine(client, max_reasks=2)
            summary = engine.run_into(
                (digit_task(f"q{i}") for i in range(6)),
                lambda index, outcome: delivered.append((index, outcome.value, outcome.reasks)),
            )
    assert sorted(delivered) == [(0, 5, 0), (1, 5, 2), (2, 5, 0), (3, 5, 1), (4, 5, 0), (5, 5, 0)]
    # Read-at-once outcomes come first: nothing waits for the re-asks to be handed over.
    assert {index for index, _, _ in delivered[:4]} == {0, 2, 4, 5}
    assert (summary.tasks, summary.reasked, summary.unreadable, summary.failed) == (6, 2, 0, 0)


def test_stages_run_together_share_one_limit_and_fill_each_others_gaps():
    """Two stages on one client (`run_together`): never more calls in flight than the
    endpoint's one limit, each stage's outcomes its own, and one stage's re-asks sent while
    the other's calls still go (not after them)."""
    from llm_feedback.engine import run_together

    def responder(body, ctx):
        messages = body["messages"]
        if messages[0]["content"].startswith("a") and len(messages) == 1:
            return "no"  # every first reply of stage a is unreadable: one re-ask each
        return "4"

    limit = 3
    with FakeLLMServer(responder, latency_s=0.02) as server:
        with LLMClient(endpoint(server, max_concurrent=limit), None, progress=False) as client:
            taken: dict[str, dict[int, int]] = {"a": {}, "b": {}}

            def stage(name, count):
                async def run():
                    engine = TaskEngine(client, max_reasks=1)
                    return await engine.stream_into(
                        [digit_task(f"{name}{i}") for i in range(count)],
                        lambda index, outcome: taken[name].__setitem__(index, outcome.reasks),
                    )

                return run

            summaries = run_together(client, [stage("a", 6), stage("b", 60)])
        bodies = server.requests
        assert server.max_in_flight == limit
    assert [s.tasks for s in summaries] == [6, 60] and summaries[0].reasked == 6
    assert taken["a"] == dict.fromkeys(range(6), 1) and taken["b"] == dict.fromkeys(range(60), 0)
    order = [(body["messages"][0]["content"][0], len(body["messages"])) for body in bodies]
    first_reask = order.index(("a", 3))
    assert ("b", 1) in order[first_reask:]  # stage b still sending when a's re-asks went out
