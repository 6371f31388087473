"""The score fix's re-scores on the judge stages' queue (`annotation.rescore_ahead`): sent as
each prompt's aspect ratings and critiques are in, while the stages still have calls out,
so the endpoint holds every slot to the last call; the fix then finds every re-score in the
request cache and its table is the one it gives alone. Real stages against the project's
server, which logs how many calls it held at every arrival and answer."""

from __future__ import annotations

import json

import pandas as pd

from llm_feedback.annotation import rescore_ahead
from llm_feedback.annotation.rescore import overall_scores_table
from llm_feedback.annotation.rescore_ahead import ScoreFixAhead
from llm_feedback.annotation.stages import judge_tables
from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.backends.client_state import CHUNK
from llm_feedback.testing.server import FakeLLMServer, Reply, schema_responder

from .test_one_queue import ASPECTS, LATENCY_S, LIMIT, REFILL_S, _endpoint, longest_idle_stretch
from .test_streaming import completions_frame

PROMPTS = 12
FIX = {"flip_threshold": 1.0, "reannotate_threshold": 5.0}
SAMPLING = {"temperature": 0.3}


def _kind(body: dict) -> str:
    if any(message["role"] == "assistant" for message in body["messages"]):
        return "rescore"  # the critique conversation goes on after the judge's own turn
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    return "aspect" if "ratings" in schema.get("properties", {}) else "critique"


def tens_for_some(body, ctx):
    """Schema replies held for uneven delays; some critiques give 10, which the fix
    re-asks (every aspect rating lies within the re-annotate threshold)."""
    reply = schema_responder(body, ctx)
    if _kind(body) == "critique":
        parsed = json.loads(reply)
        parsed["overall_score"] = 10 if len(body["messages"][-1]["content"]) % 3 else 7
        reply = json.dumps(parsed)
    return Reply(content=reply, delay_s=LATENCY_S * (ctx.call_index % 3) / 2)


def _judge(completions, client, score_fix):
    return judge_tables(
        completions,
        client,
        aspects=ASPECTS,
        fail_loud=True,
        critique_sampling=SAMPLING,
        prompts_per_chunk=5,
        score_fix=score_fix,
    )


def _fix(completions, aspects, critiques, client):
    return overall_scores_table(
        completions, aspects, critiques, client, aspects=ASPECTS, sampling=SAMPLING, **FIX
    ).frame()


def test_rescores_share_the_queue_and_the_fix_reads_them_from_the_cache(tmp_path):
    completions = completions_frame(PROMPTS)
    fix = ScoreFixAhead(**FIX, aspects=ASPECTS, sampling=SAMPLING, max_reasks=2)
    with FakeLLMServer(tens_for_some, latency_s=LATENCY_S) as server:
        cache = tmp_path / "ahead.sqlite"
        with LLMClient(_endpoint(server), cache, progress=False) as client:
            aspects, critiques = _judge(completions, client, fix)
        kinds = [_kind(body) for body in server.requests]
        log = server.in_flight_log
        assert server.max_in_flight == LIMIT  # one limit for the three, not one each
        rescores = kinds.count("rescore")
        assert rescores > 0
        # Sent while the judge stages still had calls to send, not after their tails.
        last_judge_call = max(i for i, kind in enumerate(kinds) if kind != "rescore")
        assert kinds.index("rescore") < last_judge_call
        # Every slot held until the stages' last call was sent: planning the re-scores
        # (off the loop) takes no slot's time. After it, a re-score waits for its own
        # prompt's last answer: nothing else is left to send.
        arrivals = [
            t for (t, held), (_, before) in zip(log[1:], log, strict=False) if held > before
        ]
        stages_sent = [(t, held) for t, held in log if t <= arrivals[last_judge_call - 1]]
        assert longest_idle_stretch(stages_sent, LIMIT) < REFILL_S

        # The fix node's own run: every re-score it asks is in the cache.
        server.reset()
        with LLMClient(_endpoint(server), cache, progress=False) as client:
            ahead_scores = _fix(completions, aspects.frame(), critiques.frame(), client)
        assert server.request_count == 0
        assert (ahead_scores["fix_action"] == "reannotated").sum() == rescores

    # The same run with the fix sending its re-scores itself gives the same tables.
    with FakeLLMServer(tens_for_some, latency_s=LATENCY_S) as server:
        with LLMClient(_endpoint(server), tmp_path / "alone.sqlite", progress=False) as client:
            alone_aspects, alone_critiques = _judge(completions, client, None)
            assert [_kind(body) for body in server.requests].count("rescore") == 0
            alone_scores = _fix(completions, alone_aspects.frame(), alone_critiques.frame(), client)
        assert [_kind(body) for body in server.requests].count("rescore") == rescores
    pd.testing.assert_frame_equal(ahead_scores, alone_scores)
    pd.testing.assert_frame_equal(aspects.frame(), alone_aspects.frame())
    pd.testing.assert_frame_equal(critiques.frame(), alone_critiques.frame())


def test_without_a_request_cache_nothing_is_sent_ahead():
    """The answers would have nowhere to wait for the fix node: it sends them itself."""
    completions = completions_frame(4)
    fix = ScoreFixAhead(**FIX, aspects=ASPECTS, sampling=SAMPLING, max_reasks=2)
    with FakeLLMServer(tens_for_some, latency_s=0.01) as server:
        with LLMClient(_endpoint(server), None, progress=False) as client:
            _judge(completions, client, fix)
        assert "rescore" not in [_kind(body) for body in server.requests]


def test_prompts_finished_mid_run_are_planned_in_batches(tmp_path, monkeypatch):
    """While a stage still holds calls the client has not taken (it takes `CHUNK` at a
    time, queueing 4 per slot), finished prompts are planned a batch at a time: the first
    re-score arrives before the aspect stage could have handed over its last call, and the
    fix finds every re-score in the cache."""
    monkeypatch.setattr(rescore_ahead, "PLAN_BATCH_PROMPTS", 4)
    completions = completions_frame(300)  # 600 aspect calls and 1,200 critique calls
    fix = ScoreFixAhead(**FIX, aspects=ASPECTS, sampling=SAMPLING, max_reasks=2)
    with FakeLLMServer(tens_for_some, latency_s=0.01) as server:
        endpoint = EndpointConfig.from_dict(
            {
                "backend": "openai",
                "model": "judge",
                "base_url": server.base_url,
                "max_concurrent": 16,
            },
            name="judge",
        )
        cache = tmp_path / "ahead.sqlite"
        with LLMClient(endpoint, cache, progress=False) as client:
            aspects, critiques = _judge(completions, client, fix)
        kinds = [_kind(body) for body in server.requests]
        first = kinds.index("rescore")
        assert kinds[:first].count("aspect") < kinds.count("aspect") - CHUNK - 4 * 16
        server.reset()
        with LLMClient(endpoint, cache, progress=False) as client:
            scores = _fix(completions, aspects.frame(), critiques.frame(), client)
        assert server.request_count == 0
    assert (scores["fix_action"] == "reannotated").sum() == kinds.count("rescore")


def test_sending_ahead_stops_when_too_many_prompts_wait_and_the_fix_sends_the_rest(
    tmp_path, monkeypatch, caplog
):
    """Past `MAX_WAITING_PROMPTS` prompts held for the slower stage, the rows are let go
    (memory stays bounded): the fix node sends the re-scores itself, same table."""
    monkeypatch.setattr(rescore_ahead, "MAX_WAITING_PROMPTS", 0)
    completions = completions_frame(4)
    fix = ScoreFixAhead(**FIX, aspects=ASPECTS, sampling=SAMPLING, max_reasks=2)
    with FakeLLMServer(tens_for_some, latency_s=0.01) as server:
        with LLMClient(_endpoint(server), tmp_path / "ahead.sqlite", progress=False) as client:
            aspects, critiques = _judge(completions, client, fix)
            assert "rescore" not in [_kind(body) for body in server.requests]
            scores = _fix(completions, aspects.frame(), critiques.frame(), client)
        rescores = [_kind(body) for body in server.requests].count("rescore")
    assert "left to the fix_overall_scores node" in caplog.text
    assert rescores > 0 and (scores["fix_action"] == "reannotated").sum() == rescores
    with FakeLLMServer(tens_for_some, latency_s=0.01) as server:
        with LLMClient(_endpoint(server), None, progress=False) as client:
            alone = _fix(
                completions, *(t.frame() for t in _judge(completions, client, None)), client
            )
    pd.testing.assert_frame_equal(scores, alone)
