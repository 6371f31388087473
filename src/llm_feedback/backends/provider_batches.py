"""Batch APIs reached through a provider's own SDK: Anthropic Message Batches and Gemini
batch mode (`mode: batch` on an `anthropic` or `gemini` endpoint).

The same cycle as the OpenAI / Azure Batch API's (`batch_api.LedgerBatchJobs`): `LLMClient`
hands over the requests the cache did not answer; they are split into batches within the
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
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import orjson

from llm_feedback.backends.base import EndpointConfig, RetryableError
from llm_feedback.backends.batch_api import (
    BatchLedger,
    BatchState,
    LedgerBatchJobs,
    OnAnswer,
    SubmittedBatch,
    batch_chunks,
)
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.media import MediaError
from llm_feedback.backends.options import BackendOptions, bounds
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import ConfigError, EndpointError

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
        """The batch polling interval is within its maximum.

        Args:
            where: Where the options stand in the configuration, for error messages.

        Raises:
            ConfigError: `batch_poll_seconds` exceeds `batch_poll_max_seconds`.
        """
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


class ProviderBatchAPI(Protocol):
    """One provider's batch calls; each raises RetryableError for a failure worth
    retrying and EndpointError for one that is not."""

    #: Most requests and bytes one batch may hold (the endpoint's limits).
    max_requests: int
    max_bytes: int

    def entry(self, key: str, request: ChatRequest) -> dict[str, Any]:
        """`request` as the batch body holds it, known by `key`; MediaError if its media
        cannot be read.

        Args:
            key: The request's cache key.
            request: The request.

        Returns:
            The batch entry.

        Raises:
            MediaError: An attachment cannot be read.
        """
        ...

    async def create(self, entries: list[dict[str, Any]]) -> str:
        """Submit one batch; its id.

        Args:
            entries: The batch's entries (`entry`).

        Returns:
            The batch's id.
        """
        ...

    async def state(self, batch_id: str) -> BatchState:
        """Where the batch stands.

        Args:
            batch_id: The batch's id.

        Returns:
            Its state.
        """
        ...

    async def results(self, batch_id: str) -> list[tuple[str, ChatResult]]:
        """(key, result) for every request of a finished batch that has a result.

        Args:
            batch_id: The batch's id.

        Returns:
            (cache key, result) pairs.
        """
        ...


def _as_sent(value: Any) -> Any:
    """Bytes (inline media) as the SDK sends them: base64 text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


@dataclass
class ProviderBatchJobs(LedgerBatchJobs):
    """Submits requests as provider batches and collects their answers, for one endpoint."""

    config: EndpointConfig
    api: ProviderBatchAPI
    ledger: BatchLedger
    namespace: str

    async def _submit(
        self, keys: list[str], pending: dict[str, ChatRequest], on_answer: OnAnswer
    ) -> list[SubmittedBatch]:
        sized = (
            (key, entry, len(orjson.dumps(entry, default=_as_sent)) + _ENTRY_OVERHEAD_BYTES)
            for key, entry in self._entries(keys, pending, on_answer)
        )
        submitted = []
        for chunk_keys, entries, size in batch_chunks(
            sized, self.api.max_requests, self.api.max_bytes
        ):
            batch_id = await self._retrying(
                "create batch", lambda chunk=entries: self.api.create(chunk)
            )
            submitted.append(self._record(batch_id, chunk_keys, size))
        return submitted

    def _entries(
        self, keys: list[str], pending: dict[str, ChatRequest], on_answer: OnAnswer
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        for key in keys:
            try:
                yield key, self.api.entry(key, pending[key])
            except MediaError as error:  # this row's own failure, not the batch's
                on_answer(key, ChatResult.failure(str(error), model=self.config.model))

    async def _retrieve(self, batch_id: str) -> BatchState:
        return await self._retrying(f"retrieve batch {batch_id}", lambda: self.api.state(batch_id))

    async def _results(
        self, batch: SubmittedBatch, state: BatchState, pending: dict[str, ChatRequest]
    ) -> AsyncIterator[tuple[str, ChatResult]]:
        results = await self._retrying(
            f"results of batch {batch.id}", lambda: self.api.results(batch.id)
        )
        for answer in results:
            yield answer

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
