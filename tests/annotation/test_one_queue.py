"""Both judge stages on one queue (`judge_tables`): under the endpoint's concurrency limit N,
with the server holding every reply for a fixed delay, the server holds N calls at every
moment from the first call to the last one sent (neither stage's tail leaves a slot idle
while the other still has calls), never more than N; each table is the one its stage alone
gives, from the same cache; a failing stage stops the other. Real stages against the
project's server, which logs how many calls it held at every arrival and answer."""

from __future__ import annotations

import time

import pytest

from llm_feedback.annotation.stages import (
    aspect_annotations_table,
    critiques_table,
    judge_tables,
)
from llm_feedback.backends import EndpointConfig, LLMClient
from llm_feedback.core.errors import EndpointError
from llm_feedback.testing.server import FakeLLMServer, Reply, schema_responder

from .test_progress import final_bar
from .test_streaming import completions_frame

LIMIT = 4  # the endpoint's concurrency limit
LATENCY_S = 0.2  # each reply is held this long by the server
# A slot freed by an answer is refilled within a client's turnaround (milliseconds);
# a stage's tail leaves slots free for most of a reply's delay.
REFILL_S = LATENCY_S / 2
ASPECTS = ["honesty", "helpfulness"]
PROMPTS = 7  # x 4 completions: 14 aspect calls and 28 critique calls


def uneven_delays(body, ctx):
    """The project's schema replies, held LATENCY_S, 1.5 x or 2 x that in turn: calls
    finish at different times, as a real judge's do."""
    delay_s = LATENCY_S * (ctx.call_index % 3) / 2
    return Reply(content=schema_responder(body, ctx), delay_s=delay_s)


def _endpoint(server: FakeLLMServer) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {
            "backend": "openai",
            "model": "judge",
            "base_url": server.base_url,
            "max_concurrent": LIMIT,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.02,
        },
        name="judge",
    )


def _kind(body: dict) -> str:
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    return "aspect" if "ratings" in schema.get("properties", {}) else "critique"


def longest_idle_stretch(log: list[tuple[float, int]], limit: int) -> float:
    """The longest time the server held fewer than `limit` calls, from the moment it first
    held `limit` to the last call's arrival (the tail after it has nothing left to send)."""
    arrivals = [t for (t, held), (_, before) in zip(log[1:], log, strict=False) if held > before]
    last_arrival = max(arrivals, default=log[0][0])
    longest, below_since, full = 0.0, None, False
    for t, held in log:
        if t > last_arrival:
            break
        if held >= limit:
            full = True
            if below_since is not None:
                longest = max(longest, t - below_since)
                below_since = None
        elif full and below_since is None:
            below_since = t
    return longest


def _judge_both(source, client):
    return judge_tables(source, client, aspects=ASPECTS, fail_loud=True, prompts_per_chunk=3)


def test_both_stages_hold_every_slot_until_the_last_call_is_sent(tmp_path):
    completions = completions_frame(PROMPTS)
    with FakeLLMServer(uneven_delays, latency_s=LATENCY_S) as server:
        cache = tmp_path / "cache.sqlite"
        with LLMClient(_endpoint(server), cache, progress=False) as client:
            aspects, critiques = _judge_both(completions, client)
        log, bodies = server.in_flight_log, server.requests
        assert server.max_in_flight == LIMIT  # one limit for both stages, not one each
        kinds = [_kind(body) for body in bodies]
        assert kinds.count("aspect") == PROMPTS * len(ASPECTS)
        assert kinds.count("critique") == len(completions)
        # The stages overlap: critiques are sent before the last aspect call.
        assert kinds.index("critique") < len(kinds) - 1 - kinds[::-1].index("aspect")
        assert longest_idle_stretch(log, LIMIT) < REFILL_S

        # Each table is the one its stage alone gives, from the cache the run filled.
        server.reset()
        with LLMClient(_endpoint(server), cache, progress=False) as client:
            alone = (
                aspect_annotations_table(completions, client, aspects=ASPECTS).frame(),
                critiques_table(completions, client).frame(),
            )
        assert server.request_count == 0
    for together, by_itself in zip((aspects.frame(), critiques.frame()), alone, strict=True):
        assert together.columns.tolist() == by_itself.columns.tolist()
        assert together.equals(by_itself)


def test_the_measure_sees_the_idle_tail_of_stages_run_one_after_another():
    """The check above would catch the gap: the same stages one after another leave the
    slots idle through the first stage's tail."""
    completions = completions_frame(PROMPTS)
    with FakeLLMServer(uneven_delays, latency_s=LATENCY_S) as server:
        with LLMClient(_endpoint(server), None, progress=False) as client:
            aspect_annotations_table(completions, client, aspects=ASPECTS)
            critiques_table(completions, client)
        assert longest_idle_stretch(server.in_flight_log, LIMIT) > REFILL_S


def failing_critiques(body, ctx):
    """Aspect calls answered, after a delay; every critique call fails."""
    if _kind(body) == "critique":
        return Reply(status=400, error_message="critiques are refused here")
    return Reply(content=schema_responder(body, ctx), delay_s=0.05)


def test_a_failing_stage_stops_the_other():
    completions = completions_frame(20)
    with FakeLLMServer(failing_critiques) as server:
        with LLMClient(_endpoint(server), None, progress=False) as client:
            with pytest.raises(EndpointError):
                _judge_both(completions, client)
            time.sleep(0.2)  # calls already on the wire reach the server
            sent = server.request_count
            time.sleep(0.3)
            assert server.request_count == sent  # nothing more is sent after the failure
        kinds = [_kind(body) for body in server.requests]
    # The aspects were stopped with the critiques, before all of their calls.
    assert 0 < kinds.count("aspect") < 20 * len(ASPECTS)


def test_each_stage_keeps_its_progress_bar_with_its_total(capsys):
    completions = completions_frame(3)
    with FakeLLMServer(schema_responder, latency_s=0.01) as server:
        with LLMClient(_endpoint(server), None, progress=True) as client:
            _judge_both(completions, client)
    err = capsys.readouterr().err
    assert final_bar(err, "annotate aspects") == (3 * len(ASPECTS), 3 * len(ASPECTS))
    assert final_bar(err, "critique") == (12, 12)
