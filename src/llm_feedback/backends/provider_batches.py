"""Batch APIs reached through a provider's own SDK: Anthropic Message Batches and Gemini
batch mode (`mode: batch` on an `anthropic` or `gemini` endpoint).

The same contract as the OpenAI / Azure Batch API (backends/batch_api.py): `LLMClient` hands
over the requests the cache did not answer; they are split into batches within the
provider's limits (requests and bytes per batch), each batch is recorded in the ledger beside
the request cache before any wait (a run killed while polling resumes the same batches
instead of paying twice), polled with backoff, and its results are handed back by the
request's cache key. `batch_wait: false` submits and stops; a later run collects.

What differs per provider (the request's form inside a batch, create, retrieve, results)
is a `ProviderBatchAPI`; the control calls are retried like chat calls (Retry-After
honoured) and fail with one EndpointError naming the endpoint.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import orjson

from llm_feedback.backends.base import EndpointConfig, RetryableError
from llm_feedback.backends.batch_api import BatchLedger, SubmittedBatch
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.media import MediaError
from llm_feedback.backends.options import BackendOptions, bounds
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import BatchPending, ConfigError, EndpointError

logger = logging.getLogger(__name__)

_DAY_S = 86_400.0
# What the batch body adds around each request's JSON (separators, the list's brackets).
_ENTRY_OVERHEAD_BYTES = 2


@dataclass(frozen=True)
class ProviderOptions(BackendOptions):
    """What the `anthropic` and `gemini` backends share: where the API is, and the batch
    settings (the same names and meanings as the `openai` backend's)."""

    #: The provider's API root when `base_url` and its environment variable are unset.
    default_url: ClassVar[str] = ""
    #: The environment variable the provider's SDK reads its base URL from.
    url_variable: ClassVar[str] = ""

    base_url: str | None = None
    # "online" (one call per request) or "batch" (the provider's batch API: half price).
    mode: Literal["online", "batch"] = "online"
    # false: submit the batches and stop (the run fails, saying so); a later run collects.
    batch_wait: bool = True
    # Polling starts at batch_poll_seconds and backs off to batch_poll_max_seconds.
    batch_poll_seconds: float = bounds(0.001, _DAY_S, 30.0)
    batch_poll_max_seconds: float = bounds(0.001, _DAY_S, 600.0)
    # Requests a batch did not answer (errored, expired, cancelled): "retry" sends them
    # through the normal endpoint, "fail" records them as failed calls.
    batch_unanswered: Literal["retry", "fail"] = "retry"

    def check(self, where: str) -> None:
        if self.batch_poll_seconds > self.batch_poll_max_seconds:
            raise ConfigError(
                f"{where}.batch_poll_seconds must be <= batch_poll_max_seconds "
                f"({self.batch_poll_seconds} > {self.batch_poll_max_seconds})"
            )

    def resolved_base_url(self) -> str:
        """The API root: `base_url`, else the SDK's environment variable, else the default."""
        url = self.base_url or os.environ.get(self.url_variable) or self.default_url
        return url.rstrip("/")

    def public_url(self) -> str | None:
        return self.resolved_base_url()


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


class ProviderBatchAPI(Protocol):
    """One provider's batch calls; each raises RetryableError for a failure worth
    retrying and EndpointError for one that is not."""

    #: Most requests and bytes one batch may hold (the endpoint's limits).
    max_requests: int
    max_bytes: int

    def entry(self, key: str, request: ChatRequest) -> dict[str, Any]:
        """`request` as the batch body holds it, known by `key`; MediaError if its media
        cannot be read."""
        ...

    async def create(self, entries: list[dict[str, Any]]) -> str:
        """Submit one batch; its id."""
        ...

    async def state(self, batch_id: str) -> BatchState:
        """Where the batch stands."""
        ...

    async def results(self, batch_id: str) -> list[tuple[str, ChatResult]]:
        """(key, result) for every request of a finished batch that has a result."""
        ...


def sized_chunks(
    entries: Iterable[tuple[str, dict[str, Any]]], max_requests: int, max_bytes: int
) -> Iterator[tuple[list[str], list[dict[str, Any]], int]]:
    """(keys, entries, bytes) chunks of at most `max_requests` entries whose JSON adds up
    to at most `max_bytes`; EndpointError for an entry that alone is larger."""
    keys: list[str] = []
    chunk: list[dict[str, Any]] = []
    size = 0
    for key, entry in entries:
        length = len(orjson.dumps(entry, default=_as_sent)) + _ENTRY_OVERHEAD_BYTES
        if length > max_bytes:
            raise EndpointError(
                f"request {key} alone is {length} bytes, over batch_max_bytes ({max_bytes})"
            )
        if keys and (len(keys) == max_requests or size + length > max_bytes):
            yield keys, chunk, size
            keys, chunk, size = [], [], 0
        keys.append(key)
        chunk.append(entry)
        size += length
    if keys:
        yield keys, chunk, size


def _as_sent(value: Any) -> Any:
    """Bytes (inline media) as the SDK sends them: base64 text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass
class ProviderBatchJobs:
    """Submits requests as provider batches and collects their answers, for one endpoint
    (the interface of batch_api.BatchJobs)."""

    config: EndpointConfig
    api: ProviderBatchAPI
    ledger: BatchLedger
    namespace: str

    async def answer(
        self, pending: dict[str, ChatRequest], on_answer: Callable[[str, ChatResult], None]
    ) -> dict[str, str]:
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
        submitted = []
        for keys, entries, size in sized_chunks(
            self._entries(fresh, pending, on_answer), self.api.max_requests, self.api.max_bytes
        ):
            submitted.append(await self._submit(keys, entries, size))
        return await self._collect([*resumed, *submitted], pending, on_answer)

    def _entries(
        self,
        keys: list[str],
        pending: dict[str, ChatRequest],
        on_answer: Callable[[str, ChatResult], None],
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        for key in keys:
            try:
                yield key, self.api.entry(key, pending[key])
            except MediaError as error:  # this row's own failure, not the batch's
                on_answer(key, ChatResult.failure(str(error), model=self.config.model))

    async def _submit(self, keys: list[str], entries: list[dict[str, Any]], size: int):
        batch_id = await self._retrying("create batch", lambda: self.api.create(entries))
        batch = SubmittedBatch(
            id=batch_id,
            namespace=self.namespace,
            model=self.config.model,
            custom_ids=tuple(keys),
            submitted_at=time.time(),
        )
        self.ledger.add(batch)  # before any wait: a killed run resumes this batch
        logger.info(
            "%s: submitted batch %s with %d requests (%d bytes)",
            self.config.describe(),
            batch_id,
            len(keys),
            size,
        )
        return batch

    async def _collect(
        self,
        batches: list[SubmittedBatch],
        pending: dict[str, ChatRequest],
        on_answer: Callable[[str, ChatResult], None],
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
                results = await self._retrying(
                    f"results of batch {batch_id}", lambda b=batch_id: self.api.results(b)
                )
                answered: dict[str, str] = {}
                for key, result in results:
                    if result.ok:
                        result.via_batch = True
                        on_answer(key, result)
                        answered[key] = ""
                    else:
                        answered.setdefault(key, result.error or "no result")
                reason = state.reason or f"batch {batch_id} {state.status}"
                for key in batch.custom_ids:
                    if key in pending and answered.get(key) != "":
                        unanswered[key] = f"{reason}: {answered.get(key) or 'no result'}"
                self.ledger.remove(batch_id)
                del waiting[batch_id]
            logger.info(
                "%s: batches %s; requests %d of %d succeeded, %d failed",
                self.config.describe(),
                ", ".join(f"{n} {status}" for status, n in sorted(statuses.items())),
                succeeded,
                total,
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
            return await self._retrying(
                f"retrieve batch {batch_id}", lambda: self.api.state(batch_id)
            )
        except EndpointError as error:
            raise EndpointError(
                f"{error}; batch {batch_id} is recorded in {self.ledger.path}: if the "
                "provider no longer knows it, remove its entry and its requests are submitted anew"
            ) from None

    async def _retrying(self, what: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """`call()` with the endpoint's retries; EndpointError naming `what` when it fails."""
        problem = ""
        for attempt in range(self.config.max_retries + 1):
            try:
                return await call()
            except RetryableError as error:
                problem = str(error)
                if attempt == self.config.max_retries:
                    break
                await asyncio.sleep(self.config.backoff_s(attempt, error.retry_after))
            except EndpointError as error:
                problem = str(error)
                break
        raise EndpointError(f"{self.config.describe()}: {what} failed: {redact(problem)}")
