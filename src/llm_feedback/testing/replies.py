"""What a responder is given and returns, and the two plain responders (echo and schema).

A responder is a callable ``(body: dict, ctx: RequestContext) -> str | Reply`` that decides
what the fake server answers to one chat request (or one line of a batch).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from llm_feedback.testing.schema_fill import SchemaFiller


@dataclass(frozen=True, slots=True)
class RequestContext:
    """What a responder knows about a chat request beyond its JSON body.

    `key_call_index` counts earlier requests with exactly the same messages, so a
    responder can fail the first k attempts of each distinct request.
    """

    call_index: int
    key_call_index: int
    messages_key: str
    path: str


@dataclass(frozen=True, slots=True)
class Reply:
    """A responder's full answer, when a plain string is not enough.

    `status` != 200 sends an OpenAI-style error body (with `Retry-After` when
    `retry_after` is set); `delay_s` is added to the server's latency (to outlast a client
    timeout); `raw_body` is sent verbatim with status 200 (to model malformed JSON).

    `probabilities` ({token: probability}) scripts the reply's token probabilities for a
    request that asks for them (`logprobs: true, top_logprobs: N`): the content is split
    into word and punctuation tokens (`protocol.tokens`), the LAST token that is a key
    gets the mapping's N most likely entries as its alternatives (its own logprob is its
    entry's), every other token probability 1. None: the server returns `"logprobs": null`,
    as an endpoint that gives none.

    `reasoning` is a reasoning model's thinking, sent as `message.reasoning_content` (as
    `vllm serve --reasoning-parser` and DeepSeek send it) and billed in `usage`: counted in
    `completion_tokens` and in `completion_tokens_details.reasoning_tokens`.
    """

    content: str | None = None
    status: int = 200
    delay_s: float | None = None
    retry_after: float | None = None
    finish_reason: str = "stop"
    raw_body: str | None = None
    error_message: str | None = None
    # The error body's `type` and `code` (default: those of the status).
    error_type: str | None = None
    error_code: str | None = None
    probabilities: Mapping[str, float] | None = None
    reasoning: str | None = None


Responder: TypeAlias = Callable[[dict[str, Any], RequestContext], str | Reply]


def message_text(message: dict[str, Any]) -> str:
    """The text of a message whose content is a string or a list of content parts.

    Args:
        message: a chat message.

    Returns:
        Its text.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if isinstance(message, dict) and message.get("role") == "user":
            return message_text(message)
    return ""


def echo_responder(body: dict[str, Any], ctx: RequestContext) -> str:
    """Answers ``"Echo: <first 40 characters of the last user message>"``.

    Args:
        body: the request's JSON body.
        ctx: the request's context (attempt, path, ...).

    Returns:
        The echo.
    """
    return f"Echo: {_last_user_text(body)[:40]}"


def schema_responder(body: dict[str, Any], ctx: RequestContext) -> str:
    """Answers a JSON document that validates against the request's schema.

    The schema is read from ``response_format`` of type ``json_schema``
    (``{"json_schema": {"schema": ...}}``), from ``json_object`` carrying a ``schema``, or
    from vLLM's ``guided_json``. Values are drawn from a generator seeded with the hash of
    the messages: the same request always gets the same document, different requests get
    different valid values (integers spread over their range, enum members varied).
    Without a schema it echoes; under plain ``json_object`` the echo is wrapped as
    ``{"echo": ...}`` so that the reply still is the JSON object that mode promises.

    Args:
        body: the request's JSON body.
        ctx: the request's context (attempt, path, ...).

    Returns:
        The JSON document (or the echo).
    """
    response_format = body.get("response_format")
    schema: Any = body.get("guided_json")
    if isinstance(response_format, dict):
        if response_format.get("type") == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema", {})
        elif response_format.get("type") == "json_object" and schema is None:
            schema = response_format.get("schema")
            if schema is None:
                return json.dumps({"echo": echo_responder(body, ctx)})
    if not isinstance(schema, dict):
        return echo_responder(body, ctx)
    rng = random.Random(int(ctx.messages_key, 16))
    return json.dumps(SchemaFiller(schema, rng).make(schema), ensure_ascii=False)
