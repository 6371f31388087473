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
import logging
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, ClassVar

import aiohttp
import httpx2
import orjson
import yarl

from llm_feedback.backends.base import EndpointConfig, RetryableError
from llm_feedback.backends.context_length import context_length_code
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.media import MediaError
from llm_feedback.backends.openai_backend import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    AzureEndpoint,
    AzureSDKBackend,
    OpenAICompatibleBackend,
    ProbeAnswer,
    ReplyTooLarge,
    auth_failure,
    kept_logprobs,
    ping_body,
    reply_fields,
    retry_after_seconds,
    too_large_message,
)
from llm_feedback.backends.options import DEFAULT_OPENAI_URL, AzureOptions
from llm_feedback.backends.secrets import redact

logger = logging.getLogger(__name__)

# A models list (OpenRouter's names hundreds) is read whole, but not without end.
PROBE_MAX_BYTES = 16 * 1024 * 1024


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
        """A connection over an open aiohttp session.

        Args:
            session: The session (its connection pool) of the client's event loop.
            chat_url: The chat completions URL.
            api_root: The API's root URL, other routes below it.
            query: The query string every API URL ends with ("" for none).
        """
        self.session = session
        self.chat_url = chat_url
        self._api_root = api_root
        self._query = query
        self.models_url = self.api_url("models")

    def api_url(self, route: str) -> str:
        """The URL of another route of the same API.

        Args:
            route: The route below the API's root (`files`, `batches/...`).

        Returns:
            The full URL, query included.
        """
        return f"{self._api_root}/{route}{self._query}"

    async def request(
        self,
        method: str,
        url: str,
        timeout_s: float | None = None,
        max_bytes: int | None = None,
        **kwargs: Any,
    ) -> LeanResponse:
        """One HTTP exchange, its body read whole (up to `max_bytes`, counted after
        decompression as it arrives: `ReplyTooLarge` beyond); raises `TransportTimeout` or
        `TransportFailure` (their messages name the cause), never an aiohttp error.

        Args:
            method: The HTTP method.
            url: The URL.
            timeout_s: The exchange's total timeout; None for the session's.
            max_bytes: The largest body accepted; None for no limit.
            **kwargs: Further arguments of aiohttp's `request` (`data`, `headers`, ...).

        Returns:
            The status, headers and body.

        Raises:
            TransportTimeout: The exchange ran past its timeout.
            TransportFailure: The request did not reach the server or the answer did not arrive
                whole.
            ReplyTooLarge: The body was larger than `max_bytes`.
        """
        if timeout_s is not None:
            kwargs["timeout"] = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with self.session.request(method, url, **kwargs) as response:
                if max_bytes is None:
                    content = await response.read()
                else:
                    content = await _read_capped(response, max_bytes)
                return LeanResponse(response.status, response.headers, content)
        except asyncio.TimeoutError as error:
            raise TransportTimeout(str(error) or "Request timed out.") from None
        except aiohttp.ClientError as error:
            raise TransportFailure(f"{type(error).__name__}: {error}") from None

    async def close(self) -> None:
        await self.session.close()


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        response.close()  # the connection is dropped, its body never read
        raise ReplyTooLarge(f"the server announced {declared} bytes")
    if declared is not None and response.headers.get("Content-Encoding", "identity") == "identity":
        # A declared length within the cap bounds what aiohttp reads: one read, no chunking
        # (not so for a compressed body, which may inflate past the cap).
        return await response.read()
    parts, size = [], 0
    async for part in response.content.iter_chunked(256 * 1024):
        size += len(part)
        if size > max_bytes:
            response.close()
            raise ReplyTooLarge(f"more than {max_bytes} bytes arrived")
        parts.append(part)
    return b"".join(parts)


def environment_proxy(url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy that HTTPS_PROXY / HTTP_PROXY / NO_PROXY name for `url`, and its
    credentials. Read once per session: aiohttp's own `trust_env` reads the environment
    and ~/.netrc on a thread for every request, which costs more CPU than the request.

    Args:
        url: The URL the session will call.

    Returns:
        (proxy URL, its credentials), or (None, None) when no proxy applies.
    """
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None, None
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy:
        return None, None
    return proxy, aiohttp.BasicAuth.from_url(yarl.URL(proxy))


UNREADABLE = (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError, ValueError)


def chat_result(
    payload: Any, latency_s: float, model: str, request: ChatRequest | None = None
) -> ChatResult:
    """A decoded chat completion body as a result, with the log-probabilities `request`
    asked for; raises one of `UNREADABLE` when the body is not a chat completion.

    Args:
        payload: The decoded body.
        latency_s: Seconds the call took.
        model: The model that answered.
        request: The request answered; None to keep no log-probabilities.

    Returns:
        The result.
    """
    choice = payload["choices"][0]
    return ChatResult(
        finish_reason=choice.get("finish_reason"),
        latency_s=latency_s,
        model=model,
        label_logprobs=None if request is None else kept_logprobs(payload, request),
        **reply_fields(
            choice.get("message") or {}, payload.get("usage"), choice.get("finish_reason")
        ),
    )


def error_message(status: int, content: bytes | Any) -> str:
    """The SDK's wording ("Error code: 429 - <server message>"), so logs read the same.
    `content` is the raw body, or a body already decoded (a batch's error line).

    Args:
        status: The HTTP status.
        content: The raw body, or a decoded one.

    Returns:
        The message, with a context-length error's code in front of the server's message.
    """
    try:
        payload = orjson.loads(content) if isinstance(content, bytes) else content
    except orjson.JSONDecodeError:
        payload = None
    detail: Any = payload
    if isinstance(payload, dict):
        error = payload.get("error")
        detail = error.get("message", error) if isinstance(error, dict) else payload
        codes = (error.get("code"), error.get("type")) if isinstance(error, dict) else ()
        code = context_length_code(*codes)
        if code is not None:  # kept: the client tells this refusal by its code
            detail = f"{code}: {detail}"
    if detail is None:
        detail = str(content, "utf-8", "replace")[:500]
    return f"Error code: {status} - {detail}"


class LeanOpenAIBackend(OpenAICompatibleBackend):
    """OpenAI, `vllm serve`, llama.cpp: any chat completions server (`backend: openai`).

    The registered kind of `openai` endpoints: `transport: sdk` builds the SDK backend."""

    sdk_backend: ClassVar[type[OpenAICompatibleBackend]] = OpenAICompatibleBackend

    @classmethod
    def build(cls, config: EndpointConfig) -> OpenAICompatibleBackend:
        """This backend, or the SDK backend for `transport: sdk`.

        Args:
            config: The endpoint.

        Returns:
            The backend.
        """
        return cls.sdk_backend(config) if config.options.transport == "sdk" else cls(config)

    @classmethod
    def sends_from_worker_processes(cls, config: EndpointConfig) -> bool:
        """Large streams are sent from worker processes on the lean transport only.

        Args:
            config: The endpoint.

        Returns:
            Whether the endpoint's transport is lean.
        """
        return config.options.transport == "lean"

    @classmethod
    def uses_batch_api(cls, config: EndpointConfig) -> bool:
        """Misses go through the Batch API in `mode: batch`.

        Args:
            config: The endpoint.

        Returns:
            Whether the endpoint's mode is batch.
        """
        return config.options.mode == "batch"

    def _routes(self, key: str | None) -> tuple[str, str, str, dict[str, str]]:
        """(API root, query, chat URL, auth headers) of this endpoint."""
        api_root = (self._base_url or DEFAULT_OPENAI_URL).rstrip("/")
        return api_root, "", f"{api_root}/chat/completions", _bearer(key)

    def make_sdk_client(self) -> LeanConnection:
        """Called on the loop that will use it (an aiohttp session belongs to one loop)."""
        limit = max(self.config.concurrency, 100)
        api_root, query, chat_url, auth = self._routes(self.config.api_key())
        api_root, chat_url, basic_auth = _without_userinfo(api_root), *_userinfo_auth(chat_url)
        if basic_auth is not None and "Authorization" in auth:
            # One Authorization header per request: the key's Bearer wins.
            logger.warning(
                "%s: its base_url's user:password is not sent (the key's Bearer header is)",
                self.config.describe(),
            )
        elif basic_auth is not None:
            auth = {**auth, "Authorization": basic_auth.encode()}
        headers = {"Content-Type": "application/json", "Accept": "application/json", **auth}
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

    async def send(
        self, connection: LeanConnection, request: ChatRequest, timeout_s: float | None = None
    ) -> ChatResult:
        """Answer one request over the lean transport, its reply read up to the endpoint's
        byte limit.

        Args:
            connection: The connection of the client's event loop.
            request: The request.
            timeout_s: This request's own timeout (default: the endpoint's).

        Returns:
            The result; a failed one for an unreadable attachment, a reply too large or an
            HTTP error not worth retrying.

        Raises:
            EndpointError: The endpoint rejected the key or refused access (401/403).
            RetryableError: A retryable status, a timeout, a connection failure or a malformed
                reply.
        """
        try:
            body = orjson.dumps(self.request_body(request))
        except MediaError as error:
            return ChatResult.failure(str(error), model=self.model)
        started = time.perf_counter()
        limit = self.config.reply_byte_limit(request.token_budget)
        try:
            response = await connection.request(
                "POST", connection.chat_url, timeout_s, max_bytes=limit, data=body
            )
        except TransportTimeout as error:
            raise RetryableError(redact(f"APITimeoutError: {error}"), timed_out=True) from None
        except TransportFailure as error:
            raise RetryableError(redact(f"APIConnectionError: {error}")) from None
        except ReplyTooLarge as error:
            return ChatResult.failure(
                too_large_message(self.config, error, limit, request.max_tokens),
                time.perf_counter() - started,
                self.model,
            )
        latency = time.perf_counter() - started
        status = response.status
        if self.on_headers is not None:
            self.on_headers(response.headers)
        if status != 200:
            message = redact(f"HTTP {status}: {error_message(status, response.content)}")
            if status in AUTH_STATUS:
                raise auth_failure(self.config, status, message)
            if status in RETRYABLE_STATUS:
                raise RetryableError(message, retry_after_seconds(response.headers))
            return ChatResult.failure(message, latency, self.model)
        try:
            return chat_result(orjson.loads(response.content), latency, self.model, request)
        except UNREADABLE as error:
            # A body that is not a chat completion: the server misbehaved, try again.
            raise RetryableError(redact(f"malformed response: {error!r}")) from None

    async def probe(self, connection: LeanConnection, timeout_s: float) -> bool:
        """Whether the server answers a model listing within `timeout_s`.

        Args:
            connection: The connection of the client's event loop.
            timeout_s: Seconds to wait.

        Returns:
            True when it answered 200; False otherwise.
        """
        try:
            response = await connection.request("GET", connection.models_url, timeout_s)
        except (TransportTimeout, TransportFailure):
            return False
        return response.status == 200

    async def ask(self, connection: LeanConnection, route: str, timeout_s: float) -> ProbeAnswer:
        """The preflight's question (`GET models`, or one token of chat), on this transport.

        Args:
            connection: The connection.
            route: "models" to list the models; anything else asks one token of chat.
            timeout_s: Seconds to wait.

        Returns:
            The HTTP status and message it got (status None when nothing answered).
        """
        if route == "models":
            method, url, kwargs = "GET", connection.models_url, {}
        else:
            method, url = "POST", connection.chat_url
            kwargs = {"data": orjson.dumps(ping_body(self.config))}
        try:
            response = await connection.request(
                method, url, timeout_s, max_bytes=PROBE_MAX_BYTES, **kwargs
            )
        except TransportTimeout:
            return ProbeAnswer(None, "timed out", timed_out=True)
        except (TransportFailure, ReplyTooLarge) as error:
            return ProbeAnswer(None, redact(str(error)))
        if response.status == 200:
            return ProbeAnswer(200, "")
        return ProbeAnswer(
            response.status, redact(error_message(response.status, response.content))
        )


class LeanAzureBackend(AzureEndpoint, LeanOpenAIBackend):
    """An Azure OpenAI resource with key auth (`backend: azure`), its deployment named by
    `model`; `transport: sdk` builds the SDK backend."""

    options_type: ClassVar[type] = AzureOptions
    sdk_backend: ClassVar[type[OpenAICompatibleBackend]] = AzureSDKBackend

    def _routes(self, key: str | None) -> tuple[str, str, str, dict[str, str]]:
        api_root = f"{self._base_url}/openai"
        query = f"?api-version={self.config.options.resolved_api_version()}"
        chat_url = f"{api_root}/deployments/{self.model}/chat/completions{query}"
        return api_root, query, chat_url, {"api-key": key} if key else {}


def _without_userinfo(url: str) -> str:
    return str(yarl.URL(url).with_user(None))


def _userinfo_auth(url: str) -> tuple[str, aiohttp.BasicAuth | None]:
    """`url` without its `user:password@`, and that as Basic auth (aiohttp refuses a URL
    with credentials beside an Authorization header)."""
    parsed = yarl.URL(url)
    if parsed.user is None:
        return url, None
    auth = aiohttp.BasicAuth(parsed.user, parsed.password or "")
    return str(parsed.with_user(None)), auth


def _bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}
