"""The lean transport for OpenAI-compatible chat completions (the default for `openai` and
`azure` endpoints; `transport: sdk` selects the openai SDK instead).

One pooled aiohttp session posts a prebuilt JSON body (orjson) and decodes only the fields
the contract needs. The SDK spends most of its CPU per call on request transformation,
type checks and response models, and even its HTTP layer (httpx) costs ~1.4 ms per call
where aiohttp's C parser costs ~0.3 ms (benchmarks/RESULTS.md): at hundreds of calls per
second that CPU, not the server, sets the pace. Retries, timeouts, Retry-After, redaction
and accounting stay in `LLMClient`, exactly as for the SDK path: both transports send the
same bodies and raise or return the same errors.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx2
import orjson
import yarl

from llm_feedback.backends.base import RetryableError
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.media import MediaError
from llm_feedback.backends.openai_backend import (
    _RETRYABLE_STATUS,
    OpenAICompatibleBackend,
    _retry_after_seconds,
    redact,
)

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


class TransportTimeout(Exception):
    """The server did not answer within the endpoint's timeout."""


class TransportFailure(Exception):
    """The request did not reach the server, or its answer did not arrive whole."""


@dataclass(frozen=True, slots=True)
class LeanResponse:
    status: int
    headers: Any  # case-insensitive mapping
    content: bytes


class LeanConnection:
    """An HTTP connection pool and the API's URLs, for one event loop.

    `api_url(route)` is any other route of the same API (`files`, `batches/...`): under
    `/v1` for OpenAI, under `/openai` with the `api-version` query for Azure.
    """

    def __init__(self, session: aiohttp.ClientSession, chat_url: str, api_root: str, query: str):
        self.session = session
        self.chat_url = chat_url
        self._api_root = api_root
        self._query = query
        self.models_url = self.api_url("models")

    def api_url(self, route: str) -> str:
        return f"{self._api_root}/{route}{self._query}"

    async def request(
        self, method: str, url: str, timeout_s: float | None = None, **kwargs: Any
    ) -> LeanResponse:
        """One HTTP exchange, its body read whole; raises `TransportTimeout` or
        `TransportFailure` (their messages name the cause), never an aiohttp error."""
        if timeout_s is not None:
            kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with self.session.request(method, url, **kwargs) as response:
                return LeanResponse(response.status, response.headers, await response.read())
        except asyncio.TimeoutError as error:
            raise TransportTimeout(str(error) or "Request timed out.") from None
        except aiohttp.ClientError as error:
            raise TransportFailure(f"{type(error).__name__}: {error}") from None

    async def close(self) -> None:
        await self.session.close()


def environment_proxy(url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy that HTTPS_PROXY / HTTP_PROXY / NO_PROXY name for `url`, and its
    credentials. Read once per session: aiohttp's own `trust_env` reads the environment
    and ~/.netrc on a thread for every request, which costs more CPU than the request."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None, None
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy:
        return None, None
    return proxy, aiohttp.BasicAuth.from_url(yarl.URL(proxy))


_UNREADABLE = (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError, ValueError)


def chat_result(payload: Any, latency_s: float, model: str) -> ChatResult:
    """A decoded chat completion body as a result; raises one of `_UNREADABLE` when the
    body is not a chat completion."""
    choice = payload["choices"][0]
    message = choice.get("message") or {}
    usage = payload.get("usage") or {}
    text = message.get("content")
    return ChatResult(
        text=text,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency_s,
        model=model,
        error=None if text is not None else "empty reply",
    )


def _error_message(status: int, content: bytes | Any) -> str:
    """The SDK's wording ("Error code: 429 - <server message>"), so logs read the same.
    `content` is the raw body, or a body already decoded (a batch's error line)."""
    try:
        payload = orjson.loads(content) if isinstance(content, bytes) else content
    except orjson.JSONDecodeError:
        payload = None
    detail: Any = payload
    if isinstance(payload, dict):
        error = payload.get("error")
        detail = error.get("message", error) if isinstance(error, dict) else payload
    if detail is None:
        detail = str(content, "utf-8", "replace")[:500]
    return f"Error code: {status} - {detail}"


class LeanOpenAIBackend(OpenAICompatibleBackend):
    """OpenAI, Azure (key auth), `vllm serve`, llama.cpp: any chat completions server."""

    def make_sdk_client(self) -> LeanConnection:
        """Called on the loop that will use it (an aiohttp session belongs to one loop)."""
        limit = max(self.config.concurrency, 100)
        key = self.config.api_key()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.backend == "azure":
            api_root = f"{self.config.resolved_azure_endpoint()}/openai"
            query = f"?api-version={self.config.resolved_api_version()}"
            chat_url = f"{api_root}/deployments/{self.model}/chat/completions{query}"
            if key:
                headers["api-key"] = key
        else:
            api_root, query = (self._base_url or DEFAULT_OPENAI_URL).rstrip("/"), ""
            chat_url = f"{api_root}/chat/completions"
            if key:
                headers["Authorization"] = f"Bearer {key}"
        proxy, proxy_auth = environment_proxy(chat_url)
        session = aiohttp.ClientSession(
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=self.config.timeout_s),
            connector=aiohttp.TCPConnector(
                limit=limit,
                # The SDK's own trust (SSL_CERT_FILE / SSL_CERT_DIR, the system's store):
                # both transports accept the same servers.
                ssl=httpx2.create_ssl_context() if chat_url.startswith("https:") else True,
            ),
            proxy=proxy,
            proxy_auth=proxy_auth,
        )
        return LeanConnection(session, chat_url, api_root, query)

    async def send(self, connection: LeanConnection, request: ChatRequest) -> ChatResult:
        try:
            body = orjson.dumps(self.request_body(request))
        except MediaError as error:
            return ChatResult.failure(str(error), model=self.model)
        started = time.perf_counter()
        try:
            response = await connection.request("POST", connection.chat_url, data=body)
        except TransportTimeout as error:
            raise RetryableError(redact(f"APITimeoutError: {error}"), timed_out=True) from None
        except TransportFailure as error:
            raise RetryableError(redact(f"APIConnectionError: {error}")) from None
        latency = time.perf_counter() - started
        status = response.status
        if status != 200:
            message = redact(f"HTTP {status}: {_error_message(status, response.content)}")
            if status in _RETRYABLE_STATUS:
                raise RetryableError(message, _retry_after_seconds(response.headers))
            return ChatResult.failure(message, latency, self.model)
        try:
            return chat_result(orjson.loads(response.content), latency, self.model)
        except _UNREADABLE as error:
            # A body that is not a chat completion: the server misbehaved, try again.
            raise RetryableError(redact(f"malformed response: {error!r}")) from None

    async def probe(self, connection: LeanConnection, timeout_s: float) -> bool:
        try:
            response = await connection.request("GET", connection.models_url, timeout_s)
        except (TransportTimeout, TransportFailure):
            return False
        return response.status == 200


def openai_compatible(config: Any) -> OpenAICompatibleBackend:
    """The `openai` / `azure` backend of an endpoint, by its `transport`."""
    if config.transport == "sdk":
        return OpenAICompatibleBackend(config)
    return LeanOpenAIBackend(config)


# The registry reads these from the factory (see backends/base.py).
openai_compatible.is_batch = False  # type: ignore[attr-defined]
openai_compatible.default_concurrency = OpenAICompatibleBackend.default_concurrency  # type: ignore[attr-defined]
