"""Gemini through Google's own generateContent API and its official SDK (`backend: gemini`).

`pip install -e ".[gemini]"` (google-genai): imported when an endpoint opens, never by a run
that does not use one. Calls go through `genai.Client(...).aio` with the SDK's retries off
(the client's own are bounded and jittered); 429 RESOURCE_EXHAUSTED waits what its
`google.rpc.RetryInfo` detail asks (`retryDelay`), 5xx are retried, a rejected key (401,
403, or 400 with reason API_KEY_INVALID) stops the endpoint. `mode: batch` goes through
Gemini's batch mode with inline requests (backends/provider_batches.py): up to 20 MB of
requests a batch, half the online price.

A JSON schema becomes `response_json_schema` with `application/json`; images and audio go as
`inline_data` (a URL image is refused per row: the API fetches no arbitrary URLs).
A reasoning budget (`reasoning_tokens`) goes as `thinking_config.thinking_budget` and
`reasoning_effort` as Gemini 3's `thinking_level`; since Gemini counts its thoughts inside
`max_output_tokens`, that cap is the verdict's budget plus the thinking's. Without either,
a Gemini 2.5 model still thinks as it sees fit, inside the verdict's cap: a reply cut off
while thinking (MAX_TOKENS, no answer) is an empty answer, counted as such. Thinking tokens
(`thoughts_token_count`) are billed as output: they count as completion tokens and as
reasoning tokens. Log-probabilities are not asked for.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import httpx2

from llm_feedback.backends.base import EndpointConfig, RetryableError
from llm_feedback.backends.batch_api import BatchState
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.error_bodies import cap_error_body
from llm_feedback.backends.media import Media, MediaError
from llm_feedback.backends.openai_backend import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    ProbeAnswer,
    auth_failure,
)
from llm_feedback.backends.options import bounds
from llm_feedback.backends.provider_batches import ProviderOptions
from llm_feedback.backends.provider_sdk import ProviderSDKBackend, ProviderSDKBatches
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import ConfigError

if TYPE_CHECKING:
    from google import genai


# Inline batch requests may add up to 20 MB; Google documents no cap on their number, so
# 100,000 a batch by default keeps one batch's results bounded in memory.
BATCH_MAX_BYTES = 20 * 1024 * 1024
BATCH_MAX_REQUESTS = 100_000
_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")
_FINISHED = {
    "JOB_STATE_SUCCEEDED",
    "JOB_STATE_FAILED",
    "JOB_STATE_CANCELLED",
    "JOB_STATE_EXPIRED",
    "JOB_STATE_PARTIALLY_SUCCEEDED",
}
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}


@dataclass(frozen=True)
class GeminiOptions(ProviderOptions):
    """`gemini`: Gemini through the Gemini Developer API (GEMINI_API_KEY or GOOGLE_API_KEY)."""

    key_variables: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    default_url: ClassVar[str] = "https://generativelanguage.googleapis.com"
    url_variable: ClassVar[str] = "GOOGLE_GEMINI_BASE_URL"

    api_version: str = "v1beta"
    batch_max_requests: int = bounds(1, 10_000_000, BATCH_MAX_REQUESTS)
    batch_max_bytes: int = bounds(1024, BATCH_MAX_BYTES, BATCH_MAX_BYTES)


def _part(part: str | Media) -> dict[str, Any]:
    if isinstance(part, str):
        return {"text": part}
    if part.is_url:
        raise MediaError(
            f"{part.source}: Gemini takes media inline; give the image as a file or data: URI"
        )
    return {"inline_data": {"mime_type": part.mime, "data": part.read()}}


def _parts(content: Any) -> list[dict[str, Any]]:
    return [_part(content)] if isinstance(content, str) else [_part(p) for p in content]


def generate_args(request: ChatRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The `contents` and `config` of `request` for `generate_content` (and a batch).

    Args:
        request: The chat request; system messages become the system instruction, the
            assistant's turns the model's.

    Returns:
        (contents, config) as the SDK takes them.
    """
    contents = [
        {"role": "model" if m["role"] == "assistant" else "user", "parts": _parts(m["content"])}
        for m in request.messages
        if m["role"] != "system"
    ]
    config: dict[str, Any] = {
        # A judge calls no tools: the SDK's automatic function calling stays off.
        "automatic_function_calling": {"disable": True},
        "temperature": request.temperature,
        "top_p": request.top_p,
        # Gemini counts thoughts inside max_output_tokens: the verdict's budget plus the
        # thinking's, so a judge that thinks its whole budget still has room to answer.
        "max_output_tokens": request.token_budget,
    }
    if request.reasoning_tokens:
        config["thinking_config"] = {"thinking_budget": request.reasoning_tokens}
    elif request.reasoning_effort is not None:  # Gemini 3's levels, named as OpenAI's efforts
        config["thinking_config"] = {"thinking_level": request.reasoning_effort.upper()}
    system = [
        part for m in request.messages if m["role"] == "system" for part in _parts(m["content"])
    ]
    if system:
        config["system_instruction"] = {"parts": system}
    if request.stop:
        config["stop_sequences"] = list(request.stop)
    if request.seed is not None:
        config["seed"] = request.seed
    if request.json_schema is not None:
        config["response_mime_type"] = "application/json"
        config["response_json_schema"] = request.json_schema
    return contents, config


def response_result(response: Any, latency_s: float, model: str) -> ChatResult:
    """A GenerateContentResponse as a result: the text of its first candidate (thoughts
    left out), its finish reason, and its tokens (thinking billed as output, and counted
    apart as reasoning tokens); a reply cut off while thinking has an empty answer.

    Args:
        response: The GenerateContentResponse.
        latency_s: Seconds the call took.
        model: The model that answered.

    Returns:
        The result; a failed one for a blocked prompt or an empty reply.
    """
    usage = response.usage_metadata
    prompt = int(getattr(usage, "prompt_token_count", None) or 0)
    thoughts = int(getattr(usage, "thoughts_token_count", None) or 0)
    completion = int(getattr(usage, "candidates_token_count", None) or 0) + thoughts
    candidates = response.candidates or []
    if not candidates:
        feedback = response.prompt_feedback
        reason = getattr(getattr(feedback, "block_reason", None), "value", None) or "no candidate"
        return ChatResult(
            text=None,
            prompt_tokens=prompt,
            latency_s=latency_s,
            model=model,
            error=f"blocked: {reason}",
        )
    candidate = candidates[0]
    parts = (candidate.content.parts if candidate.content else None) or []
    texts = [part.text for part in parts if part.text is not None and not part.thought]
    finish = getattr(candidate.finish_reason, "value", candidate.finish_reason)
    text = "".join(texts) if texts else None
    if text is None and thoughts and finish == "MAX_TOKENS":
        text = ""  # thought to the end of its budget: an answered call without a verdict
    # Of the prompt, what Gemini's cache served (implicit or explicit; billed apart): the
    # count is left out when nothing was, and unknown only without usage at all.
    cached = None if usage is None else int(getattr(usage, "cached_content_token_count", 0) or 0)
    return ChatResult(
        text=text,
        finish_reason=_FINISH.get(finish, str(finish).lower() if finish else None),
        prompt_tokens=prompt,
        completion_tokens=completion,
        reasoning_tokens=thoughts,
        latency_s=latency_s,
        model=model,
        error=None if text is not None else f"empty reply (finish_reason {finish})",
        cached_prompt_tokens=cached,
    )


def retry_delay(details: Any) -> float | None:
    """The wait a Gemini error asks for: its RetryInfo detail's `retryDelay` ("30s").

    Args:
        details: The error's decoded body.

    Returns:
        Seconds to wait, or None when the error names no delay.
    """
    error = details.get("error") if isinstance(details, dict) else None
    for detail in (error or {}).get("details") or []:
        if isinstance(detail, dict) and detail.get("@type") == _RETRY_INFO:
            match = _DURATION.fullmatch(str(detail.get("retryDelay", "")))
            if match:
                return float(match[1])
    return None


def _rejects_key(details: Any) -> bool:
    """Gemini answers a bad key with 400 INVALID_ARGUMENT whose ErrorInfo says so."""
    error = details.get("error") if isinstance(details, dict) else None
    return any(
        isinstance(detail, dict)
        and detail.get("@type") == _ERROR_INFO
        and detail.get("reason") == "API_KEY_INVALID"
        for detail in (error or {}).get("details") or []
    )


def _detail(error: Any) -> str:
    """A Google error's status and message ("RESOURCE_EXHAUSTED: ..."), masked."""
    return redact(f"{error.status}: {error.message}")


@dataclass
class GeminiConnection:
    """One `genai.Client` for the client's event loop, closed with it."""

    client: genai.Client

    async def close(self) -> None:
        await self.client.aio.aclose()


class GeminiBackend(ProviderSDKBackend):
    """Gemini through the official `google-genai` SDK (a `RequestBackend`)."""

    name = "gemini"
    options_type: ClassVar[type] = GeminiOptions

    @classmethod
    def logprobs_unavailable(cls, config: EndpointConfig) -> str | None:
        """Why Gemini judges give no probability verdicts here.

        Args:
            config: the endpoint.

        Returns:
            The reason, for the log and the judge card.
        """
        # Few Gemini models give them (`response_logprobs`), thinking ones not at all.
        return "the gemini backend asks Gemini for no token probabilities"

    @classmethod
    def check_endpoint(cls, config: EndpointConfig) -> None:
        """Gemini refuses a thinking budget and a thinking level in one request.

        Args:
            config: the endpoint.

        Raises:
            ConfigError: both `reasoning_tokens` and `reasoning_effort` are set.
        """
        if config.reasoning_tokens is not None and config.reasoning_effort is not None:
            raise ConfigError(
                f"{config.where}: set reasoning_tokens (Gemini's thinking_budget) or "
                "reasoning_effort (Gemini 3's thinking_level), not both: the API refuses both"
            )

    def make_sdk_client(self) -> GeminiConnection:
        """One SDK client per event loop (its connection pool belongs to that loop)."""
        genai = _sdk()
        limit = max(self.config.concurrency, 100)
        http_client = httpx2.AsyncClient(
            limits=httpx2.Limits(max_connections=limit, max_keepalive_connections=limit),
            timeout=self.config.timeout_s,
            event_hooks={"response": [cap_error_body]},
        )
        options = genai.types.HttpOptions(
            base_url=self._base_url,
            api_version=self.config.options.api_version,
            timeout=int(self.config.timeout_s * 1000),
            httpx_async_client=http_client,
        )
        # Without a key the API answers 400 API_KEY_INVALID, which names where it comes from.
        client = genai.Client(api_key=self.config.api_key() or "not-set", http_options=options)
        return GeminiConnection(client)

    def sdk_errors(self) -> tuple[type[Exception], ...]:
        return (_sdk().errors.APIError, httpx2.TransportError)

    def status_message(self, error: Any) -> str:
        """An error answer as one line: its HTTP status and the provider's message.

        Args:
            error: The SDK's error answer.

        Returns:
            The line.
        """
        return f"HTTP {error.code}: {_detail(error)}"

    def classify(self, error: Exception) -> Exception:
        """An SDK error as what the client acts on: RetryableError (rate limited, busy,
        cut off), EndpointError (a rejected key), or the error itself (this request's own).

        Args:
            error: An error the SDK raised.

        Returns:
            The error the client acts on.
        """
        genai = _sdk()
        if isinstance(error, genai.errors.APIError):
            message = self.status_message(error)
            if error.code in AUTH_STATUS or _rejects_key(error.details):
                status = error.code if error.code in AUTH_STATUS else 401
                return auth_failure(self.config, status, message)
            if error.code in RETRYABLE_STATUS:
                return RetryableError(message, retry_delay(error.details))
            return error
        if isinstance(error, httpx2.TransportError):
            return RetryableError(
                redact(f"{type(error).__name__}: {error}"),
                timed_out=isinstance(error, httpx2.TimeoutException),
            )
        return error

    async def send(
        self, sdk: GeminiConnection, request: ChatRequest, timeout_s: float | None = None
    ) -> ChatResult:
        """Answer one request; RetryableError for a failure worth retrying.

        Args:
            sdk: The connection of the client's event loop.
            request: The request.
            timeout_s: This request's own timeout (default: the endpoint's).

        Returns:
            The result; a failed one for an unreadable attachment or an error of the request's
            own.

        Raises:
            RetryableError: A failure worth retrying, or a body the SDK cannot read.
            EndpointError: The endpoint rejected the key.
        """
        genai = _sdk()
        try:
            contents, config = generate_args(request)
        except MediaError as error:
            return ChatResult.failure(str(error), model=self.model)
        if timeout_s is not None:
            config["http_options"] = {"timeout": int(timeout_s * 1000)}
        started = time.perf_counter()
        try:
            response = await sdk.client.aio.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        except (genai.errors.APIError, httpx2.TransportError) as error:
            return self.own_failure(error, started)
        except (ValueError, TypeError) as error:  # a body the SDK cannot read
            raise RetryableError(redact(f"malformed response: {error!r}")) from None
        return response_result(response, time.perf_counter() - started, self.model)

    async def ask(self, sdk: GeminiConnection, route: str, timeout_s: float) -> ProbeAnswer:
        """The preflight's question: the model's own entry (a wrong name is a 404).

        Args:
            sdk: The connection.
            route: Unused: Gemini is always asked for the model's entry.
            timeout_s: Seconds to wait.

        Returns:
            The HTTP status and message it got (status None when nothing answered).
        """
        genai = _sdk()
        try:
            await sdk.client.aio.models.get(
                model=self.model, config={"http_options": {"timeout": int(timeout_s * 1000)}}
            )
        except genai.errors.APIError as error:
            status = 401 if _rejects_key(error.details) else error.code
            return ProbeAnswer(status, _detail(error))
        except httpx2.TimeoutException:
            return ProbeAnswer(None, "timed out", timed_out=True)
        except httpx2.TransportError as error:
            return ProbeAnswer(None, redact(f"{type(error).__name__}: {error}"))
        return ProbeAnswer(200, "")

    def batch_api(self, sdk: GeminiConnection) -> GeminiBatches:
        """Gemini's batch mode (`mode: batch`).

        Args:
            sdk: The SDK client.

        Returns:
            The batch calls.
        """
        return GeminiBatches(self, sdk)


class GeminiBatches(ProviderSDKBatches):
    """Gemini batch mode with inline requests: create, get, read the inlined responses."""

    def __init__(self, backend: GeminiBackend, sdk: GeminiConnection) -> None:
        """Batch calls through the backend's SDK client.

        Args:
            backend: The Gemini backend.
            sdk: Its connection.
        """
        super().__init__(backend, sdk)
        # The job as the last poll saw it: a finished one carries its responses already.
        self._seen: dict[str, Any] = {}

    def entry(self, key: str, request: ChatRequest) -> dict[str, Any]:
        """`request` as an inline batch request, its key in the metadata.

        Args:
            key: The request's cache key.
            request: The request.

        Returns:
            The inline request (`contents`, `config`, `metadata`).

        Raises:
            MediaError: An attachment cannot be read.
        """
        contents, config = generate_args(request)
        return {"contents": contents, "config": config, "metadata": {"key": key}}

    async def create(self, entries: list[dict[str, Any]]) -> str:
        """Submit one batch job of inline requests.

        Args:
            entries: The inline requests (`entry`).

        Returns:
            The job's name, its id.

        Raises:
            RetryableError: A failure worth retrying.
            EndpointError: Any other failure.
        """
        job = await self._call(
            self._sdk.client.aio.batches.create(
                model=self._backend.model,
                src=entries,
                config={"display_name": f"llm_feedback {self._backend.config.name}"},
            )
        )
        return job.name

    async def state(self, batch_id: str) -> BatchState:
        """Where the job stands (the job kept, so that `results` need not fetch it again).

        Args:
            batch_id: The job's name.

        Returns:
            Whether it finished, its state, and its succeeded and failed responses.

        Raises:
            RetryableError: A failure worth retrying.
            EndpointError: Any other failure.
        """
        job = await self._call(self._sdk.client.aio.batches.get(name=batch_id))
        self._seen[batch_id] = job
        status = getattr(job.state, "value", str(job.state))
        responses = (job.dest.inlined_responses if job.dest else None) or []
        failed = sum(1 for response in responses if response.error is not None)
        return BatchState(
            finished=status in _FINISHED,
            status=status,
            succeeded=len(responses) - failed,
            failed=failed,
        )

    async def results(self, batch_id: str) -> list[tuple[str, ChatResult]]:
        """(key, result) for every inlined response of a finished job that names its key.

        Args:
            batch_id: The job's name.

        Returns:
            (cache key, result) pairs; a response with an error is a failed result.

        Raises:
            RetryableError: A failure worth retrying.
            EndpointError: Any other failure.
        """
        job = self._seen.pop(batch_id, None)
        if job is None:
            job = await self._call(self._sdk.client.aio.batches.get(name=batch_id))
        model = self._backend.model
        found = []
        for inlined in (job.dest.inlined_responses if job.dest else None) or []:
            key = (inlined.metadata or {}).get("key")
            if not key:
                continue  # its request stays unanswered ("no result")
            if inlined.error is not None:
                error = inlined.error
                answer = ChatResult.failure(
                    redact(
                        f"errored: {getattr(error, 'code', '')}: {getattr(error, 'message', '')}"
                    )
                )
            elif inlined.response is not None:
                answer = response_result(inlined.response, 0.0, model)
            else:
                continue
            found.append((key, answer))
        return found


def _sdk() -> Any:
    """The `google-genai` SDK; ConfigError saying how to install it when it is missing."""
    try:
        from google import genai
        from google.genai import errors, types  # noqa: F401  (submodules used as attributes)
    except ImportError:
        raise ConfigError(
            "backend gemini needs the google-genai SDK: pip install -e '.[gemini]'"
        ) from None
    return genai
