"""What the backends reached through a provider's own SDK share (`anthropic`, `gemini`).

Each is a `RequestBackend` whose calls go through the provider's official SDK, one SDK
client per event loop, with the SDK's retries off (the client's own are bounded and
jittered). Alike in both: where the API is (`ProviderOptions.resolved_base_url`), the
preflight over HTTP, `mode: batch` through the provider's batches
(backends/provider_batches.py), and what an SDK error becomes. `classify` says whether a
failure is worth retrying (RetryableError), stops the endpoint (EndpointError) or is the
request's own; a request's own failure answers a chat call with a failed result
(`own_failure`) and fails a batch control call with EndpointError (`ProviderSDKBatches`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar

from llm_feedback.backends.base import BackendTraits, EndpointConfig
from llm_feedback.backends.contract import ChatResult
from llm_feedback.backends.preflight import probe_over_http
from llm_feedback.backends.provider_batches import ProviderBatchAPI, ProviderBatchJobs
from llm_feedback.core.errors import EndpointError

if TYPE_CHECKING:
    from llm_feedback.backends.batch_api import BatchLedger
    from llm_feedback.backends.openai_backend import ProbeAnswer


class ProviderSDKBackend(BackendTraits):
    """A backend on a provider's own SDK (a `RequestBackend`). A subclass sets `name` and
    `options_type` (a `ProviderOptions`) and gives `make_sdk_client`, `sdk_errors`,
    `status_message`, `classify`, `send`, `ask` and `batch_api`."""

    is_batch = False
    default_concurrency = 32
    #: The backend's name, the first part of its cache namespace.
    name: ClassVar[str] = ""

    def __init__(self, config: EndpointConfig) -> None:
        """Keep the endpoint; the SDK client is made on the client's event loop.

        Args:
            config: The endpoint.
        """
        self.config = config
        self.model = config.model
        self._base_url = config.options.resolved_base_url()

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """The preflight: the API answers over HTTP with the endpoint's key.

        Args:
            config: The endpoint.
            timeout_s: How long to wait for the answer.
        """
        probe_over_http(config, timeout_s)

    @classmethod
    def uses_batch_api(cls, config: EndpointConfig) -> bool:
        """Whether the endpoint's calls go through the provider's batch API.

        Args:
            config: The endpoint.

        Returns:
            True for `mode: batch`.
        """
        return config.options.mode == "batch"

    @property
    def cache_namespace(self) -> str:
        return f"{self.name}:{self._base_url}"

    def open(self) -> None:
        """Nothing to start for a remote API."""

    def close(self) -> None:
        """Nothing to stop for a remote API."""

    def sdk_errors(self) -> tuple[type[Exception], ...]:
        """The exceptions `classify` reads: the SDK's error answers and failed connections."""
        raise NotImplementedError

    def status_message(self, error: Exception) -> str:
        """An error answer as the one line a failed result or an EndpointError says.

        Args:
            error: One of `sdk_errors()` that carries an HTTP status.

        Returns:
            The line.
        """
        raise NotImplementedError

    def classify(self, error: Exception) -> Exception:
        """An SDK error as what the client acts on.

        Args:
            error: One of `sdk_errors()`.

        Returns:
            RetryableError (worth retrying), EndpointError (a rejected key), or the error
            itself (this request's own).
        """
        raise NotImplementedError

    def own_failure(self, error: Exception, started: float) -> ChatResult:
        """What a chat call the SDK raised `error` for answers.

        Args:
            error: One of `sdk_errors()`.
            started: When the call began (`time.perf_counter()`).

        Returns:
            The failed result, when the failure is the request's own; what `classify`
            makes of it otherwise (RetryableError, EndpointError) is raised.
        """
        verdict = self.classify(error)
        if verdict is error:
            return ChatResult.failure(
                self.status_message(error), time.perf_counter() - started, self.model
            )
        raise verdict from None

    async def probe(self, sdk: Any, timeout_s: float) -> bool:
        """Whether the API answers the preflight's question in time.

        Args:
            sdk: The SDK client.
            timeout_s: How long to wait.

        Returns:
            True when it answered with HTTP 200.
        """
        return (await self.ask(sdk, "models", timeout_s)).status == 200

    async def ask(self, sdk: Any, route: str, timeout_s: float) -> ProbeAnswer:
        """The preflight's question.

        Args:
            sdk: The SDK client.
            route: "models", or one token of chat.
            timeout_s: How long to wait.

        Returns:
            The answer's status and body.
        """
        raise NotImplementedError

    def batch_api(self, sdk: Any) -> ProviderBatchAPI:
        """The provider's batch calls.

        Args:
            sdk: The SDK client they go through.

        Returns:
            The batch API.
        """
        raise NotImplementedError

    def batch_jobs(self, sdk: Any, ledger: BatchLedger) -> ProviderBatchJobs:
        """The batch jobs of this endpoint (`mode: batch`).

        Args:
            sdk: The SDK client of the client's event loop.
            ledger: Where submitted batches are recorded until collected.

        Returns:
            The jobs that answer the requests the cache did not.
        """
        return ProviderBatchJobs(self.config, self.batch_api(sdk), ledger, self.cache_namespace)


class ProviderSDKBatches:
    """A `ProviderSDKBackend`'s batch calls (a `ProviderBatchAPI`) through its SDK client,
    within the endpoint's batch limits; a subclass gives entry, create, state and results."""

    def __init__(self, backend: ProviderSDKBackend, sdk: Any) -> None:
        """Keep the backend and its SDK client, and the endpoint's batch limits.

        Args:
            backend: The backend whose errors and settings the calls use.
            sdk: Its SDK client.
        """
        self._backend = backend
        self._sdk = sdk
        options = backend.config.options
        self.max_requests = options.batch_max_requests
        self.max_bytes = options.batch_max_bytes

    async def _call(self, call: Awaitable[Any]) -> Any:
        """A control call's answer: RetryableError for a failure worth retrying,
        EndpointError for any other."""
        try:
            return await call
        except self._backend.sdk_errors() as error:
            verdict = self._backend.classify(error)
            if verdict is error:
                raise EndpointError(self._backend.status_message(error)) from None
            raise verdict from None
