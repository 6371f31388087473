"""The fake server's wire formats: HTTP/1.1 request heads and responses, and the OpenAI
bodies it sends (chat completions, model lists, error objects)."""

from __future__ import annotations

import functools
import json
import math
import re
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, NamedTuple

from llm_feedback.testing.replies import Reply, message_text

DEFAULT_MODEL_ID = "fake-model"
CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})

_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("timeout_error", "timeout"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


class Response(NamedTuple):
    status: int
    body: bytes
    extra_headers: str = ""  # already formatted "Name: value\r\n" lines


class RequestHead(NamedTuple):
    method: str
    target: str
    content_length: int
    keep_alive: bool
    api_key: str | None
    # Every header, by its lower-cased name (the last one of a repeated name).
    headers: dict[str, str] = {}  # never mutated


def json_response(status: int, payload: Any, extra_headers: str = "") -> Response:
    """A JSON response, compactly encoded.

    Args:
        status: the HTTP status.
        payload: the JSON value.
        extra_headers: more header lines, each ending in CRLF.

    Returns:
        The response.
    """
    return Response(status, json.dumps(payload, separators=(",", ":")).encode(), extra_headers)


def error_response(
    status: int,
    message: str,
    retry_after: float | None = None,
    error_type: str | None = None,
    code: str | None = None,
) -> Response:
    """An OpenAI-style error body; `error_type` and `code` default to the status's.

    Args:
        status: the HTTP status.
        message: the error's message.
        retry_after: a Retry-After in seconds (None: none).
        error_type: the body's error type.
        code: the body's error code.

    Returns:
        The response.
    """
    default_type, default_code = _ERROR_TYPES.get(status, ("server_error", "server_error"))
    error_type, code = error_type or default_type, code or default_code
    payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    headers = f"Retry-After: {retry_after:g}\r\n" if retry_after is not None else ""
    return json_response(status, payload, headers)


def models_response() -> Response:
    model = {"id": DEFAULT_MODEL_ID, "object": "model", "created": 0, "owned_by": "llm_feedback"}
    return json_response(200, {"object": "list", "data": [model]})


def word_count(text: str | None) -> int:
    """The whitespace-separated words of a text (the default token count).

    Args:
        text: the text (None: none).

    Returns:
        The count.
    """
    return len(text.split()) if text else 0


# A word with the whitespace before it, one punctuation character, or trailing whitespace.
_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")


def tokens(content: str) -> list[str]:
    """The fake tokenizer of scripted probabilities: joined, the tokens are `content`.

    Args:
        content: the reply text.

    Returns:
        The tokens.
    """
    return _TOKEN.findall(content)


def logprobs_body(body: dict[str, Any], reply: Reply) -> dict[str, Any] | None:
    """The choice's `logprobs` object for a request that asks for them (see
    `Reply.probabilities`); None when it does not, or the reply scripts none.

    Args:
        body: the chat request body.
        reply: the scripted reply.

    Returns:
        The `logprobs` object, or None.
    """
    if not body.get("logprobs") or reply.probabilities is None or reply.content is None:
        return None
    top = int(body.get("top_logprobs") or 0)
    pieces = tokens(reply.content)
    scripted = {key: p for key, p in reply.probabilities.items() if p > 0}
    verdict = max((i for i, piece in enumerate(pieces) if piece.strip() in scripted), default=None)
    content = []
    for position, piece in enumerate(pieces):
        if position == verdict:
            ranked = sorted(scripted.items(), key=lambda item: -item[1])[: max(top, 1)]
            alternatives = [{"token": t, "logprob": math.log(p)} for t, p in ranked]
            own = math.log(scripted[piece.strip()])
        else:
            alternatives, own = [{"token": piece, "logprob": 0.0}], 0.0
        content.append({"token": piece, "logprob": own, "top_logprobs": alternatives[:top]})
    return {"content": content, "refusal": None}


def completion(
    call_index: int,
    model: str,
    body: dict[str, Any],
    reply: Reply,
    count_tokens: Callable[[str], int],
) -> dict[str, Any]:
    """The chat completion object for `reply`, its `usage` counted by `count_tokens`.

    Args:
        call_index: the call's number (its id).
        model: the model named in the reply.
        body: the chat request body.
        reply: the scripted reply.
        count_tokens: counts a text's tokens.

    Returns:
        The chat completion object.
    """
    messages = [message for message in body["messages"] if isinstance(message, dict)]
    prompt_tokens = sum(count_tokens(message_text(message)) for message in messages)
    if count_tokens is not word_count:
        # A tokenizer's count is billed the way OpenAI documents its chat format: 3 tokens
        # of framing per message and 3 that prime the reply.
        prompt_tokens += 3 * len(messages) + 3
    thinking = count_tokens(reply.reasoning or "")
    completion_tokens = count_tokens(reply.content or "") + thinking
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
        usage["completion_tokens_details"] = {"reasoning_tokens": thinking}
    return {
        "id": f"chatcmpl-fake-{call_index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": logprobs_body(body, reply),
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": usage,
    }


def parse_head(head: bytes) -> RequestHead:
    """Method, target, Content-Length, keep-alive and the API key from a request head.

    Args:
        head: the request's head bytes.

    Returns:
        The parsed head.
    """
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"malformed request line {request_line!r}")
    method, target, version = parts
    content_length = 0
    api_key = None
    # HTTP/1.1 keeps the connection open unless told otherwise; HTTP/1.0 the reverse.
    keep_alive = version == "HTTP/1.1"
    headers: dict[str, str] = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name:
            headers[name] = value.strip()
        if name == "content-length":
            if not value.strip().isdigit():
                raise ValueError(f"bad Content-Length {value.strip()!r}")
            content_length = int(value)
        elif name == "connection":
            token = value.strip().lower()
            if token in ("close", "keep-alive"):
                keep_alive = token == "keep-alive"
        elif name == "transfer-encoding":
            raise ValueError("chunked request bodies are not supported; send Content-Length")
        elif name == "authorization":
            api_key = value.strip().removeprefix("Bearer ").strip()
        elif name in ("api-key", "x-api-key", "x-goog-api-key"):  # Azure, Anthropic, Google
            api_key = value.strip()
    return RequestHead(method, target, content_length, keep_alive, api_key, headers)


@functools.cache
def _status_line(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n"


def encode(response: Response, keep_alive: bool) -> bytes:
    """A response as HTTP/1.1 bytes.

    Args:
        response: the response.
        keep_alive: whether the connection stays open.

    Returns:
        The bytes.
    """
    connection_header = "" if keep_alive else "Connection: close\r\n"
    head = (
        f"{_status_line(response.status)}"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(response.body)}\r\n"
        f"{response.extra_headers}{connection_header}\r\n"
    )
    return head.encode("latin-1") + response.body
