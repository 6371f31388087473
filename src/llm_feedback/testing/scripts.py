"""Responders built from other answers: scripted rules, sequences, and injected faults."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from llm_feedback.testing.replies import (
    Reply,
    RequestContext,
    Responder,
    echo_responder,
    message_text,
    schema_responder,
)

Matcher: TypeAlias = str | Callable[[dict[str, Any]], bool]
Answer: TypeAlias = str | Reply | Responder


def scripted(
    rules: Sequence[tuple[Matcher, Answer]], default: Responder = echo_responder
) -> Responder:
    """The first rule that matches answers; `default` answers when none does.

    A rule's matcher is a substring looked for in every message's content, or a predicate
    on the request body; its answer is a string, a `Reply` or another responder.

    Args:
        rules: (matcher, answer) pairs, tried in order.
        default: the responder when no rule matches.

    Returns:
        The responder.
    """

    def matches(matcher: Matcher, body: dict[str, Any]) -> bool:
        if isinstance(matcher, str):
            return any(matcher in message_text(message) for message in body.get("messages", []))
        return bool(matcher(body))

    def respond(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        for matcher, answer in rules:
            if matches(matcher, body):
                return answer if isinstance(answer, (str, Reply)) else answer(body, ctx)
        return default(body, ctx)

    return respond


def flaky(
    inner: Responder, failures: int, status: int = 429, retry_after: float | None = 0.05
) -> Responder:
    """Fails the first `failures` attempts of each distinct request, then asks `inner`.

    Args:
        inner: the responder after the failures.
        failures: failed attempts per distinct request.
        status: the failures' HTTP status.
        retry_after: their Retry-After seconds (None: no header).

    Returns:
        The responder.
    """

    def respond(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        if ctx.key_call_index < failures:
            return Reply(
                status=status,
                retry_after=retry_after,
                error_message=f"simulated failure {ctx.key_call_index + 1} of {failures}",
            )
        return inner(body, ctx)

    return respond


# How servers refuse a request longer than the model's context: OpenAI by its code alone
# (the message here names no length, so only the code can tell it), vLLM and llama.cpp by
# their own words.
CONTEXT_REFUSALS: dict[str, Reply] = {
    "openai": Reply(
        status=400,
        error_code="context_length_exceeded",
        error_message="Please reduce the length of the messages.",
    ),
    "vllm": Reply(
        status=400,
        error_type="BadRequestError",
        error_message=(
            "This model's maximum context length is 4096 tokens. However, you requested "
            "40960 tokens (40448 in the messages, 512 in the completion). Please reduce the "
            "length of the messages or completion."
        ),
    ),
    "llama.cpp": Reply(
        status=400,
        error_type="exceed_context_size_error",
        error_message="the request exceeds the available context size, try increasing it",
    ),
}


def context_limited(inner: Responder, max_body_chars: int, style: str = "openai") -> Responder:
    """Refuses every request whose JSON body is longer than `max_body_chars` as a server
    whose model context it exceeds (`CONTEXT_REFUSALS[style]`); asks `inner` otherwise.

    Args:
        inner: the responder for requests that fit.
        max_body_chars: the longest body accepted.
        style: whose refusal wording (`CONTEXT_REFUSALS` key).

    Returns:
        The responder.
    """
    refusal = CONTEXT_REFUSALS[style]

    def respond(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        if len(json.dumps(body, ensure_ascii=False)) > max_body_chars:
            return refusal
        return inner(body, ctx)

    return respond


def sequence(replies: Sequence[str | Reply]) -> Responder:
    """Answers successive calls with successive items; the last one repeats.

    The position is kept by the responder itself (not reset by `/_reset`), so that a
    sequence nested in `scripted` advances only on the calls routed to it.

    Args:
        replies: the replies, in order.

    Returns:
        The responder.
    """
    if not replies:
        raise ValueError("sequence() needs at least one reply")
    calls_answered = 0

    def respond(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        nonlocal calls_answered
        reply = replies[min(calls_answered, len(replies) - 1)]
        calls_answered += 1
        return reply

    return respond


# Shares of calls the chaos responder answers with each fault (the rest: schema_responder).
CHAOS_FAULTS = {"rate_limited": 0.20, "server_error": 0.05, "stall": 0.02, "malformed": 0.10}
CHAOS_STALL_S = 1.5  # past the 1 s timeout the chaos benchmark gives its client
_CHAOS_REPLIES = {
    "rate_limited": Reply(status=429, retry_after=0.05, error_message="chaos: slow down"),
    "server_error": Reply(status=500, error_message="chaos: internal error"),
    "stall": Reply(content="too late", delay_s=CHAOS_STALL_S),
    "malformed": Reply(content="Sorry, I will answer in my own way: it is fine, mostly."),
}


def chaos_responder(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
    """Faults at the shares of `CHAOS_FAULTS`: 429 with Retry-After, 500, a stall past the
    client's timeout, a reply no parser can read; otherwise `schema_responder`.

    Each attempt of a request draws anew (seeded by the messages and the attempt number),
    so retries and re-asks eventually get through, and a run can be repeated exactly.

    Args:
        body: the request's JSON body.
        ctx: the request's context (attempt, path, ...).

    Returns:
        The reply, or a fault as a `Reply`.
    """
    draw = random.Random(f"{ctx.messages_key}:{ctx.key_call_index}").random()
    edge = 0.0
    for fault, share in CHAOS_FAULTS.items():
        edge += share
        if draw < edge:
            return _CHAOS_REPLIES[fault]
    return schema_responder(body, ctx)
