"""The fake OpenAI Batch API: the Files and Batches routes, each batch line answered by the
server's responder, with delays, expiry and failure set by a `BatchScript`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_feedback.testing.protocol import (
    CHAT_PATHS,
    DEFAULT_MODEL_ID,
    Response,
    completion,
    error_response,
    json_response,
)
from llm_feedback.testing.replies import Reply

# (chat body, call index, endpoint path) -> the responder's reply, counted as the app counts
ChatAnswerer = Callable[[dict[str, Any], int, str], Reply]

_BATCH_API_PREFIXES = ("/v1", "/openai", "")
_EXPIRED_ERROR = {
    "code": "batch_expired",
    "message": "This request could not be executed before the completion window expired.",
}


@dataclass(frozen=True, slots=True)
class BatchScript:
    """How the fake Batch API treats every batch.

    `delay_s`: seconds from creation until a batch is finished (`in_progress` until then).
    `expire_after`: when set, a batch expires with only its first `expire_after` requests
    answered; the rest go to its error file with code `batch_expired`, as OpenAI reports them.
    `fail`: when set, every batch ends `failed` with this message and no output at all.
    `busy_calls`: the first so many batch calls (upload, create, retrieve, results) are
    refused as busy, asking for `BUSY_RETRY_AFTER_S`: OpenAI's and Gemini's 429, Anthropic's
    529 `overloaded_error`.
    """

    delay_s: float = 0.0
    expire_after: int | None = None
    fail: str | None = None
    busy_calls: int = 0


#: The wait a busy batch call asks for (`BatchScript.busy_calls`).
BUSY_RETRY_AFTER_S = 0.05


def batch_route(path: str) -> str | None:
    """`/files...` or `/batches...` from the OpenAI (`/v1`) or Azure (`/openai`) path.

    Args:
        path: the request path.

    Returns:
        The route, or None for another path.
    """
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


class BatchAPI:
    """Files and Batches: uploads kept in memory, each batch answered line by line by
    `answer_chat` once its `BatchScript.delay_s` has passed (on the first retrieve after)."""

    def __init__(
        self, script: BatchScript, answer_chat: ChatAnswerer, count_tokens: Callable[[str], int]
    ) -> None:
        """Start with no files or batches.

        Args:
            script: how the batches behave.
            answer_chat: answers one chat body of a batch line.
            count_tokens: counts a text's tokens.
        """
        self.script = script
        #: Answers one line of a batch (the Anthropic and Gemini batches use it too).
        self.answer_chat = answer_chat
        self._count_tokens = count_tokens
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, dict[str, Any]] = {}
        self._lines: dict[str, list[dict[str, Any]]] = {}
        self.counts = {"files_uploaded": 0, "batches_created": 0, "batch_lines_answered": 0}
        self.retrieved: list[str] = []  # batch ids, in the order they were polled
        self.refused_busy = 0  # batch calls refused as busy (`BatchScript.busy_calls`)
        # Tests read the counts from their own thread (shared with the other batch APIs).
        self.lock = threading.Lock()

    def handle(self, method: str, route: str, body: bytes) -> Response:
        """Answer one Files or Batches request (429 while scripted busy).

        Args:
            method: the HTTP method.
            route: the route (`batch_route`).
            body: the request body.

        Returns:
            The response.
        """
        with self.lock:
            if self.refuses_as_busy():
                return error_response(429, "busy, try later", retry_after=BUSY_RETRY_AFTER_S)
            return self._handle(method, route, body)

    def refuses_as_busy(self) -> bool:
        """Whether this batch call is one of the script's `busy_calls` (hold `lock`)."""
        if self.refused_busy >= self.script.busy_calls:
            return False
        self.refused_busy += 1
        return True

    def _handle(self, method: str, route: str, body: bytes) -> Response:
        parts = route.strip("/").split("/")
        if parts == ["files"] and method == "POST":
            return self._upload(body)
        if parts == ["batches"] and method == "POST":
            return self._create(body)
        if parts[2:] == ["content"] and parts[0] == "files" and method == "GET":
            content = self._files.get(parts[1])
            return Response(200, content) if content else error_response(404, "no such file")
        known = len(parts) >= 2 and parts[0] == "batches" and parts[1] in self._batches
        if known and len(parts) == 2 and method == "GET":
            self.retrieved.append(parts[1])
            return json_response(200, self._advance(parts[1]))
        if known and parts[2:] == ["cancel"] and method == "POST":
            return json_response(200, self._cancel(parts[1]))
        return error_response(404, f"no route for {method} {route}")

    def _upload(self, body: bytes) -> Response:
        fields = _multipart_fields(body)
        if fields.get("purpose") != b"batch" or "file" not in fields:
            return error_response(400, "an upload needs purpose=batch and a file part")
        file_id = self._store(fields["file"])
        self.counts["files_uploaded"] += 1
        return json_response(
            200,
            {"id": file_id, "object": "file", "bytes": len(fields["file"]), "purpose": "batch"},
        )

    def _create(self, raw_body: bytes) -> Response:
        try:
            body = json.loads(raw_body)
            content = self._files[body["input_file_id"]]
        except (ValueError, KeyError, TypeError):
            return error_response(400, "input_file_id must name an uploaded file")
        endpoint = body.get("endpoint")
        if endpoint not in CHAT_PATHS:
            return error_response(400, f"unsupported endpoint {endpoint!r}")
        lines, seen = [], set()
        # JSON Lines end at "\n" only: a string may hold a raw U+2028 that splitlines() splits.
        for number, text in enumerate(content.decode().split("\n"), start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
                custom_id, chat = line["custom_id"], line["body"]
                valid = line["method"] == "POST" and line["url"] == endpoint
            except (ValueError, KeyError, TypeError):
                valid = False
            if not valid or custom_id in seen or not isinstance(chat.get("messages"), list):
                return error_response(400, f"line {number} of the input file is not valid")
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
        return json_response(200, self._batches[batch_id])

    def _cancel(self, batch_id: str) -> dict[str, Any]:
        batch = self._batches[batch_id]
        if batch["status"] == "in_progress":
            batch["status"] = "cancelled"  # nothing answered: no output, no error file
        return batch

    def _advance(self, batch_id: str) -> dict[str, Any]:
        batch = self._batches[batch_id]
        finishes_at = batch["created_at"] + self.script.delay_s
        if batch["status"] != "in_progress" or time.time() < finishes_at:
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
        batch["output_file_id"] = self._store_records(outputs)
        batch["error_file_id"] = self._store_records(errors)
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
        reply = self.answer_chat(body, call_index, endpoint)
        if reply.status != 200:
            error = error_response(
                reply.status,
                reply.error_message or "simulated error",
                error_type=reply.error_type,
                code=reply.error_code,
            )
            return {"status_code": reply.status, "body": json.loads(error.body)}
        if reply.raw_body is not None:
            return {"status_code": 200, "body": reply.raw_body}
        model = body.get("model") or DEFAULT_MODEL_ID
        return {
            "status_code": 200,
            "body": completion(call_index, model, body, reply, self._count_tokens),
        }

    def _store(self, content: bytes) -> str:
        file_id = f"file-{len(self._files) + 1}"
        self._files[file_id] = content
        return file_id

    def _store_records(self, records: list[dict[str, Any]]) -> str | None:
        if not records:
            return None
        return self._store("".join(json.dumps(r) + "\n" for r in records).encode())
