from llm_feedback.annotation import build_aspect_request, parse_aspect_reply
from llm_feedback.annotation.reask import build_reask_request, rating_problems


def test_reask_shows_the_bad_reply_and_what_to_fix() -> None:
    request = build_aspect_request("honesty", "Q?", ["a", "b"], [1, 0], structured=True)
    reply = '{"ratings": [{"text": 1, "rating": 9, "rationale": "r"}]}'
    problems = rating_problems(parse_aspect_reply("honesty", reply, 2, structured=True))
    assert len(problems) == 2 and problems[0].startswith("Text 1: rating 9")
    reask = build_reask_request(request, reply, problems)
    assert reask.attempt == request.attempt + 1
    assert reask.messages[: len(request.messages)] == request.messages
    assert reask.messages[-2] == {"role": "assistant", "content": reply}
    assert "Text 2: no item for Text 2" in reask.messages[-1]["content"]
    assert reask.json_schema == request.json_schema
    assert reask.cache_key("b", "m") != request.cache_key("b", "m")


def test_reask_after_an_empty_reply_repeats_the_request() -> None:
    request = build_aspect_request("honesty", "Q?", ["a"], [0])
    reask = build_reask_request(request, "", ["Text 1: empty reply"])
    assert reask.messages == request.messages and reask.attempt == 1
