"""A local OpenAI-compatible chat server for tests and benchmarks.

The server speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies) for the
`openai` client, on nothing but `asyncio.start_server`, so that it is never the bottleneck
of a benchmark. What it answers is decided by a *responder*: a callable
`(body: dict, ctx: RequestContext) -> str | Reply`. Built-in responders echo the prompt or
produce JSON that validates against the request's `response_format` schema; combinators
script answers, inject failures and play back sequences.

Two ways to run it:

* in-process, for tests: ``with FakeLLMServer(responder=echo_responder) as server:`` and
  point the client at ``server.base_url``;
* as a child process, for benchmarks, so it does not share the client's GIL:
  ``with serve_in_subprocess(latency_s=0.2) as base_url: ...`` or from a shell
  ``python -m llm_feedback.testing.server --latency 0.2 --port 0 --responder schema``,
  which prints ``LISTENING http://127.0.0.1:PORT/v1`` and serves until SIGTERM/SIGINT.

The Files and Batches routes of the OpenAI Batch API are served too (``/v1/files``,
``/v1/files/{id}/content``, ``/v1/batches``, ``/v1/batches/{id}``, ``/v1/batches/{id}/cancel``
and Azure's ``/openai/...`` forms): each line of a batch is answered by the same responder,
so its replies, failures and malformed output are scripted the same way; a `BatchScript`
sets how long a batch takes and whether it expires part-way (see `_BatchAPI`).

Control routes: ``GET /health``, ``GET /_stats`` (``{"requests", "chat_requests",
"connections"}``; the control routes themselves are not counted) and ``POST /_reset``
(zero the counters, forget recorded bodies and the per-request attempt counts).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import importlib
import json
import math
import os
import queue
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, NamedTuple, TypeAlias
from urllib.parse import urlsplit

DEFAULT_MODEL_ID = "fake-model"
_LISTENING_PREFIX = "LISTENING "


# --------------------------------------------------------------------------------------
# Replies and responders
# --------------------------------------------------------------------------------------


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
    """

    content: str | None = None
    status: int = 200
    delay_s: float | None = None
    retry_after: float | None = None
    finish_reason: str = "stop"
    raw_body: str | None = None
    error_message: str | None = None


Responder: TypeAlias = Callable[[dict[str, Any], RequestContext], str | Reply]
Matcher: TypeAlias = str | Callable[[dict[str, Any]], bool]
Answer: TypeAlias = str | Reply | Responder


def _message_text(message: dict[str, Any]) -> str:
    """The text of a message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if isinstance(message, dict) and message.get("role") == "user":
            return _message_text(message)
    return ""


def echo_responder(body: dict[str, Any], ctx: RequestContext) -> str:
    """Answers ``"Echo: <first 40 characters of the last user message>"``."""
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
    return json.dumps(_SchemaInstanceMaker(schema, rng).make(schema), ensure_ascii=False)


class _SchemaInstanceMaker:
    """Builds one JSON value that validates against a JSON Schema (the subset LLM APIs use).

    Branches (anyOf/oneOf, type lists) prefer non-null alternatives so the document
    carries usable values; past `_MAX_DEPTH` it takes the shortest way out of recursive
    schemas (null where allowed, minimal arrays). `pattern`, `multipleOf` and
    `uniqueItems` are not honoured.
    """

    _MAX_DEPTH = 12
    _WORDS = ("alpha", "bravo", "delta", "kilo", "lima", "oscar", "sierra", "tango")

    def __init__(self, root: dict[str, Any], rng: random.Random) -> None:
        self._root = root
        self._rng = rng

    def make(self, schema: dict[str, Any], depth: int = 0) -> Any:
        schema = self._resolve(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._rng.choice(schema["enum"])
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                branch = self._pick(schema[combinator], _is_null_schema, depth)
                merged = {k: v for k, v in schema.items() if k != combinator}
                return self.make({**merged, **self._resolve(branch)}, depth + 1)
        if "allOf" in schema:
            return self.make(self._merge_all_of(schema), depth + 1)
        schema_type = schema.get("type", self._implied_type(schema))
        if isinstance(schema_type, list):
            schema_type = self._pick(schema_type, lambda name: name == "null", depth)
        maker = getattr(self, f"_make_{schema_type}", None)
        if maker is None:
            raise ValueError(f"unsupported JSON Schema type {schema_type!r}")
        return maker(schema, depth)

    def _pick(self, options: list[Any], is_null: Callable[[Any], bool], depth: int) -> Any:
        nulls = [option for option in options if is_null(option)]
        non_nulls = [option for option in options if not is_null(option)]
        if nulls and (depth >= self._MAX_DEPTH or not non_nulls):
            return nulls[0]
        return self._rng.choice(non_nulls)

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Follows local ``$ref``s (``#/$defs/Name``), keeping sibling keywords."""
        while "$ref" in schema:
            reference = schema["$ref"]
            if not reference.startswith("#"):
                raise ValueError(f"only local $ref is supported, got {reference!r}")
            target: Any = self._root
            for part in filter(None, reference[1:].split("/")):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings}
        return schema

    def _merge_all_of(self, schema: dict[str, Any]) -> dict[str, Any]:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for unresolved_part in schema["allOf"]:
            part = self._resolve(unresolved_part)
            properties = {**merged.get("properties", {}), **part.get("properties", {})}
            required = [*merged.get("required", []), *part.get("required", [])]
            merged = {**merged, **part, "properties": properties, "required": required}
        return merged

    @staticmethod
    def _implied_type(schema: dict[str, Any]) -> str:
        if "properties" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def _make_object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        # Optional properties are filled too, except where recursion must end.
        return {
            name: self.make(subschema, depth + 1)
            for name, subschema in properties.items()
            if name in required or depth < self._MAX_DEPTH
        }

    def _make_array(self, schema: dict[str, Any], depth: int) -> list[Any]:
        prefix = [self.make(item, depth + 1) for item in schema.get("prefixItems", [])]
        min_items = max(schema.get("minItems", 0), len(prefix))
        max_items = schema.get("maxItems", min_items + 3)
        if depth >= self._MAX_DEPTH or schema.get("items") is False:
            length = min_items
        else:
            length = self._rng.randint(min(max(min_items, 1), max_items), max_items)
        item_schema = schema.get("items", {})
        return prefix + [self.make(item_schema, depth + 1) for _ in range(length - len(prefix))]

    def _make_string(self, schema: dict[str, Any], depth: int) -> str:
        formatted = self._formatted_string(schema.get("format"))
        if formatted is not None:
            return formatted
        text = f"{self._rng.choice(self._WORDS)}-{self._rng.randrange(16**6):06x}"
        min_length = schema.get("minLength", 0)
        if len(text) < min_length:
            text += "x" * (min_length - len(text))
        return text[: schema.get("maxLength", len(text))]

    def _formatted_string(self, string_format: str | None) -> str | None:
        day = f"2024-{self._rng.randint(1, 12):02d}-{self._rng.randint(1, 28):02d}"
        clock = f"{self._rng.randint(0, 23):02d}:{self._rng.randint(0, 59):02d}:00"
        token = f"{self._rng.getrandbits(128):032x}"
        return {
            "date": day,
            "time": clock,
            "date-time": f"{day}T{clock}Z",
            "email": f"user{token[:6]}@example.com",
            "uri": f"https://example.com/{token[:8]}",
            "uuid": f"{token[:8]}-{token[8:12]}-4{token[13:16]}-a{token[17:20]}-{token[20:]}",
        }.get(string_format or "")

    @staticmethod
    def _integer_bounds(schema: dict[str, Any]) -> tuple[int, int]:
        low: int | None = None
        high: int | None = None
        if "minimum" in schema:
            low = math.ceil(schema["minimum"])
        if "exclusiveMinimum" in schema:
            low = math.floor(schema["exclusiveMinimum"]) + 1
        if "maximum" in schema:
            high = math.floor(schema["maximum"])
        if "exclusiveMaximum" in schema:
            high = math.ceil(schema["exclusiveMaximum"]) - 1
        if low is None:
            low = 0 if high is None else high - 100
        return low, low + 100 if high is None else high

    def _make_integer(self, schema: dict[str, Any], depth: int) -> int:
        low, high = self._integer_bounds(schema)
        return self._rng.randint(low, high)

    def _make_number(self, schema: dict[str, Any], depth: int) -> float:
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        low = float(low) if low is not None else (float(high) - 100 if high is not None else 0.0)
        high = float(high) if high is not None else low + 100
        value = round(low + (high - low) * self._rng.random(), 3)
        # Rounding can land on or past an exclusive bound; the midpoint never does.
        if not low <= value <= high or value in (
            schema.get("exclusiveMinimum"),
            schema.get("exclusiveMaximum"),
        ):
            value = (low + high) / 2
        return value

    def _make_boolean(self, schema: dict[str, Any], depth: int) -> bool:
        return self._rng.random() < 0.5

    def _make_null(self, schema: dict[str, Any], depth: int) -> None:
        return None


def _is_null_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def scripted(
    rules: Sequence[tuple[Matcher, Answer]], default: Responder = echo_responder
) -> Responder:
    """The first rule that matches answers; `default` answers when none does.

    A rule's matcher is a substring looked for in every message's content, or a predicate
    on the request body; its answer is a string, a `Reply` or another responder.
    """

    def matches(matcher: Matcher, body: dict[str, Any]) -> bool:
        if isinstance(matcher, str):
            return any(matcher in _message_text(message) for message in body.get("messages", []))
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
    """Fails the first `failures` attempts of each distinct request, then asks `inner`."""

    def respond(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
        if ctx.key_call_index < failures:
            return Reply(
                status=status,
                retry_after=retry_after,
                error_message=f"simulated failure {ctx.key_call_index + 1} of {failures}",
            )
        return inner(body, ctx)

    return respond


def sequence(replies: Sequence[str | Reply]) -> Responder:
    """Answers successive calls with successive items; the last one repeats.

    The position is kept by the responder itself (not reset by `/_reset`), so that a
    sequence nested in `scripted` advances only on the calls routed to it.
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


def chaos_responder(body: dict[str, Any], ctx: RequestContext) -> str | Reply:
    """Faults at the shares of `CHAOS_FAULTS`: 429 with Retry-After, 500, a stall past the
    client's timeout, a reply no parser can read; otherwise `schema_responder`.

    Each attempt of a request draws anew (seeded by the messages and the attempt number),
    so retries and re-asks eventually get through, and a run can be repeated exactly.
    """
    draw = random.Random(f"{ctx.messages_key}:{ctx.key_call_index}").random()
    fault, edge = None, 0.0
    for name, share in CHAOS_FAULTS.items():
        edge += share
        if draw < edge:
            fault = name
            break
    if fault is None:
        return schema_responder(body, ctx)
    if fault == "rate_limited":
        return Reply(status=429, retry_after=0.05, error_message="chaos: slow down")
    if fault == "server_error":
        return Reply(status=500, error_message="chaos: internal error")
    if fault == "stall":
        return Reply(content="too late", delay_s=CHAOS_STALL_S)
    return Reply(content="Sorry, I will answer in my own way: it is fine, mostly.")


def resolve_responder(spec: str) -> Responder:
    """``echo``, ``schema``, ``chaos`` or ``package.module:callable`` to a responder."""
    builtin = {"echo": echo_responder, "schema": schema_responder, "chaos": chaos_responder}
    if spec in builtin:
        return builtin[spec]
    module_name, separator, attribute = spec.partition(":")
    if not separator or not module_name or not attribute:
        raise ValueError(f"responder must be echo, schema, chaos or module:callable, got {spec!r}")
    responder = getattr(importlib.import_module(module_name), attribute)
    if not callable(responder):
        raise ValueError(f"{spec!r} is not callable")
    return responder


# --------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------


class _Response(NamedTuple):
    status: int
    body: bytes
    extra_headers: str = ""  # already formatted "Name: value\r\n" lines


_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("timeout_error", "timeout"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}
_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_AZURE_PREFIX = "/openai/deployments/"
_CHAT_SUFFIX = "/chat/completions"
_CONTROL_PATHS = frozenset({"/_stats", "/_reset"})


@functools.cache
def _status_line(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"HTTP/1.1 {status} {phrase}\r\n"


def _json_response(status: int, payload: Any, extra_headers: str = "") -> _Response:
    return _Response(status, json.dumps(payload, separators=(",", ":")).encode(), extra_headers)


def _error_response(status: int, message: str, retry_after: float | None = None) -> _Response:
    error_type, code = _ERROR_TYPES.get(status, ("server_error", "server_error"))
    payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    headers = f"Retry-After: {retry_after:g}\r\n" if retry_after is not None else ""
    return _json_response(status, payload, headers)


def _word_count(text: str | None) -> int:
    return len(text.split()) if text else 0


def _messages_key(messages: list[Any]) -> str:
    encoded = json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class BatchScript:
    """How the fake Batch API treats every batch.

    `delay_s`: seconds from creation until a batch is finished (`in_progress` until then).
    `expire_after`: when set, a batch expires with only its first `expire_after` requests
    answered; the rest go to its error file with code `batch_expired`, as OpenAI reports them.
    `fail`: when set, every batch ends `failed` with this message and no output at all.
    """

    delay_s: float = 0.0
    expire_after: int | None = None
    fail: str | None = None


_BATCH_API_PREFIXES = ("/v1", "/openai", "")
_EXPIRED_ERROR = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}


def _batch_route(path: str) -> str | None:
    """`/files...` or `/batches...` from the OpenAI (`/v1`) or Azure (`/openai`) path."""
    for prefix in _BATCH_API_PREFIXES:
        rest = path[len(prefix) :] if path.startswith(prefix) else None
        if rest is not None and rest.startswith(("/files", "/batches")):
            return rest
    return None


def _multipart_fields(body: bytes) -> dict[str, bytes]:
    """The named parts of a multipart/form-data body; its first line is the boundary."""
    boundary = body.split(b"\r\n", 1)[0]
    fields: dict[str, bytes] = {}
    for part in body.split(boundary)[1:]:
        head, separator, content = part.partition(b"\r\n\r\n")
        marker = b'name="'
        if not separator or marker not in head:
            continue
        name = head.split(marker, 1)[1].split(b'"', 1)[0].decode()
        fields[name] = content.removesuffix(b"\r\n")
    return fields


class _BatchAPI:
    """Files and Batches: uploads kept in memory, each batch answered line by line by the
    app's responder once its `BatchScript.delay_s` has passed (on the first retrieve after)."""

    def __init__(self, app: _FakeLLMApp, script: BatchScript) -> None:
        self.script = script
        self._app = app
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict[str, Any]] = {}
        self._lines: dict[str, list[dict[str, Any]]] = {}
        self.counts = {"files_uploaded": 0, "batches_created": 0, "batch_lines_answered": 0}
        self.retrieved: list[str] = []  # batch ids, in the order they were polled
        self._lock = threading.Lock()  # tests read the counts from their own thread

    def handle(self, method: str, route: str, body: bytes) -> _Response:
        with self._lock:
            return self._handle(method, route, body)

    def _handle(self, method: str, route: str, body: bytes) -> _Response:
        parts = route.strip("/").split("/")
        if parts == ["files"] and method == "POST":
            return self._upload(body)
        if parts == ["batches"] and method == "POST":
            return self._create(body)
        if parts[2:] == ["content"] and parts[0] == "files" and method == "GET":
            content = self._files.get(parts[1])
            return _Response(200, content) if content else _error_response(404, "no such file")
        known = len(parts) >= 2 and parts[0] == "batches" and parts[1] in self._batches
        if known and len(parts) == 2 and method == "GET":
            self.retrieved.append(parts[1])
            return _json_response(200, self._advance(parts[1]))
        if known and parts[2:] == ["cancel"] and method == "POST":
            return _json_response(200, self._cancel(parts[1]))
        return _error_response(404, f"no route for {method} {route}")

    def _upload(self, body: bytes) -> _Response:
        fields = _multipart_fields(body)
        if fields.get("purpose") != b"batch" or "file" not in fields:
            return _error_response(400, "an upload needs purpose=batch and a file part")
        file_id = f"file-{len(self._files) + 1}"
        self._files[file_id] = fields["file"]
        self.counts["files_uploaded"] += 1
        return _json_response(
            200,
            {"id": file_id, "object": "file", "bytes": len(fields["file"]), "purpose": "batch"},
        )

    def _create(self, raw_body: bytes) -> _Response:
        try:
            body = json.loads(raw_body)
            content = self._files[body["input_file_id"]]
        except (ValueError, KeyError, TypeError):
            return _error_response(400, "input_file_id must name an uploaded file")
        endpoint = body.get("endpoint")
        if endpoint not in _CHAT_PATHS:
            return _error_response(400, f"unsupported endpoint {endpoint!r}")
        lines, seen = [], set()
        for number, text in enumerate(content.decode().splitlines(), start=1):
            try:
                line = json.loads(text)
                custom_id, chat = line["custom_id"], line["body"]
                valid = line["method"] == "POST" and line["url"] == endpoint
            except (ValueError, KeyError, TypeError):
                valid = False
            if not valid or custom_id in seen or not isinstance(chat.get("messages"), list):
                return _error_response(400, f"line {number} of the input file is not valid")
            seen.add(custom_id)
            lines.append(line)
        batch_id = f"batch_{len(self._batches) + 1}"
        self._lines[batch_id] = lines
        self._batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "input_file_id": body["input_file_id"],
            "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress",
            "created_at": time.time(),
            "output_file_id": None,
            "error_file_id": None,
            "errors": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        self.counts["batches_created"] += 1
        return _json_response(200, self._batches[batch_id])

    def _cancel(self, batch_id: str) -> dict[str, Any]:
        batch = self._batches[batch_id]
        if batch["status"] == "in_progress":
            batch["status"] = "cancelled"  # nothing answered: no output, no error file
        return batch

    def _advance(self, batch_id: str) -> dict[str, Any]:
        batch = self._batches[batch_id]
        if batch["status"] != "in_progress" or time.time() < batch["created_at"] + (
            self.script.delay_s
        ):
            return batch
        lines = self._lines.pop(batch_id)
        if self.script.fail is not None:
            batch["status"] = "failed"
            batch["errors"] = {"data": [{"code": "failed", "message": self.script.fail}]}
            return batch
        answered = len(lines) if self.script.expire_after is None else self.script.expire_after
        outputs, errors = [], []
        for index, line in enumerate(lines):
            record = {"id": f"{batch_id}_req_{index}", "custom_id": line["custom_id"]}
            if index >= answered:
                errors.append({**record, "response": None, "error": _EXPIRED_ERROR})
                continue
            response = self._answer(line["body"], batch["endpoint"])
            (outputs if response["status_code"] == 200 else errors).append(
                {**record, "response": response, "error": None}
            )
        batch["output_file_id"] = self._store(outputs)
        batch["error_file_id"] = self._store(errors)
        batch["status"] = "expired" if answered < len(lines) else "completed"
        batch["completed_at"] = time.time()
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(outputs),
            "failed": len(errors),
        }
        return batch

    def _answer(self, body: dict[str, Any], endpoint: str) -> dict[str, Any]:
        call_index = self.counts["batch_lines_answered"]
        self.counts["batch_lines_answered"] += 1
        reply = self._app.respond(body, call_index, endpoint)
        if reply.status != 200:
            error = _error_response(reply.status, reply.error_message or "simulated error")
            return {"status_code": reply.status, "body": json.loads(error.body)}
        if reply.raw_body is not None:
            return {"status_code": 200, "body": reply.raw_body}
        model = body.get("model") or DEFAULT_MODEL_ID
        return {"status_code": 200, "body": _completion(call_index, model, body, reply)}

    def _store(self, records: list[dict[str, Any]]) -> str | None:
        if not records:
            return None
        file_id = f"file-{len(self._files) + 1}"
        self._files[file_id] = "".join(json.dumps(r) + "\n" for r in records).encode()
        return file_id


class _FakeLLMApp:
    """Request handling and counters, shared by the in-thread and the subprocess server."""

    def __init__(
        self,
        responder: Responder,
        latency_s: float,
        record: bool,
        api_key: str | None = None,
        *,
        batch_script: BatchScript | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.api_key = api_key  # when set, every other key is answered with 401
        self.batch_api = _BatchAPI(self, batch_script or BatchScript())
        self._count_tokens = count_tokens or _word_count
        self._responder = responder
        self._latency_s = latency_s
        self._record = record
        # Handlers run on the event loop thread while tests read and reset from theirs.
        self._lock = threading.Lock()
        self.total_requests = 0
        self.chat_requests = 0
        self.connections = 0
        self._recorded: list[dict[str, Any]] = []
        self._attempts_per_key: dict[str, int] = {}
        models_route = ("GET", _models_response)
        self._routes: dict[str, tuple[str, Callable[[], _Response]]] = {
            "/v1/models": models_route,
            "/models": models_route,
            "/openai/models": models_route,  # Azure's models list
            "/health": ("GET", lambda: _json_response(200, {"status": "ok"})),
            "/_stats": ("GET", lambda: _json_response(200, self.stats())),
            "/_reset": ("POST", self._reset_route),
        }

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "requests": self.total_requests,
                "chat_requests": self.chat_requests,
                "connections": self.connections,
            }

    def recorded_bodies(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._recorded)

    def reset(self) -> None:
        with self._lock:
            self.total_requests = self.chat_requests = self.connections = 0
            self._recorded.clear()
            self._attempts_per_key.clear()

    async def handle_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        with self._lock:
            self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return  # the client closed the connection between requests
                try:
                    method, target, content_length, keep_alive, api_key = _parse_head(head)
                except ValueError as exc:
                    writer.write(_encode(_error_response(400, str(exc)), keep_alive=False))
                    await writer.drain()
                    return
                body = await reader.readexactly(content_length) if content_length else b""
                response = await self._dispatch(method, target, body, api_key)
                writer.write(_encode(response, keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away mid-request (e.g. after its own timeout)
        except asyncio.CancelledError:
            # The server is stopping. Ending quietly spares the traceback Python 3.11's
            # StreamReaderProtocol prints for a cancelled connection handler.
            pass
        finally:
            writer.close()

    async def _dispatch(
        self, method: str, target: str, body: bytes, api_key: str | None = None
    ) -> _Response:
        path = target.partition("?")[0]
        if path not in _CONTROL_PATHS:
            with self._lock:
                self.total_requests += 1
            if self.api_key is not None and api_key != self.api_key:
                return _error_response(401, "Incorrect API key provided")
        if path in _CHAT_PATHS or (path.startswith(_AZURE_PREFIX) and path.endswith(_CHAT_SUFFIX)):
            if method != "POST":
                return _error_response(405, f"{method} is not allowed on {path}")
            return await self._chat(path, body)
        batch_route = _batch_route(path)
        return (
            self.batch_api.handle(method, batch_route, body)
            if batch_route is not None
            else self._route(method, path)
        )

    def _route(self, method: str, path: str) -> _Response:
        route = self._routes.get(path)
        if route is None:
            return _error_response(404, f"no route for {method} {path}")
        allowed_method, handle = route
        if method != allowed_method:
            return _error_response(405, f"{method} is not allowed on {path}")
        return handle()

    def _reset_route(self) -> _Response:
        self.reset()
        return _json_response(200, {"reset": True})

    async def _chat(self, path: str, raw_body: bytes) -> _Response:
        try:
            body = json.loads(raw_body)
        except ValueError:
            return _error_response(400, "the request body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error_response(400, "the request body needs a 'messages' list")
        if body.get("stream"):
            return _error_response(400, "streaming is not supported by the fake server")
        with self._lock:
            call_index = self.chat_requests
            self.chat_requests += 1
        reply = self.respond(body, call_index, path)
        delay_s = self._latency_s + (reply.delay_s or 0.0)
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        if reply.status != 200:
            message = reply.error_message or f"simulated error {reply.status}"
            return _error_response(reply.status, message, reply.retry_after)
        if reply.raw_body is not None:
            return _Response(200, reply.raw_body.encode())
        model = body.get("model") or _azure_deployment(path) or DEFAULT_MODEL_ID
        return _json_response(200, _completion(call_index, model, body, reply, self._count_tokens))

    def respond(self, body: dict[str, Any], call_index: int, path: str) -> Reply:
        """The responder's reply to one chat body (from the chat route or a batch line)."""
        key = _messages_key(body["messages"])
        with self._lock:
            key_call_index = self._attempts_per_key.get(key, 0)
            self._attempts_per_key[key] = key_call_index + 1
            if self._record:
                self._recorded.append(body)
        context = RequestContext(call_index, key_call_index, key, path)
        try:
            reply = self._responder(body, context)
        except Exception as exc:  # a broken responder is reported to the client, not lost
            reply = Reply(status=500, error_message=f"responder raised {exc!r}")
        return Reply(content=reply) if isinstance(reply, str) else reply


def _azure_deployment(path: str) -> str | None:
    if path.startswith(_AZURE_PREFIX):
        return path[len(_AZURE_PREFIX) : -len(_CHAT_SUFFIX)]
    return None


def _completion(
    call_index: int,
    model: str,
    body: dict[str, Any],
    reply: Reply,
    count_tokens: Callable[[str], int],
) -> dict[str, Any]:
    messages = [message for message in body["messages"] if isinstance(message, dict)]
    prompt_tokens = sum(count_tokens(_message_text(message)) for message in messages)
    if count_tokens is not _word_count:
        # A tokenizer's count is billed the way OpenAI documents its chat format: 3 tokens
        # of framing per message and 3 that prime the reply.
        prompt_tokens += 3 * len(messages) + 3
    completion_tokens = count_tokens(reply.content or "")
    return {
        "id": f"chatcmpl-fake-{call_index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content, "refusal": None},
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _models_response() -> _Response:
    model = {"id": DEFAULT_MODEL_ID, "object": "model", "created": 0, "owned_by": "llm_feedback"}
    return _json_response(200, {"object": "list", "data": [model]})


def _parse_head(head: bytes) -> tuple[str, str, int, bool, str | None]:
    """Method, target, Content-Length, keep-alive and the API key from a request head."""
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError(f"malformed request line {request_line!r}")
    method, target, version = parts
    content_length = 0
    api_key = None
    # HTTP/1.1 keeps the connection open unless told otherwise; HTTP/1.0 the reverse.
    keep_alive = version == "HTTP/1.1"
    for line in header_lines:
        name, _, value = line.partition(":")
        name = name.strip().lower()
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
        elif name == "api-key":  # Azure's header
            api_key = value.strip()
    return method, target, content_length, keep_alive, api_key


def _encode(response: _Response, keep_alive: bool) -> bytes:
    connection_header = "" if keep_alive else "Connection: close\r\n"
    head = (
        f"{_status_line(response.status)}"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(response.body)}\r\n"
        f"{response.extra_headers}{connection_header}\r\n"
    )
    return head.encode("latin-1") + response.body


async def _serve_until_stopped(
    app: _FakeLLMApp,
    host: str,
    port: int,
    stop_requested: asyncio.Event,
    on_listening: Callable[[int], None],
) -> None:
    server = await asyncio.start_server(app.handle_connection, host, port)
    on_listening(server.sockets[0].getsockname()[1])
    await stop_requested.wait()
    # No wait_closed(): it would wait for idle keep-alive clients. asyncio.run cancels
    # the open connection handlers, which close their sockets on the way out.
    server.close()


def _base_url(host: str, port: int) -> str:
    reachable_host = "127.0.0.1" if host in ("", "0.0.0.0") else host
    if ":" in reachable_host:
        reachable_host = f"[{reachable_host}]"
    return f"http://{reachable_host}:{port}/v1"


# --------------------------------------------------------------------------------------
# In-process server
# --------------------------------------------------------------------------------------


class FakeLLMServer:
    """The fake server on a daemon thread with its own event loop, for tests.

    ``with FakeLLMServer(responder) as server:`` starts it; ``server.base_url`` is what to
    give the client. Counters and recorded bodies can be read from the test's thread.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
        *,
        api_key: str | None = None,
        batch: BatchScript | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        """`api_key`: when given, a request with any other key gets HTTP 401; `batch`: how
        the Batch API routes behave (`batch_script` may change it between runs).
        `count_tokens`: how `usage` counts a message or reply's tokens; by default its
        whitespace-separated words. Given a tokenizer's count (where tests compare token
        figures), prompts are billed as OpenAI bills chat: plus 3 tokens a message and 3."""
        self._app = _FakeLLMApp(
            responder or schema_responder,
            latency_s,
            record,
            api_key,
            batch_script=batch,
            count_tokens=count_tokens,
        )
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._startup_error: BaseException | None = None

    def start(self) -> FakeLLMServer:
        """Starts serving and returns once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("the server is already running")
        listening = threading.Event()
        self._startup_error = None
        self._thread = threading.Thread(
            target=self._run, args=(listening,), name="FakeLLMServer", daemon=True
        )
        self._thread.start()
        listening.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        return self

    def _run(self, listening: threading.Event) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop_requested = asyncio.Event()

            def on_listening(port: int) -> None:
                self._port = port
                listening.set()

            await _serve_until_stopped(
                self._app, self._host, self._requested_port, self._stop_requested, on_listening
            )

        try:
            asyncio.run(serve())
        except BaseException as exc:  # reported to start() instead of dying on the thread
            self._startup_error = exc
        finally:
            listening.set()

    def stop(self) -> None:
        """Stops serving, closes open connections and joins the thread."""
        if self._thread is None:
            return
        if self._loop is not None and self._stop_requested is not None:
            self._loop.call_soon_threadsafe(self._stop_requested.set)
        self._thread.join()
        self._thread = self._loop = self._stop_requested = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        return _base_url(self._host, self.port)

    @property
    def request_count(self) -> int:
        """Chat completion requests received since start or the last reset."""
        return self._app.chat_requests

    @property
    def connection_count(self) -> int:
        """TCP connections accepted since start or the last reset."""
        return self._app.connections

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the chat requests received (empty unless `record`), oldest first."""
        return self._app.recorded_bodies()

    @property
    def batch_script(self) -> BatchScript:
        return self._app.batch_api.script

    @batch_script.setter
    def batch_script(self, script: BatchScript) -> None:
        self._app.batch_api.script = script

    @property
    def batch_counts(self) -> dict[str, int]:
        """Files uploaded, batches created and batch lines answered since start."""
        return dict(self._app.batch_api.counts)

    @property
    def batch_retrievals(self) -> list[str]:
        """The batch ids clients polled, oldest first."""
        return list(self._app.batch_api.retrieved)

    def stats(self) -> dict[str, int]:
        """The same counters as ``GET /_stats``."""
        return self._app.stats()

    def reset(self) -> None:
        """Zeroes the counters and forgets recorded bodies and per-request attempts."""
        self._app.reset()


# --------------------------------------------------------------------------------------
# Subprocess server
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def serve_in_subprocess(
    latency_s: float = 0.0, responder: str | None = None, timeout_s: float = 10
) -> Iterator[str]:
    """Runs the server in a child Python process and yields its base URL.

    `responder` is a name for ``--responder`` (``echo``, ``schema``, ``module:callable``).
    The child can import whatever this process can. It is terminated on exit, exceptions
    included.
    """
    command = [sys.executable, "-m", "llm_feedback.testing.server"]
    command += ["--latency", repr(latency_s), "--port", "0"]
    if responder is not None:
        command += ["--responder", responder]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}
    with tempfile.TemporaryFile() as stderr_file:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr_file, text=True, env=environment
        )
        try:
            yield _await_listening(child, timeout_s, stderr_file)
        finally:
            _terminate(child)


def _await_listening(child: subprocess.Popen[str], timeout_s: float, stderr_file: Any) -> str:
    lines: queue.Queue[str] = queue.Queue()
    assert child.stdout is not None
    stdout = child.stdout
    # A thread, because a pipe read cannot time out portably.
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=timeout_s)
    except queue.Empty:
        raise TimeoutError(f"the fake LLM server did not start within {timeout_s} s") from None
    if not line.startswith(_LISTENING_PREFIX):
        child.wait(timeout=timeout_s)
        stderr_file.seek(0)
        error_output = stderr_file.read().decode(errors="replace")
        raise RuntimeError(f"the fake LLM server failed to start:\n{line}{error_output}")
    return line[len(_LISTENING_PREFIX) :].strip()


def _terminate(child: subprocess.Popen[str]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if child.stdout is not None:
        child.stdout.close()


def fetch_stats(base_url: str, timeout_s: float = 5.0) -> dict[str, int]:
    """``GET /_stats`` of the server at `base_url` (its ``/v1`` suffix is ignored)."""
    parts = urlsplit(base_url)
    # An explicit empty ProxyHandler: an HTTP(S)_PROXY in the environment must not
    # capture requests to the local server.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"{parts.scheme}://{parts.netloc}/_stats", timeout=timeout_s) as response:
        return json.loads(response.read())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m llm_feedback.testing.server",
        description="Serve a fake OpenAI-compatible chat API until SIGTERM or SIGINT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat request")
    parser.add_argument(
        "--responder", default="schema", help="echo, schema (default) or module:callable"
    )
    args = parser.parse_args(argv)
    # Bodies are not recorded: nothing could read them back, and benchmarks would grow.
    app = _FakeLLMApp(resolve_responder(args.responder), args.latency, record=False)

    async def serve() -> None:
        stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        for stop_signal in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(stop_signal, stop_requested.set)

        def announce(port: int) -> None:
            print(f"{_LISTENING_PREFIX}{_base_url(args.host, port)}", flush=True)

        await _serve_until_stopped(app, args.host, args.port, stop_requested, announce)

    asyncio.run(serve())


if __name__ == "__main__":
    # Run the importable module's main rather than this `__main__` copy, so that a
    # --responder module importing Reply from llm_feedback.testing.server gets the very
    # class the server checks replies against.
    from llm_feedback.testing.server import main as importable_main

    importable_main()
