"""Token probabilities through the client, over real HTTP to the project's server: the
request asks for them, both transports keep the label tokens' alternatives (and nothing
else), the request cache keeps them, and the verdict token is the one the reader reads."""

from __future__ import annotations

import math

import pytest

from llm_feedback.backends import ChatRequest, EndpointConfig, LLMClient
from llm_feedback.backends.base import kind_of
from llm_feedback.backends.token_logprobs import label_entries
from llm_feedback.evaluation.probabilities import pair_probability_columns, verdict_anchor
from llm_feedback.judges import Judgment, combine_orders
from llm_feedback.testing.protocol import logprobs_body, tokens
from llm_feedback.testing.server import FakeLLMServer, Reply

VERDICT = {"A": 0.6, "B": 0.3, "C": 0.1}
ASKING = ChatRequest.from_prompt(
    "which is better?", temperature=0.0, top_logprobs=3, logprob_labels=("A", "B", "C")
)


def endpoint(server: FakeLLMServer, transport: str, **extra) -> EndpointConfig:
    definition = {
        "backend": "openai",
        "model": "m",
        "base_url": server.base_url,
        "transport": transport,
        **extra,
    }
    return EndpointConfig.from_dict(definition, name="t")


@pytest.mark.parametrize("transport", ["lean", "sdk"])
def test_the_request_asks_and_the_reply_keeps_only_the_label_tokens(transport):
    reply = Reply("Score A: 7\nVerdict: [[A]]", probabilities=VERDICT)
    with FakeLLMServer(lambda body, ctx: reply) as server:
        with LLMClient(endpoint(server, transport), None, progress=False) as client:
            result = client.complete(ASKING)
        (body,) = server.requests
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    # " A" of "Score A" and the verdict's "A": the two label tokens, with their offsets.
    assert [(e["offset"], e["token"]) for e in result.label_logprobs] == [(5, " A"), (22, "A")]
    verdict = result.label_logprobs[-1]
    assert verdict["logprob"] == pytest.approx(math.log(0.6))
    alternatives = {a["token"]: math.exp(a["logprob"]) for a in verdict["top_logprobs"]}
    assert alternatives == pytest.approx(VERDICT)


def test_no_logprobs_asked_none_sent_and_none_returned_none_kept():
    with FakeLLMServer(lambda body, ctx: Reply("[[A]]", probabilities=VERDICT)) as server:
        with LLMClient(endpoint(server, "lean"), None, progress=False) as client:
            plain = client.complete(ChatRequest.from_prompt("which?"))
            asked = client.complete(ASKING)
        assert "logprobs" not in server.requests[0]
    assert plain.label_logprobs is None and asked.label_logprobs is not None
    with FakeLLMServer(lambda body, ctx: "Verdict: [[B]]") as server:  # an endpoint without
        with LLMClient(endpoint(server, "lean"), None, progress=False) as client:
            assert client.complete(ASKING).label_logprobs is None


def test_the_request_cache_keeps_the_probabilities_and_keys_them(tmp_path):
    cache = tmp_path / "cache.sqlite"
    reply = Reply("Verdict: [[B]]", probabilities=VERDICT)
    with FakeLLMServer(lambda body, ctx: reply) as server:
        for _ in range(2):
            with LLMClient(endpoint(server, "lean"), cache, progress=False) as client:
                result = client.complete(ASKING)
        assert server.request_count == 1
    assert result.cached and result.label_logprobs[0]["token"] == "B"
    plain = ChatRequest.from_prompt("which is better?", temperature=0.0)
    assert plain.cache_key("b", "m") != ASKING.cache_key("b", "m")


def test_label_entries_skip_the_digits_of_a_longer_number_and_need_content():
    content = [{"token": t, "logprob": -0.1, "top_logprobs": []} for t in ["[[", "1", "0", "]]"]]
    assert label_entries({"content": content}, [str(n) for n in range(1, 11)]) == []
    content[1]["token"] = "7"
    content[2]["token"] = "]"
    (entry,) = label_entries({"content": content}, ["7"])
    assert entry["offset"] == 2
    assert label_entries(None, ["A"]) is None and label_entries({"content": []}, ["A"]) is None


def test_the_test_servers_tokens_rebuild_the_reply_and_only_a_request_asking_gets_them():
    text = 'Fine. {"verdict": "A"}'
    assert "".join(tokens(text)) == text
    reply = Reply(text, probabilities=VERDICT)
    assert logprobs_body({"messages": []}, reply) is None
    body = logprobs_body({"logprobs": True, "top_logprobs": 2}, reply)
    verdict = next(entry for entry in body["content"] if entry["token"] == "A")
    assert [a["token"] for a in verdict["top_logprobs"]] == ["A", "B"]


def test_a_json_verdict_is_read_at_its_field_not_at_an_a_in_the_explanation():
    """The alternatives at the "verdict" field count, not those at a later "A"."""
    text = '{"verdict": "B", "explanation": "Response A is vague"}'
    pieces = tokens(text)
    verdict_at = next(i for i, piece in enumerate(pieces) if piece == "B")
    content = [
        {
            "token": piece,
            "logprob": 0.0,
            "top_logprobs": [
                {"token": "B", "logprob": math.log(0.8)},
                {"token": "A", "logprob": math.log(0.2)},
            ]
            if i == verdict_at
            else [{"token": piece, "logprob": 0.0}],
        }
        for i, piece in enumerate(pieces)
    ]
    entries = label_entries({"content": content}, ["A", "B", "C"])
    assert len(entries) == 2  # the verdict's "B" and the explanation's " A"
    assert verdict_anchor(text) == text.index('"B"') + 1
    orders = [
        Judgment(
            {"verdict": "B", "scores": [None, None]}, "ok", True, text, label_logprobs=entries
        ),
        Judgment({"verdict": "B", "scores": [None, None]}, "ok", True, text, label_logprobs=None),
    ]
    columns = pair_probability_columns(combine_orders(*orders))
    assert columns["prob_margin_a_first"] == pytest.approx(0.2 - 0.8)
    assert math.isnan(columns["prob_margin_b_first"]) and not columns["logprobs_usable"]


def test_which_backends_return_logprobs():
    def config(**definition):
        return EndpointConfig.from_dict({"model": "gpt-4o", **definition}, name="e")

    openai = config(backend="openai")
    assert kind_of("openai").returns_logprobs(openai)
    assert not kind_of("openai").returns_logprobs(config(backend="openai", model="o3-mini"))
    assert not kind_of("openai").returns_logprobs(config(backend="openai", mode="batch"))
    assert kind_of("local").returns_logprobs(config(backend="local"))
    assert kind_of("vllm").returns_logprobs(config(backend="vllm"))
    assert not kind_of("ray").returns_logprobs(config(backend="ray"))
