"""OpenAI-compatible chat completions: OpenAI, Azure, `vllm serve`, llama.cpp, the local model."""

from __future__ import annotations

import email.utils
import logging
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import httpx2
import orjson

from llm_feedback.backends.base import BackendTraits, EndpointConfig, RetryableError
from llm_feedback.backends.context_length import context_length_code
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.error_bodies import cap_error_body
from llm_feedback.backends.media import MediaError, openai_content
from llm_feedback.backends.options import DEFAULT_OPENAI_URL, AzureOptions, OpenAIOptions
from llm_feedback.backends.preflight import probe_over_http
from llm_feedback.backends.reasoning import (
    billed_completion_tokens,
    is_reasoning_model,
    reasoning_tokens,
    split_thinking,
)
from llm_feedback.backends.secrets import redact
from llm_feedback.backends.token_logprobs import label_entries
from llm_feedback.core.errors import ConfigError, EndpointError

if TYPE_CHECKING:
    import openai

# `openai` is imported inside the functions that use it (the `transport: sdk` path): the
# default lean transport never does, and importing the SDK costs most of a second of every
# `kedro run`'s start-up.

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: A rejected key or refused access: the endpoint stops at the first one.
AUTH_STATUS = frozenset({401, 403})
# RFC 9110 allows whole seconds; servers that send decimals ("0.5") are taken at their word.
_DELTA_SECONDS = re.compile(r"\d+(\.\d+)?")
_warned_retry_after: set[str] = set()

__all__ = ["OpenAICompatibleBackend", "RetryableError", "redact", "response_format_for"]


def _ignored_retry_after(name: str, value: str) -> None:
    if value not in _warned_retry_after:
        _warned_retry_after.add(value)
        logger.warning("ignoring %s: %r (neither seconds nor an HTTP-date)", name, value[:80])


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a 429/503 asks for: `retry-after-ms` (OpenAI's), else `Retry-After` as
    delta-seconds or an HTTP-date (RFC 9110 10.2.3); anything else is ignored, saying so.

    Args:
        headers: The response's headers; None when there were none.

    Returns:
        Seconds to wait (0 for a date already past), or None when no usable header came.
    """
    if headers is None:
        return None
    value = (headers.get("retry-after-ms") or "").strip()
    if value:
        if _DELTA_SECONDS.fullmatch(value):
            return float(value) / 1000.0
        _ignored_retry_after("retry-after-ms", value)
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    if _DELTA_SECONDS.fullmatch(value):
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        moment = None
    if moment is None or moment.tzinfo is None:
        _ignored_retry_after("Retry-After", value)
        return None
    return max(0.0, moment.timestamp() - time.time())


def auth_failure(config: EndpointConfig, status: int, message: str) -> EndpointError:
    """The error that stops an endpoint at its first 401/403, naming where its key
    comes from.

    Args:
        config: The endpoint.
        status: The HTTP status (401 or 403).
        message: The server's (redacted) message.

    Returns:
        The error to raise.
    """
    return EndpointError(
        f"{config.describe()} {'rejects the key' if status == 401 else 'refuses access'} "
        f"({message}): check {config.key_source()}; nothing more is sent to it"
    )


@dataclass(frozen=True)
class ProbeAnswer:
    """What the preflight's one question got: an HTTP status (None: no answer at all)."""

    status: int | None
    message: str
    timed_out: bool = False


class ReplyTooLarge(Exception):
    """The reply's body (as declared, or as it arrived and was decompressed) exceeded
    the endpoint's limit; it was cut off, not buffered."""


def too_large_message(config: EndpointConfig, error: ReplyTooLarge, limit: int, max_tokens: int):
    """The failure message of a reply larger than the endpoint allows.

    Args:
        config: The endpoint.
        error: The error that cut the reply off.
        limit: The byte limit that applied.
        max_tokens: The request's answer budget the limit was derived from.

    Returns:
        The message, naming the setting that raises the limit.
    """
    return (
        f"reply too large: {error}, beyond the {limit} bytes allowed for "
        f"max_tokens={max_tokens} ({config.where}.max_reply_bytes)"
    )


async def read_capped(response: httpx2.Response, max_bytes: int) -> bytes:
    """The body of a streamed httpx response, up to `max_bytes` counted after
    decompression as it arrives (`ReplyTooLarge` beyond: the rest is never read).

    Args:
        response: The streamed response.
        max_bytes: The largest body accepted.

    Returns:
        The body.

    Raises:
        ReplyTooLarge: The body announced or reached more than `max_bytes`.
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ReplyTooLarge(f"the server announced {declared} bytes")
    parts, size = [], 0
    async for part in response.aiter_bytes():
        size += len(part)
        if size > max_bytes:
            raise ReplyTooLarge(f"more than {max_bytes} bytes arrived")
        parts.append(part)
    return b"".join(parts)


def completion_from(content: bytes) -> openai.types.chat.ChatCompletion:
    """A chat completion from its JSON body, as leniently as the SDK itself reads one.

    Args:
        content: The response body.

    Returns:
        The chat completion (fields not validated).

    Raises:
        ValueError: The body is not JSON, or not a JSON object.
    """
    import openai

    body = orjson.loads(content)
    if not isinstance(body, dict):
        raise ValueError(f"a JSON {type(body).__name__}, not an object")
    return openai.types.chat.ChatCompletion.construct(**body)


def kept_logprobs(payload: Any, request: ChatRequest) -> list[dict[str, Any]] | None:
    """What a decoded chat completion keeps of its log-probabilities for `request`
    (None when it asked for none or none came back).

    Args:
        payload: The decoded chat completion.
        request: The request it answers (its `top_logprobs` and `logprob_labels`).

    Returns:
        The top log-probabilities at the label tokens, or None.
    """
    if not request.top_logprobs:
        return None
    try:
        logprobs = payload["choices"][0].get("logprobs")
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return label_entries(logprobs, request.logprob_labels)


def ping_body(config: EndpointConfig) -> dict[str, Any]:
    """One token of chat: the preflight's question where a server has no models route.

    Args:
        config: The endpoint.

    Returns:
        The chat completions body.
    """
    return {
        "model": config.model,
        "messages": [{"role": "user", "content": "ping"}],
        config.max_tokens_key: 1,
    }


def reply_fields(message: Any, usage: Any, finish_reason: str | None) -> dict[str, Any]:
    """A decoded chat completion's `ChatResult` fields beyond its envelope: the answer
    after any thinking (backends/reasoning.py), the usage with reasoning tokens billed,
    and the error of a reply without an answer.

    Args:
        message: The choice's `message` object (a dict).
        usage: The body's `usage` object (a dict, or None).
        finish_reason: The choice's finish reason.

    Returns:
        `text`, `prompt_tokens`, `completion_tokens`, `reasoning_tokens`,
        `cached_prompt_tokens` and `error`.
    """
    text = message.get("content")
    if isinstance(text, str):
        text, _ = split_thinking(text)
    elif message.get("reasoning_content") or message.get("reasoning"):
        # Thought to the end of its budget: an answered call without a verdict.
        text = "" if finish_reason == "length" else None
    usage = usage if isinstance(usage, dict) else {}
    thinking = reasoning_tokens(usage)
    return {
        "text": text,
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": billed_completion_tokens(
            int(usage.get("completion_tokens") or 0), thinking
        ),
        "reasoning_tokens": thinking,
        "cached_prompt_tokens": cached_prompt_tokens(usage),
        "error": None if text is not None else "empty reply",
    }


def cached_prompt_tokens(usage: dict[str, Any]) -> int | None:
    """Of a chat completion's prompt, the tokens its server's prompt cache served.

    Args:
        usage: The body's `usage` object.

    Returns:
        `prompt_tokens_details.cached_tokens` (OpenAI bills them at a discount; vLLM reports
        its prefix cache's hits there), None where the reply does not say.
    """
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def response_format_for(schema: dict[str, Any]) -> dict[str, Any]:
    """The strict `json_schema` response format that constrains a reply to `schema`.

    Args:
        schema: The JSON schema of the reply.

    Returns:
        The `response_format` value of a chat completions body.
    """
    return {
        "type": "json_schema",
        "json_schema": {"name": "judgement", "schema": schema, "strict": True},
    }


class OpenAICompatibleBackend(BackendTraits):
    """Talks to any server that speaks the chat completions API through the openai SDK
    (`transport: sdk`; a `RequestBackend`)."""

    is_batch = False
    default_concurrency = 32
    options_type: ClassVar[type] = OpenAIOptions
    #: The route batch input lines name (backends/batch_api.py).
    batch_route: ClassVar[str] = "/v1/chat/completions"

    def __init__(self, config: EndpointConfig, base_url: str | None = None) -> None:
        """A backend for an OpenAI-compatible chat completions endpoint.

        Args:
            config: The endpoint.
            base_url: The server's base URL; None for the endpoint's configured one.
        """
        self.config = config
        self.model = config.model
        self._base_url = base_url or self._configured_base_url()

    def _configured_base_url(self) -> str | None:
        return self.config.options.resolved_base_url()

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """The preflight over HTTP (`probe_over_http`).

        Args:
            config: The endpoint.
            timeout_s: Seconds to wait for the server's answer.

        Raises:
            EndpointError: The server cannot be reached, or refuses in a way a run cannot get
                past.
        """
        probe_over_http(config, timeout_s)

    @classmethod
    def returns_logprobs(cls, config: EndpointConfig) -> bool:
        """Chat completions servers return them (OpenAI, vLLM, llama.cpp), except for
        reasoning models (see `logprobs_refusal`) and through a Batch API (whose lines are
        read without the request's labels).

        Args:
            config: The endpoint.

        Returns:
            Whether a request may ask for top log-probabilities.
        """
        if cls.uses_batch_api(config):
            return False
        return config.reasoning_judge is None

    @property
    def cache_namespace(self) -> str:
        return f"openai:{self._base_url or DEFAULT_OPENAI_URL}"

    def make_sdk_client(self) -> openai.AsyncOpenAI:
        """One SDK client per event loop: its connection pool belongs to that loop."""
        import openai

        # The SDK keeps 100 connections by default; a larger limit would churn sockets.
        limit = max(self.config.concurrency, 100)
        http_client = openai.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(max_connections=limit, max_keepalive_connections=limit),
            event_hooks={"response": [cap_error_body]},
        )
        return self._sdk_client(self.config.api_key(), http_client)

    def _sdk_client(self, key: str | None, http_client: Any) -> openai.AsyncOpenAI:
        import openai

        return openai.AsyncOpenAI(
            base_url=self._base_url,
            # Local and self-hosted servers need no key, but the SDK insists on one.
            api_key=key or "not-needed",
            max_retries=0,  # retries are ours: bounded, jittered, Retry-After aware
            timeout=self.config.timeout_s,
            http_client=http_client,
        )

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The chat completions body of `request`: what either transport sends.

        Attachments become `image_url` / `input_audio` parts; reading them raises
        `MediaError` if a file changed since it was checked.

        Args:
            request: The request.

        Returns:
            The body, as keyword arguments of the SDK's `create`.

        Raises:
            MediaError: An attached file changed since it was checked.
        """
        messages = [
            message
            if isinstance(message["content"], str)
            else {**message, "content": openai_content(message["content"])}
            for message in request.messages
        ]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if not is_reasoning_model(self.model):  # they refuse any temperature but 1
            body["temperature"] = request.temperature
            body["top_p"] = request.top_p
        # The answer's budget and the thinking's: a long thought still leaves the verdict room.
        body[self.config.max_tokens_key] = request.token_budget
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None and self.config.uses_structured_output:
            body["response_format"] = response_format_for(request.json_schema)
        if request.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = request.top_logprobs
        return body

    async def send(
        self, sdk: openai.AsyncOpenAI, request: ChatRequest, timeout_s: float | None = None
    ) -> ChatResult:
        """Answer one request through the SDK, its reply read up to the endpoint's byte limit.

        Args:
            sdk: The SDK client of the client's event loop.
            request: The request.
            timeout_s: This request's own timeout (default: the endpoint's).

        Returns:
            The result; a failed one for an unreadable attachment, a reply too large or an
            HTTP error not worth retrying.

        Raises:
            EndpointError: The endpoint rejected the key or refused access (401/403).
            RetryableError: A retryable status, a timeout, a connection error or a malformed
                reply.
        """
        import openai

        try:
            kwargs = self.request_body(request)
        except MediaError as error:
            return ChatResult.failure(str(error), model=self.model)
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        started = time.perf_counter()
        limit = self.config.reply_byte_limit(request.token_budget)
        try:
            async with sdk.chat.completions.with_streaming_response.create(**kwargs) as streamed:
                if self.on_headers is not None:
                    self.on_headers(streamed.http_response.headers)
                content = await read_capped(streamed.http_response, limit)
                response = completion_from(content)
        except ReplyTooLarge as error:
            return ChatResult.failure(
                too_large_message(self.config, error, limit, request.max_tokens),
                time.perf_counter() - started,
                self.model,
            )
        except openai.APIStatusError as error:
            if self.on_headers is not None:
                self.on_headers(error.response.headers)
            message = redact(f"HTTP {error.status_code}: {error.message}")
            code = context_length_code(getattr(error, "code", None), getattr(error, "type", None))
            if code is not None:  # kept: the client tells this refusal by its code
                message = f"{code}: {message}"
            if error.status_code in AUTH_STATUS:
                raise auth_failure(self.config, error.status_code, message) from None
            if error.status_code in RETRYABLE_STATUS:
                raise RetryableError(message, retry_after_seconds(error.response.headers)) from None
            return ChatResult.failure(message, time.perf_counter() - started, self.model)
        except (openai.APITimeoutError, openai.APIConnectionError) as error:
            raise RetryableError(
                redact(f"{type(error).__name__}: {error}"),
                timed_out=isinstance(error, openai.APITimeoutError),
            ) from None
        except (openai.APIResponseValidationError, ValueError) as error:
            # A body that is not a chat completion: the server misbehaved, try again.
            raise RetryableError(redact(f"malformed response: {error}")) from None
        latency = time.perf_counter() - started
        if not getattr(response, "choices", None):
            raise RetryableError("malformed response: no choices")
        payload = orjson.loads(content)
        try:
            choice = payload["choices"][0]
            fields = reply_fields(
                choice.get("message") or {}, payload.get("usage"), choice.get("finish_reason")
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as error:
            raise RetryableError(redact(f"malformed response: {error!r}")) from None
        return ChatResult(
            finish_reason=choice.get("finish_reason"),
            latency_s=latency,
            model=self.model,
            label_logprobs=kept_logprobs(payload, request),
            **fields,
        )

    async def probe(self, sdk: openai.AsyncOpenAI, timeout_s: float) -> bool:
        """Whether the server answers a model listing within `timeout_s`.

        Args:
            sdk: The SDK client of the client's event loop.
            timeout_s: Seconds to wait.

        Returns:
            True when it answered; False on any failure.
        """
        try:
            await sdk.models.list(timeout=timeout_s)
            return True
        except Exception:  # any failure means "not available"
            return False

    async def ask(self, sdk: openai.AsyncOpenAI, route: str, timeout_s: float) -> ProbeAnswer:
        """The preflight's question (`GET models`, or one token of chat) through the SDK.

        Args:
            sdk: The SDK client.
            route: "models" to list the models; anything else asks one token of chat.
            timeout_s: Seconds to wait.

        Returns:
            The HTTP status and message it got (status None when nothing answered).
        """
        import openai

        try:
            if route == "models":
                await sdk.models.list(timeout=timeout_s)
            else:
                await sdk.chat.completions.create(**ping_body(self.config), timeout=timeout_s)
        except openai.APIStatusError as error:
            return ProbeAnswer(error.status_code, redact(str(error.message)))
        except openai.APITimeoutError:
            return ProbeAnswer(None, "timed out", timed_out=True)
        except openai.APIConnectionError as error:
            return ProbeAnswer(None, redact(str(error.__cause__ or error)))
        return ProbeAnswer(200, "")

    def open(self) -> None:
        """Nothing to start for a remote server."""

    def close(self) -> None:
        """Nothing to stop for a remote server."""


class AzureEndpoint:
    """What both Azure transports share: the resource URL and the batch route."""

    batch_route: ClassVar[str] = "/chat/completions"
    config: EndpointConfig

    def _configured_base_url(self) -> str | None:
        url = self.config.options.resolved_endpoint()
        if not url:
            raise ConfigError(
                f"{self.config.where}: Azure needs 'azure_endpoint', AZURE_ENDPOINT or "
                "AZURE_OPENAI_ENDPOINT"
            )
        return url

    @property
    def cache_namespace(self) -> str:
        return f"azure:{self.config.options.resolved_endpoint()}"


class AzureSDKBackend(AzureEndpoint, OpenAICompatibleBackend):
    """Azure OpenAI through the openai SDK (`transport: sdk`)."""

    options_type: ClassVar[type] = AzureOptions

    def _sdk_client(self, key: str | None, http_client: Any) -> openai.AsyncOpenAI:
        import openai

        return openai.AsyncAzureOpenAI(
            azure_endpoint=self._base_url,
            api_key=key,
            api_version=self.config.options.resolved_api_version(),
            max_retries=0,
            timeout=self.config.timeout_s,
            http_client=http_client,
        )
