"""Claude through Anthropic's own Messages API and its official SDK (`backend: anthropic`).

`pip install -e ".[anthropic]"`: the SDK is imported when an endpoint opens, never by a run
that does not use one. Calls go through `AsyncAnthropic` with the SDK's retries off (the
client's own retries are bounded, jittered and honour `retry-after`); 429 and 529
(`overloaded_error`) are retried, 401/403 stop the endpoint at once. Anthropic's
rate-limit headers (`anthropic-ratelimit-*`) pace the sends as OpenAI's do. `mode: batch` goes
through Message Batches (backends/provider_batches.py): up to 100,000 requests or 256 MB a
batch, half the online price.

The SDK sends API version 2026-10-21, which refuses `temperature`, `top_p` and `top_k`
(HTTP 400 even at their defaults): Claude samples at its own settings, whatever a judge
asks (the request's sampling still keys the cache). `seed` and log-probabilities do not
exist in this API. A reasoning budget (`reasoning_tokens`) turns on extended thinking
(`thinking.budget_tokens`, at least 1,024) with `max_tokens` the verdict's budget plus the
thinking's, since Claude counts its thinking inside `max_tokens`; `reasoning_effort` goes as
`output_config.effort`. The verdict is read from the text blocks after the thinking blocks;
a reply cut off while thinking has an empty answer; thinking is billed in `output_tokens`
(`output_tokens_details.thinking_tokens` says how much). A JSON schema becomes
`output_config.format` (structured outputs); `prompt_caching: true` asks for the prompt
cache on every request; images go as base64 (or URL) image blocks; audio is refused per row.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import httpx2
import orjson

from llm_feedback.backends.base import EndpointConfig, RetryableError
from llm_feedback.backends.batch_api import BatchState
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.error_bodies import cap_error_body
from llm_feedback.backends.media import Media, MediaError
from llm_feedback.backends.openai_backend import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    ProbeAnswer,
    ReplyTooLarge,
    auth_failure,
    read_capped,
    retry_after_seconds,
    too_large_message,
)
from llm_feedback.backends.options import bounds
from llm_feedback.backends.provider_batches import ProviderOptions
from llm_feedback.backends.provider_sdk import ProviderSDKBackend, ProviderSDKBatches
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import ConfigError

if TYPE_CHECKING:
    import anthropic


# Message Batches limits: requests and bytes per batch.
BATCH_MAX_REQUESTS = 100_000
BATCH_MAX_BYTES = 256 * 1024 * 1024
#: 529: Anthropic's "overloaded_error", a busy service worth trying again.
OVERLOADED = 529
ANTHROPIC_RETRYABLE = RETRYABLE_STATUS | {OVERLOADED}
# Extended thinking's smallest budget (`thinking.budget_tokens`), and the efforts Claude takes.
MIN_THINKING_TOKENS = 1024
EFFORTS = ("low", "medium", "high")
# Claude's stop reasons in the chat completions words the judges read.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
_UNANSWERED = {
    "errored": "errored",
    "canceled": "canceled before it ran",
    "expired": "expired before it ran",
}


@dataclass(frozen=True)
class AnthropicOptions(ProviderOptions):
    """`anthropic`: Claude through the Messages API (ANTHROPIC_API_KEY)."""

    key_variables: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    default_url: ClassVar[str] = "https://api.anthropic.com"
    url_variable: ClassVar[str] = "ANTHROPIC_BASE_URL"

    batch_max_requests: int = bounds(1, BATCH_MAX_REQUESTS, BATCH_MAX_REQUESTS)
    batch_max_bytes: int = bounds(1024, BATCH_MAX_BYTES, BATCH_MAX_BYTES)
    # true: every request asks for Anthropic's prompt cache (`cache_control: ephemeral`):
    # a judge's shared instructions are read from the cache, at a tenth of the input price,
    # by the calls after the first within five minutes.
    prompt_caching: bool = False


def image_block(media: Media) -> dict[str, Any]:
    """An image as a Messages API content block (base64, or the URL Claude fetches).

    Args:
        media: The image.

    Returns:
        The content block.

    Raises:
        MediaError: The media is not an image (Claude takes no audio), or cannot be read.
    """
    if media.kind != "image":
        raise MediaError(f"{media.source}: Claude's Messages API takes images, not {media.kind}")
    if media.is_url:
        return {"type": "image", "source": {"type": "url", "url": media.source}}
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media.mime, "data": media.base64()},
    }


def _content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [
        {"type": "text", "text": part} if isinstance(part, str) else image_block(part)
        for part in content
    ]


def message_params(model: str, request: ChatRequest, cache_prompt: bool = False) -> dict[str, Any]:
    """The Messages API parameters of `request` (online and in a batch alike).

    Args:
        model: The Claude model to ask.
        request: The chat request; system messages become the `system` parameter.
        cache_prompt: Whether to ask for the prompt cache (`prompt_caching`).

    Returns:
        The keyword arguments of `messages.create`.
    """
    system = [m["content"] for m in request.messages if m["role"] == "system"]
    params: dict[str, Any] = {
        "model": model,
        # Claude's max_tokens holds the thinking too: the verdict's budget plus the thinking's.
        "max_tokens": request.token_budget,
        "messages": [
            {"role": m["role"], "content": _content(m["content"])}
            for m in request.messages
            if m["role"] != "system"
        ],
    }
    if system:
        params["system"] = "\n\n".join(part if isinstance(part, str) else "" for part in system)
    if request.stop:
        params["stop_sequences"] = list(request.stop)
    if request.reasoning_tokens:
        params["thinking"] = {"type": "enabled", "budget_tokens": request.reasoning_tokens}
    output_config: dict[str, Any] = {}
    if request.json_schema is not None:
        output_config["format"] = {"type": "json_schema", "schema": request.json_schema}
    if request.reasoning_effort is not None:
        output_config["effort"] = request.reasoning_effort
    if output_config:
        params["output_config"] = output_config
    if cache_prompt:
        params["cache_control"] = {"type": "ephemeral"}
    return params


def message_result(payload: Any, latency_s: float, model: str) -> ChatResult:
    """A Message object (decoded JSON) as a result; raises KeyError/TypeError/ValueError when
    it is not one.

    Args:
        payload: The decoded Message object.
        latency_s: Seconds the call took.
        model: The model that answered.

    Returns:
        The result; a failed one for an empty reply.

    Raises:
        ValueError: The payload is not a message object.
    """
    if payload.get("type") != "message" or not isinstance(payload.get("content"), list):
        raise ValueError("not a message object")
    # Thinking comes in blocks of its own (`thinking`, `redacted_thinking`) before the
    # answer's text blocks: the verdict is read from the text blocks only.
    texts = [block["text"] for block in payload["content"] if block.get("type") == "text"]
    thought = any("thinking" in str(block.get("type")) for block in payload["content"])
    usage = payload.get("usage") or {}
    # Cached prompt parts are billed apart from `input_tokens`, but they are prompt all the same.
    prompt = sum(
        _count(usage.get(name)) or 0
        for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    text = "".join(texts) if texts else None
    stop = payload.get("stop_reason")
    if text is None and thought and stop == "max_tokens":
        text = ""  # thought to the end of its budget: an answered call without a verdict
    # Thinking is billed inside `output_tokens`; `output_tokens_details` says how much of it.
    details = usage.get("output_tokens_details") or {}
    return ChatResult(
        text=text,
        finish_reason=_FINISH.get(stop, stop),
        prompt_tokens=prompt,
        completion_tokens=int(usage.get("output_tokens") or 0),
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
        latency_s=latency_s,
        model=model,
        error=None if text is not None else f"empty reply (stop_reason {stop})",
        # How much of the prompt the cache served or wrote (billed apart); None if unsaid.
        cached_prompt_tokens=_count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=_count(usage.get("cache_creation_input_tokens")),
    )


def _count(value: Any) -> int | None:
    """A usage count, None where the reply has none (or not a number)."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    return int(value) if numeric else None


def rate_limit_headers(headers: Mapping[str, str], now: float | None = None) -> dict[str, str]:
    """Anthropic's rate-limit headers in the names the client's pacing reads.

    Anthropic sends `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`, the
    reset as the RFC 3339 moment the limit is whole again; the pacing reads OpenAI's
    `x-ratelimit-{limit,remaining,reset}-*` with the reset in seconds from now.

    Args:
        headers: A response's headers (case-insensitive, as httpx gives them).
        now: The time (`time.time()`) the reset is counted from; now when None.

    Returns:
        The `x-ratelimit-*` headers of those Anthropic sent.
    """
    now = time.time() if now is None else now
    found: dict[str, str] = {}
    for name in ("requests", "tokens"):
        for part in ("limit", "remaining", "reset"):
            value = headers.get(f"anthropic-ratelimit-{name}-{part}")
            if value is None:
                continue
            if part == "reset":
                try:
                    moment = datetime.fromisoformat(value.strip()).timestamp()
                except ValueError:
                    continue
                value = f"{max(0.0, moment - now):.3f}"
            found[f"x-ratelimit-{part}-{name}"] = value
    return found


def _detail(error: anthropic.APIStatusError) -> str:
    """An error body's type and message ("rate_limit_error: ..."), masked."""
    body = error.body if isinstance(error.body, dict) else {}
    detail = body.get("error") if isinstance(body.get("error"), dict) else {}
    kind = detail.get("type") or "error"
    return redact(f"{kind}: {detail.get('message') or error.message}")


class AnthropicBackend(ProviderSDKBackend):
    """Claude through the official `anthropic` SDK (a `RequestBackend`)."""

    name = "anthropic"
    options_type: ClassVar[type] = AnthropicOptions

    @classmethod
    def logprobs_unavailable(cls, config: EndpointConfig) -> str | None:
        """Why Claude judges give no probability verdicts.

        Args:
            config: the endpoint.

        Returns:
            The reason, for the log and the judge card.
        """
        return "Anthropic's Messages API returns no token probabilities"

    @classmethod
    def check_endpoint(cls, config: EndpointConfig) -> None:
        """Claude's bounds on a reasoning budget, refused here rather than by a paid call.

        Args:
            config: the endpoint.

        Raises:
            ConfigError: a budget under Claude's minimum or an effort it does not take.
        """
        if config.reasoning_tokens is not None and config.reasoning_tokens < MIN_THINKING_TOKENS:
            raise ConfigError(
                f"{config.where}.reasoning_tokens: Claude's extended thinking takes a budget "
                f"of at least {MIN_THINKING_TOKENS} tokens, got {config.reasoning_tokens}"
            )
        if config.reasoning_effort not in (None, *EFFORTS):
            raise ConfigError(
                f"{config.where}.reasoning_effort: Claude takes {', '.join(EFFORTS)}, "
                f"got {config.reasoning_effort}"
            )

    def make_sdk_client(self) -> anthropic.AsyncAnthropic:
        """One SDK client per event loop (its connection pool belongs to that loop)."""
        anthropic = _sdk()
        limit = max(self.config.concurrency, 100)
        http_client = anthropic.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(max_connections=limit, max_keepalive_connections=limit),
            event_hooks={"response": [cap_error_body]},
        )
        return anthropic.AsyncAnthropic(
            # Without a key the provider answers 401, which names where the key comes from.
            api_key=self.config.api_key() or "not-set",
            base_url=self._base_url,
            max_retries=0,  # retries are ours: bounded, jittered, retry-after aware
            timeout=self.config.timeout_s,
            http_client=http_client,
        )

    def sdk_errors(self) -> tuple[type[Exception], ...]:
        anthropic = _sdk()
        return (anthropic.APIStatusError, anthropic.APIConnectionError)

    def status_message(self, error: anthropic.APIStatusError) -> str:
        """An error answer as one line: its HTTP status and the provider's message.

        Args:
            error: The SDK's error answer.

        Returns:
            The line.
        """
        return f"HTTP {error.status_code}: {_detail(error)}"

    def classify(self, error: Exception) -> Exception:
        """An SDK error as what the client acts on: RetryableError (busy, overloaded, cut
        off), EndpointError (a rejected key), or the error itself (this request's own).

        Args:
            error: An error the SDK raised.

        Returns:
            The error the client acts on.
        """
        anthropic = _sdk()
        if isinstance(error, anthropic.APIStatusError):
            message = self.status_message(error)
            if error.status_code in AUTH_STATUS:
                return auth_failure(self.config, error.status_code, message)
            if error.status_code in ANTHROPIC_RETRYABLE:
                return RetryableError(message, retry_after_seconds(error.response.headers))
            return error
        if isinstance(error, anthropic.APIConnectionError):
            return RetryableError(
                redact(f"{type(error).__name__}: {error}"),
                timed_out=isinstance(error, anthropic.APITimeoutError),
            )
        return error

    async def send(
        self, sdk: anthropic.AsyncAnthropic, request: ChatRequest, timeout_s: float | None = None
    ) -> ChatResult:
        """Answer one request; RetryableError for a failure worth retrying.

        Args:
            sdk: The SDK client of the client's event loop.
            request: The request.
            timeout_s: This request's own timeout (default: the endpoint's).

        Returns:
            The result; a failed one for an unreadable attachment, a reply too large or an
            error of the request's own.

        Raises:
            RetryableError: A failure worth retrying, or a malformed reply.
            EndpointError: The endpoint rejected the key or refused access.
        """
        anthropic = _sdk()
        try:
            params = message_params(self.model, request, self.config.options.prompt_caching)
        except MediaError as error:
            return ChatResult.failure(str(error), model=self.model)
        if timeout_s is not None:
            params["timeout"] = timeout_s
        started = time.perf_counter()
        limit = self.config.reply_byte_limit(request.token_budget)
        try:
            async with sdk.messages.with_streaming_response.create(**params) as streamed:
                self._observe(streamed.http_response.headers)
                content = await read_capped(streamed.http_response, limit)
        except ReplyTooLarge as error:
            return ChatResult.failure(
                too_large_message(self.config, error, limit, request.max_tokens),
                time.perf_counter() - started,
                self.model,
            )
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as error:
            if isinstance(error, anthropic.APIStatusError):
                self._observe(error.response.headers)  # a 429's say what is left
            return self.own_failure(error, started)
        latency = time.perf_counter() - started
        try:
            return message_result(orjson.loads(content), latency, self.model)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RetryableError(redact(f"malformed response: {error!r}")) from None

    def _observe(self, headers: Mapping[str, str]) -> None:
        """Hand Anthropic's rate-limit headers to the client's pacing (`on_headers`)."""
        if self.on_headers is not None:
            self.on_headers(rate_limit_headers(headers))

    async def ask(self, sdk: anthropic.AsyncAnthropic, route: str, timeout_s: float):
        """The preflight's question: the models list, or one token of chat.

        Args:
            sdk: The SDK client.
            route: "models" to list the models; anything else asks one token of chat.
            timeout_s: Seconds to wait.

        Returns:
            The HTTP status and message it got (status None when nothing answered).
        """
        anthropic = _sdk()
        try:
            if route == "models":
                await sdk.models.list(limit=1, timeout=timeout_s)
            else:
                ping = ChatRequest.from_prompt("ping", max_tokens=1)
                await sdk.messages.create(**message_params(self.model, ping), timeout=timeout_s)
        except anthropic.APIStatusError as error:
            return ProbeAnswer(error.status_code, _detail(error))
        except anthropic.APITimeoutError:
            return ProbeAnswer(None, "timed out", timed_out=True)
        except anthropic.APIConnectionError as error:
            return ProbeAnswer(None, redact(str(error.__cause__ or error)))
        return ProbeAnswer(200, "")

    def batch_api(self, sdk: anthropic.AsyncAnthropic) -> MessageBatches:
        """Message Batches (`mode: batch`).

        Args:
            sdk: The SDK client.

        Returns:
            The batch calls.
        """
        return MessageBatches(self, sdk)


class MessageBatches(ProviderSDKBatches):
    """Anthropic's Message Batches: create, retrieve, results (JSONL) through the SDK."""

    def entry(self, key: str, request: ChatRequest) -> dict[str, Any]:
        """`request` as a Message Batches request, known by `key`.

        Args:
            key: The request's cache key (its `custom_id`).
            request: The request.

        Returns:
            The batch request.

        Raises:
            MediaError: An attachment cannot be read.
        """
        caching = self._backend.config.options.prompt_caching
        return {"custom_id": key, "params": message_params(self._backend.model, request, caching)}

    async def create(self, entries: list[dict[str, Any]]) -> str:
        """Submit one message batch.

        Args:
            entries: The batch requests (`entry`).

        Returns:
            The batch's id.

        Raises:
            RetryableError: A failure worth retrying.
            EndpointError: Any other failure.
        """
        batch = await self._call(self._sdk.messages.batches.create(requests=entries))
        return batch.id

    async def state(self, batch_id: str) -> BatchState:
        """Where the batch stands, from its request counts.

        Args:
            batch_id: The batch's id.

        Returns:
            Whether it ended, its status, and its succeeded, failed (errored, canceled or
            expired) and total requests.

        Raises:
            RetryableError: A failure worth retrying.
            EndpointError: Any other failure.
        """
        batch = await self._call(self._sdk.messages.batches.retrieve(batch_id))
        counts = batch.request_counts
        ended = batch.processing_status == "ended"
        unanswered = counts.errored + counts.canceled + counts.expired
        return BatchState(
            finished=ended,
            status=batch.processing_status,
            succeeded=counts.succeeded,
            failed=unanswered,
            total=counts.processing + counts.succeeded + unanswered,
        )

    async def results(self, batch_id: str) -> list[tuple[str, ChatResult]]:
        """(key, result) for every request of an ended batch.

        Args:
            batch_id: The batch's id.

        Returns:
            (cache key, result) pairs; errored, canceled, expired or malformed ones are failed
            results.

        Raises:
            RetryableError: A failure worth retrying.
            EndpointError: Any other failure.
        """
        return await self._call(self._read_results(batch_id))

    async def _read_results(self, batch_id: str) -> list[tuple[str, ChatResult]]:
        model = self._backend.model
        found = []
        async for line in await self._sdk.messages.batches.results(batch_id):
            result = line.result
            if result.type == "succeeded":
                try:
                    answer = message_result(result.message.model_dump(), 0.0, model)
                except (ValueError, KeyError, TypeError, AttributeError) as error:
                    answer = ChatResult.failure(redact(f"malformed batch result: {error!r}"))
            elif result.type == "errored":
                detail = getattr(result.error, "error", None)
                answer = ChatResult.failure(
                    redact(
                        f"errored: {getattr(detail, 'type', 'error')}: "
                        f"{getattr(detail, 'message', '')}"
                    )
                )
            else:
                answer = ChatResult.failure(_UNANSWERED.get(result.type, result.type))
            found.append((line.custom_id, answer))
        return found


def _sdk() -> Any:
    """The `anthropic` SDK; ConfigError saying how to install it when it is missing."""
    try:
        import anthropic
    except ImportError:
        raise ConfigError(
            "backend anthropic needs the anthropic SDK: pip install -e '.[anthropic]'"
        ) from None
    return anthropic
