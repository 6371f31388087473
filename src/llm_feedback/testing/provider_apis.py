"""The fake server's Anthropic and Gemini APIs, close enough to the real ones that their
official SDKs accept them: Anthropic Messages and Message Batches (`/v1/messages...`,
`/v1/models`), Gemini generateContent, model lookup and batch mode (`/v1beta/...`).

A provider's request is turned into a chat completions body (roles, text, images as
`image_url` parts, audio as `input_audio`, the JSON schema as `response_format`) and
answered by the server's responder, so every scripted reply, failure, delay and malformed
body works the same on all three APIs; the answer goes back in the provider's own shape,
its errors too (Anthropic's `{"type": "error", ...}` with `retry-after`, 529
`overloaded_error`; Google's `{"error": {"code", "status", "details"}}` with `RetryInfo`,
a bad key as 400 `API_KEY_INVALID`). Batches follow the server's `BatchScript` (delay,
expiry, failure).

Like the real API version 2026-10-21, Anthropic requests carrying `temperature`, `top_p` or
`top_k` are refused with HTTP 400. Reasoning follows each API: Anthropic's `thinking`
budget (at least 1,024, below `max_tokens`) and `output_config.effort` are checked and a
responder's `reasoning` comes back as a thinking block billed in `output_tokens`; Gemini's
`thinkingConfig` (a budget or a level, not both) is checked, `maxOutputTokens` caps the
thoughts and the answer together, and the reasoning is billed as `thoughtsTokenCount`.
The chat body a responder sees carries the budget as `thinking_budget` and an effort or
thinking level as `reasoning_effort`.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from llm_feedback.testing.batch_api import BUSY_RETRY_AFTER_S, BatchAPI
from llm_feedback.testing.protocol import DEFAULT_MODEL_ID, RequestHead, Response, json_response
from llm_feedback.testing.rate_limits import ServerRateLimiter
from llm_feedback.testing.replies import Reply, message_text

# (chat body, endpoint path) -> (call index, the responder's reply), counted and delayed as
# a chat call
ChatAnswer = Callable[[dict[str, Any], str], Awaitable[tuple[int, Reply]]]

ANTHROPIC_BATCH_MAX_REQUESTS = 100_000
ANTHROPIC_BATCH_MAX_BYTES = 256 * 1024 * 1024
ANTHROPIC_MIN_THINKING = 1024
ANTHROPIC_EFFORTS = ("low", "medium", "high", "xhigh", "max")
# The chat body's key for the thinking budget a provider request set (chat completions has
# none): what a responder and a test read of Anthropic's or Gemini's budget.
THINKING_BUDGET = "thinking_budget"
GEMINI_THINKING_LEVELS = ("MINIMAL", "LOW", "MEDIUM", "HIGH", "XHIGH")
GEMINI_INLINE_MAX_BYTES = 20 * 1024 * 1024
# The first Anthropic API version without sampling parameters.
_NO_SAMPLING_VERSION = "2026-10-21"
_SAMPLING = ("temperature", "top_p", "top_k")
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/mpeg": "mp3"}
_URLSAFE = str.maketrans("-_", "+/")
_GEMINI_TYPES = "type.googleapis.com/google.ai.generativelanguage.v1main"
_GEMINI_MODEL_ROUTE = re.compile(r"/v1beta/models/([^/:]+)(?::(\w+))?")
_GEMINI_BATCH_ROUTE = re.compile(r"/v1beta/batches/([^/:]+)(?::(\w+))?")
_ANTHROPIC_BATCH_ROUTE = re.compile(r"/v1/messages/batches(?:/([^/]+)(?:/(results|cancel))?)?")


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _json_body(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _token_count(count_tokens: Callable[[str], int], messages: list[dict[str, Any]]) -> int:
    return sum(count_tokens(message_text(message)) for message in messages)


# -- Anthropic ---------------------------------------------------------------------------
def anthropic_error(
    status: int,
    message: str,
    error_type: str | None = None,
    retry_after: float | None = None,
    extra_headers: str = "",
) -> Response:
    """An Anthropic error body, with `retry-after` when given and a request id.

    Args:
        status: the HTTP status.
        message: the error's message.
        error_type: the body's error type.
        retry_after: a retry-after in seconds (None: none).
        extra_headers: further response header lines.

    Returns:
        The response.
    """
    kind = error_type or _ANTHROPIC_ERRORS.get(status, "api_error")
    payload = {"type": "error", "error": {"type": kind, "message": message}}
    headers = f"request-id: req_fake_{time.monotonic_ns()}\r\n" + extra_headers
    if retry_after is not None:
        headers += f"retry-after: {retry_after:g}\r\n"
    return json_response(status, {**payload, "request_id": "req_fake"}, headers)


def _anthropic_part(block: Any) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise ValueError("a content block must be an object")
    if block.get("type") == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if block.get("type") == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            base64.b64decode(source["data"], validate=True)
            url = f"data:{source['media_type']};base64,{source['data']}"
        elif source.get("type") == "url":
            url = source["url"]
        else:
            raise ValueError(f"unknown image source type {source.get('type')!r}")
        return {"type": "image_url", "image_url": {"url": url}}
    raise ValueError(f"unsupported content block type {block.get('type')!r}")


def anthropic_chat_body(params: Any) -> dict[str, Any]:
    """A Messages API request as a chat completions body; ValueError naming what is wrong.

    Args:
        params: the Messages API request body.

    Returns:
        The chat body.
    """
    if not isinstance(params, dict):
        raise ValueError("the request body must be an object")
    for name in ("model", "max_tokens", "messages"):
        if name not in params:
            raise ValueError(f"{name}: Field required")
    if not isinstance(params["messages"], list) or not params["messages"]:
        raise ValueError("messages: at least one message is required")
    system = params.get("system")
    if isinstance(system, list):
        system = "".join(part.get("text", "") for part in system if isinstance(part, dict))
    messages = [{"role": "system", "content": system}] if system else []
    for message in params["messages"]:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise ValueError("messages: each message needs role user or assistant")
        content = message.get("content")
        if not isinstance(content, str):
            content = [_anthropic_part(block) for block in content or []]
        messages.append({"role": message["role"], "content": content})
    body: dict[str, Any] = {
        "model": params["model"],
        "messages": messages,
        "max_tokens": params["max_tokens"],
    }
    _check_thinking(params)
    output_format = (params.get("output_config") or {}).get("format")
    if isinstance(output_format, dict) and output_format.get("type") == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": output_format.get("schema") or {}},
        }
    if params.get("stop_sequences"):
        body["stop"] = params["stop_sequences"]
    thinking = params.get("thinking") or {}
    if thinking.get("type") == "enabled":
        body[THINKING_BUDGET] = thinking["budget_tokens"]
    effort = (params.get("output_config") or {}).get("effort")
    if effort is not None:
        body["reasoning_effort"] = effort
    return body


def _check_thinking(params: dict[str, Any]) -> None:
    """Extended thinking's rules as the API states them: a budget of at least 1,024 tokens,
    below `max_tokens` (which holds the thinking and the answer); an effort it knows."""
    thinking = params.get("thinking")
    if thinking is not None:
        if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled"):
            raise ValueError("thinking.type: Input should be 'enabled' or 'disabled'")
        budget = thinking.get("budget_tokens")
        if thinking["type"] == "enabled":
            if not isinstance(budget, int) or budget < ANTHROPIC_MIN_THINKING:
                raise ValueError(
                    f"thinking.budget_tokens: Input should be >= {ANTHROPIC_MIN_THINKING}"
                )
            if budget >= params["max_tokens"]:
                raise ValueError("`max_tokens` must be greater than `thinking.budget_tokens`")
    effort = (params.get("output_config") or {}).get("effort")
    if effort is not None and effort not in ANTHROPIC_EFFORTS:
        raise ValueError(f"output_config.effort: Input should be one of {ANTHROPIC_EFFORTS}")


def anthropic_message(
    call_index: int, body: dict[str, Any], reply: Reply, count_tokens: Callable[[str], int]
) -> dict[str, Any]:
    """The Message object answering `body` (a chat body) with `reply`: its `reasoning` as a
    thinking block before the answer's text block (none when the reply has no content, as
    a reply cut off while thinking), billed inside `output_tokens`.

    Args:
        call_index: the call's number (its id).
        body: the chat body answered.
        reply: the scripted reply.
        count_tokens: counts a text's tokens.

    Returns:
        The Message object.
    """
    content: list[dict[str, Any]] = []
    thinking = count_tokens(reply.reasoning) if reply.reasoning else 0
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake"})
    if reply.content is not None or not reply.reasoning:
        content.append({"type": "text", "text": reply.content or ""})
    usage: dict[str, Any] = {
        "input_tokens": _token_count(count_tokens, body["messages"]),
        "output_tokens": count_tokens(reply.content or "") + thinking,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if thinking:
        usage["output_tokens_details"] = {"thinking_tokens": thinking}
    return {
        "id": f"msg_fake_{call_index}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model") or DEFAULT_MODEL_ID,
        "content": content,
        "stop_reason": "max_tokens" if reply.finish_reason == "length" else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


# -- Gemini ------------------------------------------------------------------------------
def google_error(status: int, message: str, retry_after: float | None = None) -> Response:
    """A Google API error body; a 429 carries `RetryInfo` when `retry_after` is given.

    Args:
        status: the HTTP status.
        message: the error's message.
        retry_after: seconds to retry after (None: none).

    Returns:
        The response.
    """
    details: list[dict[str, Any]] = []
    if status == 429:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [{"quotaMetric": "generate_content_requests", "quotaValue": "60"}],
            }
        )
        if retry_after is not None:
            details.append(
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{retry_after:g}s",
                }
            )
    error = {
        "code": status,
        "message": message,
        "status": _GOOGLE_STATUS.get(status, "UNKNOWN"),
        "details": details,
    }
    return json_response(status, {"error": error})


def google_bad_key() -> Response:
    """What the Gemini API answers a wrong key: 400 INVALID_ARGUMENT, reason API_KEY_INVALID."""
    error = {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
            }
        ],
    }
    return json_response(400, {"error": error})


def _gemini_parts(parts: Any) -> str | list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    for part in parts or []:
        if not isinstance(part, dict):
            raise ValueError("a part must be an object")
        inline = part.get("inlineData") or part.get("inline_data")
        if "text" in part:
            converted.append({"type": "text", "text": str(part["text"])})
        elif isinstance(inline, dict):
            mime = inline.get("mimeType") or inline.get("mime_type")
            # Google takes standard and URL-safe base64 alike (the SDK sends the latter).
            raw = base64.b64decode(str(inline["data"]).translate(_URLSAFE), validate=True)
            data = base64.b64encode(raw).decode("ascii")
            if str(mime).startswith("audio/"):  # as chat completions carry a clip
                audio = {"data": data, "format": _AUDIO_FORMATS.get(mime, mime)}
                converted.append({"type": "input_audio", "input_audio": audio})
            else:
                url = f"data:{mime};base64,{data}"
                converted.append({"type": "image_url", "image_url": {"url": url}})
        else:
            raise ValueError(f"unsupported part {sorted(part)}")
    if all(part["type"] == "text" for part in converted):
        return "".join(part["text"] for part in converted)
    return converted


def gemini_chat_body(model: str, request: Any) -> dict[str, Any]:
    """A generateContent request as a chat completions body; ValueError naming what is wrong.

    Args:
        model: the model named in the path.
        request: the generateContent request body.

    Returns:
        The chat body.
    """
    if not isinstance(request, dict) or not isinstance(request.get("contents"), list):
        raise ValueError("contents: required")
    if not request["contents"]:
        raise ValueError("contents is not specified")
    messages = []
    system = request.get("systemInstruction") or request.get("system_instruction")
    if isinstance(system, dict):
        messages.append({"role": "system", "content": _gemini_parts(system.get("parts"))})
    for content in request["contents"]:
        role = content.get("role", "user") if isinstance(content, dict) else None
        if role not in ("user", "model"):
            raise ValueError("contents: role must be user or model")
        messages.append(
            {
                "role": "assistant" if role == "model" else "user",
                "content": _gemini_parts(content.get("parts")),
            }
        )
    config = request.get("generationConfig") or {}
    _check_thinking_config(config.get("thinkingConfig"))
    body: dict[str, Any] = {"model": model, "messages": messages}
    # The cap holds the thoughts and the answer alike, as a responder's max_tokens.
    if "maxOutputTokens" in config:
        body["max_tokens"] = config["maxOutputTokens"]
    if "temperature" in config:
        body["temperature"] = config["temperature"]
    thinking = config.get("thinkingConfig") or {}
    if _field(thinking, "thinkingBudget") is not None:
        body[THINKING_BUDGET] = _field(thinking, "thinkingBudget")
    if _field(thinking, "thinkingLevel") is not None:
        body["reasoning_effort"] = _field(thinking, "thinkingLevel").lower()
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if isinstance(schema, dict):
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema},
        }
    return body


def _field(message: dict[str, Any], name: str) -> Any:
    """A field by its JSON name or its proto name, as Google's JSON parser takes either (the
    SDK sends `thinkingConfig`'s fields as `thinking_budget`, `thinking_level`)."""
    proto_name = re.sub(r"([A-Z])", lambda match: "_" + match[1].lower(), name)
    return message.get(name, message.get(proto_name))


def _check_thinking_config(thinking: Any) -> None:
    """A thinking budget (-1: dynamic, 0: off) or a thinking level, never both."""
    if thinking is None:
        return
    if not isinstance(thinking, dict):
        raise ValueError("generation_config.thinking_config: must be an object")
    budget, level = _field(thinking, "thinkingBudget"), _field(thinking, "thinkingLevel")
    if budget is not None and level is not None:
        raise ValueError("thinking_budget and thinking_level are not supported together.")
    if budget is not None and (not isinstance(budget, int) or budget < -1):
        raise ValueError(f"thinking_budget: invalid value {budget!r}")
    if level is not None and level not in GEMINI_THINKING_LEVELS:
        raise ValueError(f"thinking_level: invalid value {level!r}")


def gemini_response(
    call_index: int, body: dict[str, Any], reply: Reply, count_tokens: Callable[[str], int]
) -> dict[str, Any]:
    """The GenerateContentResponse answering `body` (a chat body) with `reply`: its
    `reasoning` billed as `thoughtsTokenCount` (thoughts themselves are not sent back:
    nobody asks for `include_thoughts`); a reply without content has no parts.

    Args:
        call_index: the call's number (its id).
        body: the chat body answered.
        reply: the scripted reply.
        count_tokens: counts a text's tokens.

    Returns:
        The GenerateContentResponse.
    """
    prompt = _token_count(count_tokens, body["messages"])
    output = count_tokens(reply.content or "")
    thoughts = count_tokens(reply.reasoning) if reply.reasoning else 0
    content: dict[str, Any] = {"role": "model"}
    if reply.content is not None or not reply.reasoning:
        content["parts"] = [{"text": reply.content or ""}]
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output + thoughts,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    return {
        "candidates": [
            {
                "content": content,
                "finishReason": "MAX_TOKENS" if reply.finish_reason == "length" else "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": usage,
        "modelVersion": body.get("model") or DEFAULT_MODEL_ID,
        "responseId": f"fake-{call_index}",
    }


def _gemini_model(name: str) -> dict[str, Any]:
    return {
        "name": f"models/{name}",
        "displayName": name,
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "countTokens", "batchGenerateContent"],
    }


def _anthropic_batch_problem(requests: Any) -> str:
    """What is wrong with a Message Batches request list ("" when nothing is)."""
    if not isinstance(requests, list) or not requests:
        return "requests: at least one request is required"
    if len(requests) > ANTHROPIC_BATCH_MAX_REQUESTS:
        return f"requests: a batch may hold at most {ANTHROPIC_BATCH_MAX_REQUESTS} requests"
    seen: set[str] = set()
    for number, request in enumerate(requests):
        custom_id = request.get("custom_id") if isinstance(request, dict) else None
        if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
            return f"requests.{number}.custom_id: must match ^[a-zA-Z0-9_-]{{1,64}}$"
        if custom_id in seen:
            return f"requests.{number}.custom_id: duplicate {custom_id}"
        seen.add(custom_id)
        try:
            anthropic_chat_body(request.get("params"))
        except (ValueError, KeyError, TypeError) as error:
            return f"requests.{number}.params: {error}"
    return ""


def _is_gemini_batch_call(path: str) -> bool:
    return path.endswith(":batchGenerateContent") or path.startswith("/v1beta/batches/")


class ProviderAPIs:
    """The Anthropic and Gemini routes of the fake server.

    `answer_chat` answers one online call (counted and delayed as a chat call); batches
    share the server's `BatchAPI` for their script, counts and the ids polled."""

    def __init__(
        self,
        answer_chat: ChatAnswer,
        batch_api: BatchAPI,
        count_tokens: Callable[[str], int],
        api_key: Callable[[], str | None],
        rate_limiter: Callable[[], ServerRateLimiter | None] = lambda: None,
    ) -> None:
        """Keep what the routes share with the server.

        Args:
            answer_chat: answers one online call.
            batch_api: the server's Batch API.
            count_tokens: counts a text's tokens.
            api_key: gives the one key accepted (None: any).
            rate_limiter: gives the server's per-minute limits (None: none).
        """
        self._answer_chat = answer_chat
        self._rate_limiter = rate_limiter
        self._batch_api = batch_api
        self._count_tokens = count_tokens
        self._api_key = api_key
        self._anthropic_batches: dict[str, dict[str, Any]] = {}
        self._gemini_batches: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._results: dict[str, bytes] = {}
        self._cached_prompts: set[str] = set()

    @staticmethod
    def serves(path: str) -> bool:
        """Whether `path` is one of these routes (Anthropic's or Gemini's).

        Args:
            path: the request path.

        Returns:
            True for these routes.
        """
        return path.startswith(("/v1/messages", "/v1beta/"))

    @staticmethod
    def is_chat(path: str) -> bool:
        """Whether `path` is an online call (counted in flight like a chat request).

        Args:
            path: the request path.

        Returns:
            True for an online call.
        """
        return path == "/v1/messages" or path.endswith(":generateContent")

    async def handle(self, head: RequestHead, path: str, body: bytes) -> Response:
        """Answer one Anthropic or Gemini request (a wrong key refused as that API refuses it).

        Args:
            head: the request's head.
            path: its path.
            body: its body.

        Returns:
            The response.
        """
        if path.startswith("/v1beta/"):
            query = parse_qs(head.target.partition("?")[2])
            key = head.api_key or (query.get("key") or [None])[0]
            wanted = self._api_key()
            if wanted is not None and key != wanted:
                return google_bad_key()
            if _is_gemini_batch_call(path) and self._refuses_as_busy():
                return google_error(429, "Resource exhausted", BUSY_RETRY_AFTER_S)
            return await self._gemini(head.method, path, body)
        wanted = self._api_key()
        if wanted is not None and head.api_key != wanted:
            return anthropic_error(401, "invalid x-api-key")
        return await self._anthropic(head, path, body)

    def _refuses_as_busy(self) -> bool:
        with self._batch_api.lock:
            return self._batch_api.refuses_as_busy()

    # -- Anthropic ------------------------------------------------------------------------
    async def _anthropic(self, head: RequestHead, path: str, raw: bytes) -> Response:
        route = (head.method, path)
        if route == ("GET", "/v1/models"):
            model = {
                "type": "model",
                "id": DEFAULT_MODEL_ID,
                "display_name": DEFAULT_MODEL_ID,
                "created_at": _iso(0),
            }
            page = {"first_id": model["id"], "last_id": model["id"], "has_more": False}
            return json_response(200, {"data": [model], **page})
        if route == ("POST", "/v1/messages"):
            return await self._anthropic_message(head, path, raw)
        match = _ANTHROPIC_BATCH_ROUTE.fullmatch(path)
        if match is None:
            return anthropic_error(404, f"no route for {head.method} {path}")
        with self._batch_api.lock:
            if self._batch_api.refuses_as_busy():
                return anthropic_error(529, "Overloaded", retry_after=BUSY_RETRY_AFTER_S)
            return self._anthropic_batch(head, *match.groups(), raw)

    async def _anthropic_message(self, head: RequestHead, path: str, raw: bytes) -> Response:
        params = _json_body(raw)
        version = head.headers.get("anthropic-version", "")
        refused = [name for name in _SAMPLING if name in (params or {})]
        if version >= _NO_SAMPLING_VERSION and refused:
            return anthropic_error(400, f"{refused[0]}: Extra inputs are not permitted")
        try:
            body = anthropic_chat_body(params)
        except (ValueError, KeyError, TypeError) as error:
            return anthropic_error(400, str(error))
        limiter = self._rate_limiter()
        estimate = self._estimate(body)
        wait_s = limiter.admit(estimate) if limiter is not None else None
        if wait_s is not None:
            limits = limiter.headers("anthropic")
            return anthropic_error(
                429, "Number of requests has exceeded your rate limit", None, wait_s, limits
            )
        index, reply = await self._answer_chat(body, path)
        if reply.status != 200:
            message = reply.error_message or f"simulated error {reply.status}"
            return anthropic_error(reply.status, message, reply.error_type, reply.retry_after)
        if reply.raw_body is not None:
            return Response(200, reply.raw_body.encode())
        message = anthropic_message(index, body, reply, self._count_tokens)
        if (params or {}).get("cache_control"):
            self._cache_prompt(body, message["usage"])
        limits = ""
        if limiter is not None:
            usage = message["usage"]
            limiter.correct(estimate, usage["input_tokens"] + usage["output_tokens"])
            limits = limiter.headers("anthropic")
        return json_response(200, message, limits)

    def _estimate(self, body: dict[str, Any]) -> int:
        """What a call counts against a token limit before its reply: prompt and cap."""
        return _token_count(self._count_tokens, body["messages"]) + int(body.get("max_tokens") or 0)

    def _cache_prompt(self, body: dict[str, Any], usage: dict[str, int]) -> None:
        """The prompt cache, as far as a judge sees it: the system prompt is written on its
        first call and read on the later ones, billed apart from `input_tokens`."""
        system = [m for m in body["messages"] if m["role"] == "system"]
        cached = _token_count(self._count_tokens, system)
        if not cached:
            return
        key = json.dumps(system, sort_keys=True)
        seen = key in self._cached_prompts
        self._cached_prompts.add(key)
        usage["input_tokens"] -= cached
        usage["cache_read_input_tokens" if seen else "cache_creation_input_tokens"] = cached

    def _anthropic_batch(
        self, head: RequestHead, batch_id: str | None, action: str | None, raw: bytes
    ) -> Response:
        if (head.method, batch_id) == ("POST", None):
            return self._anthropic_create(raw, head)
        batch = self._anthropic_batches.get(batch_id or "")
        if batch is None:
            return anthropic_error(404, f"batch {batch_id} not found")
        if (head.method, action) == ("GET", None):
            self._batch_api.retrieved.append(batch_id)
            return json_response(200, self._anthropic_advance(batch_id))
        if (head.method, action) == ("GET", "results"):
            results = self._results.get(batch_id)
            found = results is not None
            return Response(200, results) if found else anthropic_error(400, "still processing")
        if (head.method, action) != ("POST", "cancel"):
            return anthropic_error(405, f"{head.method} is not allowed on batch {action}")
        if batch["processing_status"] == "in_progress":
            batch["cancel_initiated_at"] = _iso(time.time())
            self._anthropic_finish(batch_id, cancelled=True)
        return json_response(200, self._public(batch))

    def _anthropic_create(self, raw: bytes, head: RequestHead) -> Response:
        if len(raw) > ANTHROPIC_BATCH_MAX_BYTES:
            return anthropic_error(413, "request_too_large: a batch may hold at most 256 MB")
        requests = (_json_body(raw) or {}).get("requests")
        problem = _anthropic_batch_problem(requests)
        if problem:
            return anthropic_error(400, problem)
        batch_id = f"msgbatch_fake{len(self._anthropic_batches) + 1:04d}"
        now = time.time()
        self._pending[batch_id] = requests
        self._anthropic_batches[batch_id] = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(requests),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": _iso(now),
            "expires_at": _iso(now + 86_400),
            "ended_at": None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
            "_created": now,
            "_host": head.headers.get("host", "127.0.0.1"),
        }
        self._batch_api.counts["batches_created"] += 1
        return json_response(200, self._public(self._anthropic_batches[batch_id]))

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in batch.items() if not key.startswith("_")}

    def _anthropic_advance(self, batch_id: str) -> dict[str, Any]:
        batch = self._anthropic_batches[batch_id]
        script = self._batch_api.script
        due = time.time() >= batch["_created"] + script.delay_s
        if batch["processing_status"] == "in_progress" and due:
            self._anthropic_finish(batch_id, cancelled=False)
        return self._public(batch)

    def _anthropic_finish(self, batch_id: str, cancelled: bool) -> None:
        batch = self._anthropic_batches[batch_id]
        requests = self._pending.pop(batch_id)
        script = self._batch_api.script
        answered = len(requests) if script.expire_after is None else script.expire_after
        counts = dict.fromkeys(("succeeded", "errored", "canceled", "expired"), 0)
        lines = []
        for index, request in enumerate(requests):
            if cancelled or index >= answered:
                kind = "canceled" if cancelled else "expired"
                result: dict[str, Any] = {"type": kind}
            elif script.fail is not None:
                kind = "errored"
                error = {"type": "api_error", "message": script.fail}
                result = {"type": kind, "error": {"type": "error", "error": error}}
            else:
                result = self._anthropic_line(request["params"])
                kind = result["type"]
            counts[kind] += 1
            lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}))
        self._results[batch_id] = ("\n".join(lines) + "\n").encode()
        batch["processing_status"] = "ended"
        batch["ended_at"] = _iso(time.time())
        batch["request_counts"] = {"processing": 0, **counts}
        batch["results_url"] = f"http://{batch['_host']}/v1/messages/batches/{batch_id}/results"

    def _anthropic_line(self, params: dict[str, Any]) -> dict[str, Any]:
        body = anthropic_chat_body(params)
        index = self._batch_api.counts["batch_lines_answered"]
        self._batch_api.counts["batch_lines_answered"] += 1
        reply = self._batch_api.answer_chat(body, index, "/v1/messages")
        if reply.status != 200:
            kind = reply.error_type or _ANTHROPIC_ERRORS.get(reply.status, "api_error")
            error = {"type": kind, "message": reply.error_message or "simulated error"}
            return {"type": "errored", "error": {"type": "error", "error": error}}
        message = anthropic_message(index, body, reply, self._count_tokens)
        return {"type": "succeeded", "message": message}

    # -- Gemini ---------------------------------------------------------------------------
    async def _gemini(self, method: str, path: str, raw: bytes) -> Response:
        if (method, path) == ("GET", "/v1beta/models"):
            return json_response(200, {"models": [_gemini_model(DEFAULT_MODEL_ID)]})
        match = _GEMINI_MODEL_ROUTE.fullmatch(path)
        if match is not None:
            model, action = match.groups()
            if (method, action) == ("GET", None):
                return json_response(200, _gemini_model(model))
            if (method, action) == ("POST", "generateContent"):
                return await self._generate(model, raw)
            if (method, action) == ("POST", "batchGenerateContent"):
                with self._batch_api.lock:
                    return self._gemini_create(model, raw)
        match = _GEMINI_BATCH_ROUTE.fullmatch(path)
        if match is not None:
            with self._batch_api.lock:
                return self._gemini_batch(method, *match.groups())
        return google_error(404, f"no route for {method} {path}")

    def _gemini_batch(self, method: str, batch_id: str, action: str | None) -> Response:
        batch = self._gemini_batches.get(batch_id)
        if batch is None:
            return google_error(404, f"batches/{batch_id} not found")
        if (method, action) == ("GET", None):
            self._batch_api.retrieved.append(f"batches/{batch_id}")
            return json_response(200, self._gemini_advance(batch_id))
        if (method, action) == ("POST", "cancel"):
            if not batch.get("done"):
                self._pending.pop(batch_id, None)
                batch["metadata"]["state"] = "BATCH_STATE_CANCELLED"
                batch["done"] = True
            return json_response(200, {})
        return google_error(405, f"{method} is not allowed on batches/{batch_id}")

    async def _generate(self, model: str, raw: bytes) -> Response:
        try:
            body = gemini_chat_body(model, _json_body(raw))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            return google_error(400, f"Invalid JSON payload received. {error}")
        limiter = self._rate_limiter()
        estimate = self._estimate(body)
        wait_s = limiter.admit(estimate) if limiter is not None else None
        if wait_s is not None:  # Gemini sends no rate-limit headers: the wait is in RetryInfo
            return google_error(429, "Resource has been exhausted (e.g. check quota).", wait_s)
        index, reply = await self._answer_chat(body, f"/v1beta/models/{model}:generateContent")
        if reply.status != 200:
            message = reply.error_message or f"simulated error {reply.status}"
            return google_error(reply.status, message, reply.retry_after)
        if reply.raw_body is not None:
            return Response(200, reply.raw_body.encode())
        response = gemini_response(index, body, reply, self._count_tokens)
        self._implicit_cache(body, response["usageMetadata"])
        if limiter is not None:
            limiter.correct(estimate, response["usageMetadata"]["totalTokenCount"])
        return json_response(200, response)

    def _implicit_cache(self, body: dict[str, Any], usage: dict[str, int]) -> None:
        """Gemini's implicit cache, as far as a judge sees it: a system instruction sent
        before is served from the cache, counted in `promptTokenCount` and again in
        `cachedContentTokenCount` (billed at the cache rate)."""
        system = [m for m in body["messages"] if m["role"] == "system"]
        cached = _token_count(self._count_tokens, system)
        key = "gemini:" + json.dumps(system, sort_keys=True)
        if cached and key in self._cached_prompts:
            usage["cachedContentTokenCount"] = cached
        self._cached_prompts.add(key)

    def _gemini_create(self, model: str, raw: bytes) -> Response:
        if len(raw) > GEMINI_INLINE_MAX_BYTES:
            return google_error(
                400, f"Request payload size exceeds the limit: {GEMINI_INLINE_MAX_BYTES} bytes."
            )
        body = _json_body(raw) or {}
        batch = body.get("batch") or {}
        requests = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")
        if not isinstance(requests, list) or not requests:
            return google_error(400, "batch.input_config.requests: at least one request")
        for number, request in enumerate(requests):
            try:
                gemini_chat_body(model, (request or {}).get("request"))
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                return google_error(400, f"requests[{number}]: {error}")
        batch_id = f"fake{len(self._gemini_batches) + 1:04d}"
        now = time.time()
        self._pending[batch_id] = requests
        self._gemini_batches[batch_id] = {
            "name": f"batches/{batch_id}",
            "metadata": {
                "@type": f"{_GEMINI_TYPES}.GenerateContentBatch",
                "model": f"models/{model}",
                "displayName": batch.get("displayName", ""),
                "state": "BATCH_STATE_PENDING",
                "createTime": _iso(now),
                "updateTime": _iso(now),
                "batchStats": {
                    "requestCount": str(len(requests)),
                    "pendingRequestCount": str(len(requests)),
                },
            },
            "_created": now,
            "_model": model,
        }
        self._batch_api.counts["batches_created"] += 1
        return json_response(200, self._public(self._gemini_batches[batch_id]))

    def _gemini_advance(self, batch_id: str) -> dict[str, Any]:
        batch = self._gemini_batches[batch_id]
        script = self._batch_api.script
        due = time.time() >= batch["_created"] + script.delay_s
        if batch_id in self._pending and due:
            requests = self._pending.pop(batch_id)
            metadata = batch["metadata"]
            if script.fail is not None:
                metadata["state"] = "BATCH_STATE_FAILED"
                batch["error"] = {"code": 13, "message": script.fail}
            else:
                answered = (
                    requests if script.expire_after is None else requests[: script.expire_after]
                )
                responses = [self._gemini_line(batch["_model"], request) for request in answered]
                output = {"inlinedResponses": {"inlinedResponses": responses}}
                metadata["output"] = output
                metadata["state"] = (
                    "BATCH_STATE_EXPIRED"
                    if len(answered) < len(requests)
                    else "BATCH_STATE_SUCCEEDED"
                )
                failed = sum(1 for response in responses if "error" in response)
                metadata["batchStats"] = {
                    "requestCount": str(len(requests)),
                    "successfulRequestCount": str(len(responses) - failed),
                    "failedRequestCount": str(failed),
                }
                batch["response"] = {
                    "@type": f"{_GEMINI_TYPES}.GenerateContentBatchOutput",
                    **output,
                }
            metadata["endTime"] = metadata["updateTime"] = _iso(time.time())
            batch["done"] = True
        return self._public(batch)

    def _gemini_line(self, model: str, entry: dict[str, Any]) -> dict[str, Any]:
        body = gemini_chat_body(model, entry["request"])
        index = self._batch_api.counts["batch_lines_answered"]
        self._batch_api.counts["batch_lines_answered"] += 1
        reply = self._batch_api.answer_chat(body, index, f"/v1beta/models/{model}:generateContent")
        line: dict[str, Any] = {}
        if "metadata" in entry:
            line["metadata"] = entry["metadata"]
        if reply.status != 200:
            status = _GOOGLE_STATUS.get(reply.status, "UNKNOWN")
            line["error"] = {"code": reply.status, "message": reply.error_message or status}
        else:
            line["response"] = gemini_response(index, body, reply, self._count_tokens)
        return line
