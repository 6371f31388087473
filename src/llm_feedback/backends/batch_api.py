"""The OpenAI / Azure Batch API (`mode: batch` on an `openai` or `azure` endpoint).

`LLMClient` hands it the requests that missed the cache. They are written as JSONL (the
request's cache key is its `custom_id`), uploaded to `/files`, submitted to `/batches` in
chunks within the API's limits, polled with backoff, and each output line is handed back by
its `custom_id` as it is downloaded. Submitted batch ids go into a ledger beside the request
cache before polling starts, so a run killed while waiting polls the same batches again
instead of paying twice; `batch_wait: false` submits and stops, and a later run collects.

The ledger, and the cycle every Batch API's jobs share (resume what the ledger records,
record each new batch before any wait, poll with backoff, hand the answers back), are here
too: `LedgerBatchJobs`, which `BatchJobs` and the provider SDKs' batches
(backends/provider_batches.py) extend.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import orjson

from llm_feedback.backends.base import EndpointConfig
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.lean import (
    UNREADABLE,
    LeanConnection,
    TransportFailure,
    TransportTimeout,
    chat_result,
    error_message,
)
from llm_feedback.backends.openai_backend import RETRYABLE_STATUS, ReplyTooLarge
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import BatchPending, EndpointError
from llm_feedback.storage.remote_root import LEDGER_SUFFIX, require_local

logger = logging.getLogger(__name__)

FINISHED = frozenset({"completed", "expired", "cancelled", "failed"})
COMPLETION_WINDOW = "24h"
# What a batch output line adds around its reply body (ids, status, request id).
BATCH_LINE_ENVELOPE_BYTES = 4096
T = TypeVar("T")
#: Gets each answer a batch gave, by its request's cache key.
OnAnswer = Callable[[str, ChatResult], None]


@dataclass(frozen=True)
class SubmittedBatch:
    id: str
    namespace: str  # the endpoint's cache namespace: batches of other endpoints are kept apart
    model: str
    custom_ids: tuple[str, ...]
    submitted_at: float


class BatchLedger:
    """Submitted batches not yet collected, in `<request cache>.batches.json`.

    Every change rewrites the file atomically (a temporary file, then `os.replace`), so a
    kill at any moment leaves either the old or the new list, never half of one.
    """

    def __init__(self, cache_path: str | Path) -> None:
        """The ledger beside a request cache.

        Args:
            cache_path: The request cache's file; the ledger is that path plus `LEDGER_SUFFIX`.

        Raises:
            ConfigError: The path is a remote URL (the ledger must be a local file).
        """
        self.path = require_local(f"{cache_path}{LEDGER_SUFFIX}", "batch ledger")

    def load(self) -> list[SubmittedBatch]:
        if not self.path.is_file():
            return []
        try:
            entries = json.loads(self.path.read_text())["batches"]
            return [
                SubmittedBatch(**{**entry, "custom_ids": tuple(entry["custom_ids"])})
                for entry in entries
            ]
        except (ValueError, KeyError, TypeError) as error:
            raise EndpointError(
                f"{self.path} is not a batch ledger ({error!r}); move it away to submit anew"
            ) from None

    def add(self, batch: SubmittedBatch) -> None:
        """Record a submitted batch.

        Args:
            batch: The batch.
        """
        self._write([*self.load(), batch])

    def remove(self, batch_id: str) -> None:
        """Drop a collected batch from the ledger.

        Args:
            batch_id: The batch's id.
        """
        self._write([batch for batch in self.load() if batch.id != batch_id])

    def _write(self, batches: list[SubmittedBatch]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        payload = {"batches": [asdict(batch) for batch in batches]}
        temporary.write_text(json.dumps(payload, indent=1))
        os.replace(temporary, self.path)


@dataclass(frozen=True)
class BatchState:
    """A batch as one retrieve saw it."""

    finished: bool
    status: str  # the provider's own word (in_progress, ended, JOB_STATE_SUCCEEDED, ...)
    succeeded: int = 0
    failed: int = 0
    total: int = 0
    # Why requests without a result have none (the batch expired, failed, was cancelled).
    reason: str = ""
    # The provider's own record of the batch, where reading its results needs it.
    detail: Any = field(default=None, compare=False, repr=False)


class LedgerBatchJobs:
    """Submits requests as batches and collects their answers, for one endpoint: what
    every Batch API shares. Batches the ledger records for the endpoint are resumed, the
    rest submitted (`_submit`), each recorded in the ledger before any wait (`_record`),
    polled with backoff (`_retrieve`) and, once finished, read (`_results`)."""

    #: The provider's word for a request its batch answered, as the progress line says it.
    answered_word: ClassVar[str] = "succeeded"

    config: EndpointConfig
    ledger: BatchLedger
    #: The endpoint's cache namespace: batches of other endpoints are kept apart.
    namespace: str

    async def answer(self, pending: dict[str, ChatRequest], on_answer: OnAnswer) -> dict[str, str]:
        """Answer `pending` (cache key -> request) through batches, resuming recorded ones.

        Args:
            pending: The requests to answer, by cache key.
            on_answer: Gets every answer as it is collected (also those of keys outside
                `pending` that a resumed batch carries: they were paid for) and every
                request that could not be put into a batch, as a failure.

        Returns:
            The keys no batch answered, each with the reason.
        """
        resumed = [
            batch
            for batch in self.ledger.load()
            if (batch.namespace, batch.model) == (self.namespace, self.config.model)
            and not pending.keys().isdisjoint(batch.custom_ids)
        ]
        covered = {key for batch in resumed for key in batch.custom_ids}
        if resumed:
            logger.info(
                "%s: resuming %d submitted batch(es) (%s) for %d requests",
                self.config.describe(),
                len(resumed),
                ", ".join(batch.id for batch in resumed),
                len(covered & pending.keys()),
            )
        fresh = [key for key in pending if key not in covered]
        submitted = await self._submit(fresh, pending, on_answer)
        return await self._collect([*resumed, *submitted], pending, on_answer)

    async def _submit(
        self, keys: list[str], pending: dict[str, ChatRequest], on_answer: OnAnswer
    ) -> list[SubmittedBatch]:
        """Submit `keys`' requests in batches within the API's limits, each `_record`ed."""
        raise NotImplementedError

    async def _retrieve(self, batch_id: str) -> BatchState:
        """Where the batch stands; EndpointError when the API cannot say."""
        raise NotImplementedError

    def _results(
        self, batch: SubmittedBatch, state: BatchState, pending: dict[str, ChatRequest]
    ) -> AsyncIterator[tuple[str, ChatResult]]:
        """(key, result) for every request of the finished `batch` that has a result."""
        raise NotImplementedError

    async def _read_finished(
        self,
        batch: SubmittedBatch,
        state: BatchState,
        pending: dict[str, ChatRequest],
        on_answer: OnAnswer,
    ) -> dict[str, str]:
        """Hand every successful answer of a finished batch to `on_answer`; returns
        key -> "" for each answer, -> why for each failed request."""
        outcome: dict[str, str] = {}
        async for key, result in self._results(batch, state, pending):
            if result.ok:
                result.via_batch = True
                on_answer(key, result)
                outcome[key] = ""
            else:
                outcome.setdefault(key, result.error or "no result")
        return outcome

    def _record(self, batch_id: str, keys: list[str], size: int) -> SubmittedBatch:
        """The submitted batch, in the ledger before any wait: a killed run resumes it."""
        batch = SubmittedBatch(
            id=batch_id,
            namespace=self.namespace,
            model=self.config.model,
            custom_ids=tuple(keys),
            submitted_at=time.time(),
        )
        self.ledger.add(batch)
        logger.info(
            "%s: submitted batch %s with %d requests (%d bytes)",
            self.config.describe(),
            batch_id,
            len(keys),
            size,
        )
        return batch

    async def _collect(
        self, batches: list[SubmittedBatch], pending: dict[str, ChatRequest], on_answer: OnAnswer
    ) -> dict[str, str]:
        unanswered: dict[str, str] = {}
        waiting = {batch.id: batch for batch in batches}
        options = self.config.options
        delay = options.batch_poll_seconds
        while waiting:
            succeeded = failed = total = 0
            statuses: dict[str, int] = {}
            for batch_id, batch in list(waiting.items()):
                state = await self._state(batch_id)
                statuses[state.status] = statuses.get(state.status, 0) + 1
                succeeded, failed = succeeded + state.succeeded, failed + state.failed
                total += state.total or len(batch.custom_ids)
                if not state.finished:
                    continue
                outcome = await self._read_finished(batch, state, pending, on_answer)
                reason = state.reason or f"batch {batch_id} {state.status}"
                for key in batch.custom_ids:
                    if key in pending and outcome.get(key) != "":
                        unanswered[key] = f"{reason}: {outcome.get(key) or 'no result'}"
                self.ledger.remove(batch_id)
                del waiting[batch_id]
            logger.info(
                "%s: batches %s; requests %d of %d %s, %d failed",
                self.config.describe(),
                ", ".join(f"{n} {status}" for status, n in sorted(statuses.items())),
                succeeded,
                total,
                self.answered_word,
                failed,
            )
            if waiting and not options.batch_wait:
                raise BatchPending(
                    f"{self.config.describe()}: {len(waiting)} batch(es) submitted and not "
                    f"finished ({', '.join(waiting)}), recorded in {self.ledger.path}; "
                    "run the same command later to collect their answers (batch_wait: false)"
                )
            if waiting:
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, options.batch_poll_max_seconds)
        return unanswered

    async def _state(self, batch_id: str) -> BatchState:
        try:
            return await self._retrieve(batch_id)
        except EndpointError as error:
            raise EndpointError(
                f"{error}; batch {batch_id} is recorded in {self.ledger.path}: if the "
                "provider no longer knows it, remove its entry and its requests are submitted anew"
            ) from None


def batch_chunks(
    items: Iterable[tuple[str, T, int]], max_requests: int, max_bytes: int
) -> Iterator[tuple[list[str], list[T], int]]:
    """A Batch API's requests cut into batches within its limits.

    Args:
        items: (key, request as the batch holds it, its size in bytes) in order.
        max_requests: The most requests a batch may hold.
        max_bytes: The most bytes a batch's requests may add up to.

    Yields:
        (keys, requests, bytes) chunks, in order.

    Raises:
        EndpointError: A request alone is larger than `max_bytes`.
    """
    keys: list[str] = []
    chunk: list[T] = []
    size = 0
    for key, item, length in items:
        if length > max_bytes:
            raise EndpointError(
                f"request {key} alone is {length} bytes, over batch_max_bytes ({max_bytes})"
            )
        if keys and (len(keys) == max_requests or size + length > max_bytes):
            yield keys, chunk, size
            keys, chunk, size = [], [], 0
        keys.append(key)
        chunk.append(item)
        size += length
    if keys:
        yield keys, chunk, size


def jsonl_chunks(
    lines: Iterable[tuple[str, bytes]], max_requests: int, max_bytes: int
) -> Iterator[tuple[list[str], bytes]]:
    """(custom_ids, JSONL file) chunks of at most `max_requests` lines and `max_bytes`.

    Args:
        lines: (custom_id, JSON line without its newline) for each request.
        max_requests: The most lines a file holds.
        max_bytes: The most bytes a file holds.

    Yields:
        (the custom ids, the JSONL file's bytes) for each chunk, in order.

    Raises:
        EndpointError: A line alone is larger than `max_bytes`.
    """
    framed = ((custom_id, line + b"\n", len(line) + 1) for custom_id, line in lines)
    for ids, parts, _ in batch_chunks(framed, max_requests, max_bytes):
        yield ids, b"".join(parts)


class BatchJobs(LedgerBatchJobs):
    """The OpenAI / Azure Batch API's jobs for one endpoint: JSONL files uploaded to
    `/files`, batches through `/batches`, output and error files downloaded."""

    answered_word = "completed"

    def __init__(
        self,
        config: EndpointConfig,
        connection: LeanConnection,
        ledger: BatchLedger,
        namespace: str,
        request_body: Callable[[ChatRequest], dict[str, Any]],
        *,
        route: str,
    ) -> None:
        """The Batch API jobs of one endpoint.

        Args:
            config: The endpoint.
            connection: Its lean connection (for `/files` and `/batches`).
            ledger: The ledger of submitted batches.
            namespace: The endpoint's cache namespace (batches of other endpoints are kept
                apart).
            request_body: Makes a request's chat completions body.
            route: The route batch lines name (Azure's has no version prefix).
        """
        self.config = config
        self._connection = connection
        self.ledger = ledger
        self.namespace = namespace
        self._request_body = request_body
        # The route batch lines name (Azure's has no version prefix).
        self._route = route

    async def _submit(
        self, keys: list[str], pending: dict[str, ChatRequest], on_answer: OnAnswer
    ) -> list[SubmittedBatch]:
        lines = (
            (key, orjson.dumps(self._line(key, pending[key]))) for key in keys
        )  # built chunk by chunk: one input file in memory at a time
        options = self.config.options
        chunks = jsonl_chunks(lines, options.batch_max_requests, options.batch_max_bytes)
        submitted = []
        for custom_ids, content in chunks:
            file_id = (await self._upload(content))["id"]
            created = await self._call(
                "POST",
                "batches",
                json={
                    "input_file_id": file_id,
                    "endpoint": self._route,
                    "completion_window": COMPLETION_WINDOW,
                },
            )
            submitted.append(self._record(created["id"], custom_ids, len(content)))
        return submitted

    def _line(self, key: str, request: ChatRequest) -> dict[str, Any]:
        return {
            "custom_id": key,
            "method": "POST",
            "url": self._route,
            "body": self._request_body(request),
        }

    async def _retrieve(self, batch_id: str) -> BatchState:
        info = await self._call("GET", f"batches/{batch_id}")
        status = str(info.get("status"))
        counts = info.get("request_counts") or {}
        return BatchState(
            finished=status in FINISHED,
            status=status,
            succeeded=counts.get("completed", 0),
            failed=counts.get("failed", 0),
            total=counts.get("total", 0),
            reason=_unanswered_reason(info),
            detail=info,
        )

    def _download_limit(self, batch: SubmittedBatch, pending: dict[str, ChatRequest]) -> int:
        """The most bytes one of `batch`'s output or error files may hold: each of its
        lines a reply within the endpoint's cap (`max_reply_bytes`, or the default from the
        largest token budget asked, a reasoning budget included) plus the line's envelope."""
        asked = [pending[key].token_budget for key in batch.custom_ids if key in pending]
        per_line = self.config.reply_byte_limit(max(asked, default=0) or 1)
        return len(batch.custom_ids) * (per_line + BATCH_LINE_ENVELOPE_BYTES)

    async def _results(
        self, batch: SubmittedBatch, state: BatchState, pending: dict[str, ChatRequest]
    ) -> AsyncIterator[tuple[str, ChatResult]]:
        """The lines of a finished batch's output and error files, as they are downloaded."""
        info = state.detail
        max_bytes = self._download_limit(batch, pending)
        started, ended = info.get("created_at"), info.get("completed_at")
        latency = float(ended - started) if started and ended else 0.0
        for file_field in ("output_file_id", "error_file_id"):
            file_id = info.get(file_field)
            if not file_id:
                continue
            route = f"files/{file_id}/content"
            content = await self._call("GET", route, raw=True, max_bytes=max_bytes)
            for text in filter(bytes.strip, content.splitlines()):
                try:
                    line = orjson.loads(text)
                    key = line["custom_id"]
                    if not isinstance(key, str):
                        raise TypeError("custom_id is not a string")
                except UNREADABLE:
                    # Its request stays unanswered ("no result") and follows batch_unanswered.
                    logger.warning("batch %s: unreadable line in %s", info.get("id"), file_id)
                    continue
                yield key, self._line_result(line, latency)

    def _line_result(self, line: dict[str, Any], latency: float) -> ChatResult:
        response = line.get("response") or {}
        status = response.get("status_code")
        if status == 200:
            try:
                result = chat_result(response.get("body"), latency, self.config.model)
            except UNREADABLE as error:
                return ChatResult.failure(redact(f"malformed batch output: {error!r}"))
            return result
        error = line.get("error")
        if isinstance(error, dict):
            return ChatResult.failure(redact(f"{error.get('code')}: {error.get('message')}"))
        return ChatResult.failure(redact(f"HTTP {status}: {error_message(status, response)}"))

    async def _upload(self, content: bytes) -> dict[str, Any]:
        # Encoded here, as bytes, so that a retry sends the very same body.
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            'filename="batch.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n'
        )
        body = head.encode() + content + f"\r\n--{boundary}--\r\n".encode()
        return await self._call(
            "POST",
            "files",
            data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )

    async def _call(self, method: str, route: str, raw: bool = False, **kwargs: Any) -> Any:
        """One Files/Batches call, retried like chat calls; EndpointError when it fails."""
        url = self._connection.api_url(route)
        problem = ""
        for attempt in range(self.config.max_retries + 1):
            try:
                response = await self._connection.request(method, url, **kwargs)
            except TransportTimeout as error:
                problem = f"timed out: {error}"
            except TransportFailure as error:
                problem = str(error)
            except ReplyTooLarge as error:
                problem = (
                    f"reply too large: {error}, beyond the {kwargs['max_bytes']} bytes allowed "
                    f"for its lines ({self.config.where}.max_reply_bytes per line)"
                )
                break
            else:
                if response.status == 200:
                    return response.content if raw else orjson.loads(response.content)
                problem = f"HTTP {response.status}: " + error_message(
                    response.status, response.content
                )
                if response.status not in RETRYABLE_STATUS:
                    break
            if attempt < self.config.max_retries:
                await asyncio.sleep(self.config.backoff_s(attempt))
        what = route.partition("/")[0]
        raise EndpointError(f"{self.config.describe()}: {method} {what} failed: {redact(problem)}")


def _unanswered_reason(info: dict[str, Any]) -> str:
    errors = (info.get("errors") or {}).get("data") or []
    detail = "; ".join(str(error.get("message")) for error in errors if isinstance(error, dict))
    return f"batch {info.get('id')} {info.get('status')}" + (f": {detail}" if detail else "")
