"""OpenAI-compatible chat completions: OpenAI, Azure, `vllm serve`, llama.cpp, the local model."""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any

import httpx2
import openai

from llm_feedback.backends.base import RetryableError
from llm_feedback.backends.config import EndpointConfig
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.media import MediaError, openai_content
from llm_feedback.errors import ConfigError

_SECRET_PATTERN = re.compile(r"(sk-|key-|Bearer\s+)[A-Za-z0-9_\-*]{6,}")
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}

__all__ = ["OpenAICompatibleBackend", "RetryableError", "redact", "response_format_for"]


def redact(text: str) -> str:
    """Server error texts sometimes echo part of a key; never let one reach logs or data."""
    return _SECRET_PATTERN.sub(r"\1***", text)


def _retry_after_seconds(headers: Any) -> float | None:
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def response_format_for(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "judgement", "schema": schema, "strict": True},
    }


class OpenAICompatibleBackend:
    """Talks to any server that speaks the chat completions API (a `RequestBackend`)."""

    is_batch = False
    default_concurrency = 32

    def __init__(self, config: EndpointConfig, base_url: str | None = None) -> None:
        self.config = config
        self.model = config.model
        self._base_url = base_url or config.resolved_base_url()
        if config.backend == "azure" and not config.resolved_azure_endpoint():
            raise ConfigError(
                f"endpoint '{config.name}': Azure needs 'azure_endpoint', AZURE_ENDPOINT or "
                "AZURE_OPENAI_ENDPOINT"
            )

    @property
    def cache_namespace(self) -> str:
        if self.config.backend == "azure":
            return f"azure:{self.config.resolved_azure_endpoint()}"
        return f"openai:{self._base_url or 'https://api.openai.com/v1'}"

    def make_sdk_client(self) -> openai.AsyncOpenAI:
        """One SDK client per event loop: its connection pool belongs to that loop."""
        key = self.config.api_key()
        # The SDK keeps 100 connections by default; a larger limit would churn sockets.
        limit = max(self.config.concurrency, 100)
        http_client = openai.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(max_connections=limit, max_keepalive_connections=limit)
        )
        if self.config.backend == "azure":
            return openai.AsyncAzureOpenAI(
                azure_endpoint=self.config.resolved_azure_endpoint(),
                api_key=key,
                api_version=self.config.resolved_api_version(),
                max_retries=0,  # retries are ours: bounded, jittered, Retry-After aware
                timeout=self.config.timeout_s,
                http_client=http_client,
            )
        return openai.AsyncOpenAI(
            base_url=self._base_url,
            # Local and self-hosted servers need no key, but the SDK insists on one.
            api_key=key or "not-needed",
            max_retries=0,
            timeout=self.config.timeout_s,
            http_client=http_client,
        )

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The chat completions body of `request`: what either transport sends.

        Attachments become `image_url` / `input_audio` parts; reading them raises
        `MediaError` if a file changed since it was checked.
        """
        messages = [
            message
            if isinstance(message["content"], str)
            else {**message, "content": openai_content(message["content"])}
            for message in request.messages
        ]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": request.temperature,
            "top_p": request.top_p,
            self.config.max_tokens_field: request.max_tokens,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None and self.config.uses_structured_output:
            body["response_format"] = response_format_for(request.json_schema)
        return body

    async def send(self, sdk: openai.AsyncOpenAI, request: ChatRequest) -> ChatResult:
        try:
            kwargs = self.request_body(request)
        except MediaError as error:
            return ChatResult.failure(str(error), model=self.model)
        started = time.perf_counter()
        try:
            response = await sdk.chat.completions.create(**kwargs)
        except openai.APIStatusError as error:
            message = redact(f"HTTP {error.status_code}: {error.message}")
            if error.status_code in _RETRYABLE_STATUS:
                raise RetryableError(
                    message, _retry_after_seconds(error.response.headers)
                ) from None
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
        choice = response.choices[0]
        usage = response.usage
        return ChatResult(
            text=choice.message.content if choice.message else None,
            finish_reason=choice.finish_reason,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_s=latency,
            model=self.model,
            error=None if choice.message and choice.message.content is not None else "empty reply",
        )

    async def probe(self, sdk: openai.AsyncOpenAI, timeout_s: float) -> bool:
        """Whether the server answers a model listing within `timeout_s`."""
        try:
            await sdk.models.list(timeout=timeout_s)
            return True
        except Exception:  # any failure means "not available"
            return False

    def open(self) -> None:
        """Nothing to start for a remote server."""

    def close(self) -> None:
        """Nothing to stop for a remote server."""
