"""What a model backend is, the registry of backend kinds, and the endpoints that name one.

There are two kinds of backend, told apart by `is_batch`:

- `RequestBackend` (`is_batch = False`): answers one request at a time. The client makes one
  SDK client on its own event loop (`make_sdk_client()`) and calls `send(sdk, request)`
  concurrently, up to the endpoint's concurrency, retrying on `RetryableError`.
- `BatchBackend` (`is_batch = True`): schedules a whole batch itself. The client hands it
  every uncached request of a call at once (`generate(requests)`, run in a worker thread).
  A `StreamingBatchBackend` also yields answers as they finish (`generate_stream`), and
  the client caches each one as it arrives.

Caching, deduplication, retries and accounting stay in the client; a backend only talks to
its model. An endpoint's `backend:` name is looked up in `BACKENDS`; `register_backend`
adds a name (the built-in ones are registered by `llm_feedback.backends`).

An endpoint definition (`EndpointConfig`) is parsed and checked against its backend's kind
before anything starts or is paid for; a backend is built from one, so the two are one
module. Secrets are never part of an endpoint definition. A definition names a credentials
entry (from `conf/local/credentials.yml`, registered by the project's hook) or falls back to
the usual environment variables; keys are looked up only when a client is opened.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.options import (
    AzureOptions,
    BackendOptions,
    bounds,
    check_fields,
    option_names,
)
from llm_feedback.backends.reasoning import is_reasoning_model
from llm_feedback.backends.secrets import mask_url, register_secrets, reveal_url
from llm_feedback.core.errors import ConfigError

logger = logging.getLogger(__name__)


class RetryableError(Exception):
    """A failure worth trying again; `retry_after` is the server's wish, in seconds.

    `timed_out` marks a request that ran past its timeout: an endpoint whose timeouts
    follow its load (backends/pacing.py) gives the retry more time.
    """

    def __init__(
        self, message: str, retry_after: float | None = None, timed_out: bool = False
    ) -> None:
        """A retryable failure.

        Args:
            message: What went wrong.
            retry_after: Seconds the server asked to wait before retrying; None if it said nothing.
            timed_out: Whether the request ran past its timeout.
        """
        super().__init__(message)
        self.retry_after = retry_after
        self.timed_out = timed_out


@runtime_checkable
class Backend(Protocol):
    """What every backend has, whatever its kind."""

    #: True for a `BatchBackend`, False for a `RequestBackend`.
    is_batch: ClassVar[bool]
    #: Requests in flight at once when the endpoint sets no `max_concurrent`.
    default_concurrency: ClassVar[int]

    config: EndpointConfig
    model: str

    @property
    def cache_namespace(self) -> str:
        """Part of every cache key: answers from different servers or weights never mix."""
        ...

    def open(self) -> None:
        """Start or load what the backend needs (called once, before any request)."""
        ...

    def close(self) -> None:
        """Release it again (called once, after the last request)."""
        ...


@runtime_checkable
class RequestBackend(Backend, Protocol):
    """A backend that answers one request at a time, concurrently, on the client's loop."""

    def make_sdk_client(self) -> Any:
        """A connection (pool) for the client's event loop; it must have `async close()`."""
        ...

    async def send(self, sdk: Any, request: ChatRequest) -> ChatResult:
        """Answer one request; raise `RetryableError` for a failure worth retrying.

        Args:
            sdk: The connection `make_sdk_client` made for the client's event loop.
            request: The request to answer.

        Returns:
            The result (a failed one for a failure not worth retrying).

        Raises:
            RetryableError: The failure is worth retrying (a rate limit, a timeout, a 5xx).
        """
        ...

    async def probe(self, sdk: Any, timeout_s: float) -> bool:
        """A cheap health check: can the endpoint answer at all? Never raises.

        Args:
            sdk: The connection `make_sdk_client` made for the client's event loop.
            timeout_s: Seconds to wait for the answer.

        Returns:
            Whether the endpoint answered.
        """
        ...


@runtime_checkable
class BatchBackend(Backend, Protocol):
    """A backend that takes every uncached request of a call at once."""

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order (blocking; the client runs it in a thread).

        Args:
            requests: The requests to answer.

        Returns:
            One result per request, in the order of `requests`.
        """
        ...

    def is_ready(self) -> bool:
        """Whether the backend is open and can generate."""
        ...


@runtime_checkable
class StreamingBatchBackend(BatchBackend, Protocol):
    """A batch backend that hands back answers as its batches finish, so that the client
    caches them at once and a killed job resumes where it stopped."""

    def generate_stream(self, requests: Sequence[ChatRequest]) -> Iterator[tuple[int, ChatResult]]:
        """(position in `requests`, result) pairs in any order, one per request (blocking).

        Args:
            requests: The requests to answer.

        Yields:
            (position in `requests`, result) for each request, as each is answered.
        """
        ...


BackendFactory = Callable[["EndpointConfig"], Backend]


class BackendTraits:
    """What a backend kind can do, asked before (or without) building one: the class
    attributes and class methods a backend class inherits and overrides. A registered
    factory that is not a subclass gets these defaults (see `kind_of`)."""

    is_batch: ClassVar[bool]
    default_concurrency: ClassVar[int]
    #: The settings this backend takes beyond the common ones (see backends/options.py).
    options_type: ClassVar[type[BackendOptions]] = BackendOptions
    #: Whether requests may carry images and audio (a text-only model: False).
    accepts_media: ClassVar[bool] = True
    #: Whether a prompt and its reply share one context window (`context_budget`).
    reply_shares_context: ClassVar[bool] = False
    #: Set by the client on a request backend: called with each response's headers, so
    #: that its rate-limit headers pace the sends (backends/rate_limit.py).
    on_headers: Callable[[Mapping[str, str]], None] | None = None

    @classmethod
    def build(cls, config: EndpointConfig) -> Backend:
        """The backend for an endpoint: this class built with its config.

        Args:
            config: The endpoint.

        Returns:
            The backend.
        """
        return cls(config)  # type: ignore[call-arg, return-value]

    @classmethod
    def concurrency_for(cls, config: EndpointConfig) -> int:
        """Requests in flight at once when the endpoint sets no `max_concurrent`.

        Args:
            config: The endpoint.

        Returns:
            The number of concurrent requests (`default_concurrency` unless overridden).
        """
        return cls.default_concurrency

    @classmethod
    def context_budget(cls, config: EndpointConfig) -> int | None:
        """Tokens one request may use when the endpoint sets no `max_input_tokens`.

        Args:
            config: The endpoint.

        Returns:
            The token budget, or None when the backend knows none.
        """
        return None

    @classmethod
    def chunk_size(cls, config: EndpointConfig) -> int:
        """Requests a batch backend is handed at a time (bounded memory for huge stages).

        Args:
            config: The endpoint.

        Returns:
            The number of requests per chunk.
        """
        return 4096

    @classmethod
    def sends_from_worker_processes(cls, config: EndpointConfig) -> bool:
        """Whether large streams may be sent from worker processes (backends/workers.py).

        Args:
            config: The endpoint.

        Returns:
            True when worker processes may send this endpoint's requests.
        """
        return False

    @classmethod
    def uses_batch_api(cls, config: EndpointConfig) -> bool:
        """Whether misses go through a provider's Batch API (backends/batch_api.py).

        Args:
            config: The endpoint.

        Returns:
            True when cache misses are sent as a provider batch.
        """
        return False

    @classmethod
    def returns_logprobs(cls, config: EndpointConfig) -> bool:
        """Whether a request may ask for top log-probabilities and its reply keeps them
        (`ChatRequest.top_logprobs`, backends/token_logprobs.py).

        Args:
            config: The endpoint.

        Returns:
            True when the backend returns token log-probabilities for this endpoint.
        """
        return False

    @classmethod
    def logprobs_unavailable(cls, config: EndpointConfig) -> str | None:
        """Why this backend gives no token probabilities whatever the model: what the log
        and the judge card state.

        Args:
            config: the endpoint.

        Returns:
            The reason, or None: it may give them, or says nothing.
        """
        return None

    @classmethod
    def check_endpoint(cls, config: EndpointConfig) -> None:
        """Rules this backend sets on the common settings (a provider's own bounds on a
        reasoning budget), checked when the endpoint is defined.

        Args:
            config: the endpoint.

        Raises:
            ConfigError: naming the setting the backend refuses.
        """

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """The preflight: raise ConfigError / EndpointError when the endpoint cannot do its
        job; a plugged-in backend checks itself when it opens.

        Args:
            config: The endpoint.
            timeout_s: Seconds a check may wait on the endpoint.

        Raises:
            ConfigError: The endpoint's settings cannot work (in backends that check).
            EndpointError: The endpoint cannot be reached or used (in backends that check).
        """


#: Backend name (an endpoint's `backend:`) -> the class (or factory) that builds it.
#: A factory must carry the `is_batch` and `default_concurrency` class attributes.
BACKENDS: dict[str, BackendFactory] = {}
_PLUGIN_KINDS: dict[str, type[BackendTraits]] = {}


def register_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make `backend: <name>` available to endpoint definitions.

    Args:
        name: The name endpoint definitions give as `backend:`.
        factory: The class (or factory) that builds the backend from an `EndpointConfig`;
            it carries the `is_batch` (bool) and `default_concurrency` (int >= 1) class
            attributes.
        replace: Whether a different factory already registered under `name` may be replaced.

    Raises:
        ValueError: `name` is empty, or already registered to another factory without
            `replace`.
        TypeError: `factory` lacks a valid `is_batch` or `default_concurrency`.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a backend name must be a non-empty string, got {name!r}")
    if not isinstance(getattr(factory, "is_batch", None), bool):
        raise TypeError(f"backend '{name}': {factory!r} needs a bool class attribute 'is_batch'")
    concurrency = getattr(factory, "default_concurrency", None)
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise TypeError(
            f"backend '{name}': {factory!r} needs an int class attribute 'default_concurrency' >= 1"
        )
    if name in BACKENDS and BACKENDS[name] is not factory and not replace:
        raise ValueError(f"backend '{name}' is already registered ({BACKENDS[name]!r})")
    BACKENDS[name] = factory
    _PLUGIN_KINDS.pop(name, None)


def kind_of(name: str) -> type[BackendTraits]:
    """The traits of backend `name`: its class, or the defaults around a plain factory.

    Args:
        name: A registered backend name.

    Returns:
        The backend's `BackendTraits` class (one made once per plain factory).

    Raises:
        ConfigError: `name` is not a registered backend.
    """
    factory = backend_factory(name)
    if isinstance(factory, type) and issubclass(factory, BackendTraits):
        return factory
    if name not in _PLUGIN_KINDS:
        attributes = {
            "is_batch": factory.is_batch,
            "default_concurrency": factory.default_concurrency,
            "accepts_media": getattr(factory, "accepts_media", True),
            "build": classmethod(lambda cls, config: factory(config)),
        }
        _PLUGIN_KINDS[name] = type(f"{name}Traits", (BackendTraits,), attributes)
    return _PLUGIN_KINDS[name]


def backend_factory(name: str) -> BackendFactory:
    """The registered factory for `name`; ConfigError naming the known ones otherwise.

    Args:
        name: A backend name.

    Returns:
        The class (or factory) registered under `name`.

    Raises:
        ConfigError: `name` is not registered (the message names those that are).
    """
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"unknown backend '{name}'; expected one of {', '.join(BACKENDS) or 'none'}"
        ) from None


def make_backend(config: EndpointConfig) -> Backend:
    """The backend for an endpoint, checked against the protocol of its kind.

    Args:
        config: The endpoint.

    Returns:
        The backend its `backend:` kind builds.

    Raises:
        ConfigError: The endpoint's backend is not registered.
        TypeError: The built object does not implement `Backend`, or not the protocol its
            `is_batch` promises (`BatchBackend` or `RequestBackend`).
    """
    backend = kind_of(config.backend).build(config)
    if not isinstance(backend, Backend):
        raise TypeError(
            f"backend '{config.backend}' built {type(backend).__name__}, which does not "
            "implement Backend"
        )
    kind = BatchBackend if backend.is_batch else RequestBackend
    if not isinstance(backend, kind):
        raise TypeError(
            f"backend '{config.backend}' built {type(backend).__name__}, which does not "
            f"implement {kind.__name__}"
        )
    return backend


_registered_credentials: dict[str, dict[str, Any]] = {}


def register_credentials(credentials: Mapping[str, Any]) -> None:
    """Make named credentials entries available to endpoints (called by the Kedro hook).

    Replaces the entries registered before; every value of an entry is registered as a
    secret, to be masked in logs.

    Args:
        credentials: Entry name -> mapping of settings (entries not mappings are skipped).
    """
    _registered_credentials.clear()
    for name, entry in (credentials or {}).items():
        if isinstance(entry, Mapping):
            _registered_credentials[name] = dict(entry)
            register_secrets(entry.values())


# The most requests one endpoint keeps in flight: each holds a socket and a buffer.
MAX_CONCURRENT = 10_000
# A reply is cut off beyond this many bytes (on the wire and decompressed) unless the
# endpoint sets `max_reply_bytes`: generous for `max_tokens` tokens of JSON-escaped
# UTF-8 text plus the envelope, far below what buffering a hostile reply would cost.
REPLY_BYTES_PER_TOKEN = 64
REPLY_ENVELOPE_BYTES = 64 * 1024
_GIB = 1024**3


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to reach one model: the settings every endpoint has, plus the
    options its backend declares (`options`, an instance of the backend's
    `options_type`). Build one with `from_dict` from a flat definition."""

    backend: str
    model: str
    name: str = ""
    credentials: str | None = None
    max_concurrent: int | None = bounds(1, MAX_CONCURRENT, None)
    timeout_s: float = bounds(0.001, 86_400, 120.0)
    max_retries: int = bounds(0, 100, 5)
    backoff_base_s: float = bounds(0, 3600, 0.5)
    backoff_max_s: float = bounds(0, 86_400, 60.0)
    structured_output: bool | None = None
    max_string_chars: int | None = bounds(1, 100_000_000, None)
    # The body's name for the reply's budget; None: max_completion_tokens for OpenAI's
    # reasoning models (which refuse max_tokens), max_tokens otherwise.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    cache: bool = True
    # Before the first paid call of a run, ask the endpoint one cheap question.
    preflight: bool = True
    # A node whose calls fail more often than this stops the run (answered calls are cached).
    max_failure_share: float = bounds(0, 1, 0.05)
    # Prompts estimated above this many tokens are not sent (status skipped_too_long);
    # None: the backend's own budget (the local model's context per slot), else unlimited.
    max_input_tokens: int | None = bounds(1, 100_000_000, None)
    # The largest image or audio file sent to this endpoint (OpenAI takes 20 MB an image).
    max_media_bytes: int = bounds(1, 2 * _GIB, 20 * 1024 * 1024)
    # The largest reply body read (compressed or not); None: from the request's max_tokens.
    max_reply_bytes: int | None = bounds(1024, 4 * _GIB, None)
    # Processes that send a stage's requests: "auto" (several for an openai/azure endpoint on
    # the lean transport once a stream has thousands of uncached calls, on machines with 4
    # cores or more) or an int >= 1.
    workers: int | Literal["auto"] = bounds(1, 256, "auto")
    # A reasoning judge's thinking, apart from the verdict's budget (max_tokens): a token
    # budget for it, added to max_tokens in the body, and/or OpenAI's reasoning_effort.
    reasoning_tokens: int | None = bounds(1, 10_000_000, None)
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    # The provider's per-minute limits, paced to (backends/rate_limit.py); None: only
    # what the server's rate-limit headers say.
    requests_per_minute: float | None = bounds(0.001, 1e9, None)
    tokens_per_minute: float | None = bounds(0.001, 1e12, None)
    options: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or self.backend not in BACKENDS:
            # The registry (BACKENDS above) is filled when the package loads.
            raise ConfigError(
                f"{self.where}: unknown backend '{self.backend}'; "
                f"expected one of {', '.join(BACKENDS) or 'none registered'}"
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"{self.where}.model must be a non-empty string")
        check_fields(self, self.where)
        wanted = self.kind.options_type
        if type(self.options) is not wanted:
            raise ConfigError(
                f"{self.where}: backend '{self.backend}' takes {wanted.__name__}, "
                f"got {type(self.options).__name__}"
            )
        check_fields(self.options, self.where)
        self.options.check(self.where)
        self.kind.check_endpoint(self)
        if self.workers not in ("auto", 1) and not self.kind.sends_from_worker_processes(self):
            raise ConfigError(
                f"{self.where}.workers: worker processes send to HTTP endpoints (openai, "
                f"azure; transport lean); backend '{self.backend}' runs otherwise: use 1 or auto"
            )
        if self.workers not in ("auto", 1) and self.is_rate_limited:
            raise ConfigError(
                f"{self.where}.workers: an endpoint with requests_per_minute or "
                "tokens_per_minute is paced by one process: use 1 or auto"
            )
        if self.credentials is not None and self.credentials not in _registered_credentials:
            known = ", ".join(sorted(_registered_credentials)) or "none registered"
            raise ConfigError(
                f"{self.where}.credentials: entry '{self.credentials}' not found in "
                f"conf/local/credentials.yml ({known})"
            )

    @property
    def where(self) -> str:
        """The parameter path of this endpoint, as messages name it."""
        return f"endpoints.{self.name}" if self.name else "endpoint"

    @property
    def kind(self) -> type[BackendTraits]:
        return kind_of(self.backend)

    @classmethod
    def from_dict(cls, definition: Mapping[str, Any], name: str = "") -> EndpointConfig:
        """An endpoint from its flat definition: the common settings and the options of
        its backend side by side.

        Settings of another backend (left by swapping `backend:` on the command line) are
        named in a warning and set aside.

        Args:
            definition: The endpoint's settings as configured, `backend` and `model` among them.
            name: The endpoint's name in `endpoints:` (for messages, and its default `name`).

        Returns:
            The endpoint.

        Raises:
            ConfigError: The definition is not a mapping, lacks `backend` or `model`, names an
                unknown backend or setting, or holds an invalid value.
        """
        where = f"endpoints.{name}" if name else "endpoint"
        if not isinstance(definition, Mapping):
            raise ConfigError(f"{where} must be a mapping, got {definition!r}")
        if "backend" not in definition or "model" not in definition:
            raise ConfigError(f"{where}: 'backend' and 'model' are required")
        backend = definition["backend"]
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ConfigError(
                f"{where}: unknown backend '{backend}'; "
                f"expected one of {', '.join(BACKENDS) or 'none registered'}"
            )
        options_type = kind_of(backend).options_type
        own = option_names(options_type)
        allowed = _COMMON - {"options"} | own
        # Another backend's settings, left over when `--params endpoints.x.backend=...`
        # swaps the backend of a defined endpoint: named, then set aside.
        foreign = sorted((set(definition) - allowed) & _other_options(backend))
        unknown = sorted(set(definition) - allowed - set(foreign))
        if unknown:
            raise ConfigError(
                f"{where}: unknown setting(s) {', '.join(unknown)} for backend '{backend}'; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        if foreign:
            logger.warning(
                "%s: backend '%s' ignores %s (settings of other backends)",
                where,
                backend,
                ", ".join(foreign),
            )
        common = {
            key: value for key, value in definition.items() if key not in own and key not in foreign
        }
        common.setdefault("name", name)
        # A URL whose password the config loader masked connects with the real one.
        options = options_type(
            **{key: reveal_url(definition[key]) for key in own if key in definition}
        )
        return cls(**common, options=options)

    @property
    def concurrency(self) -> int:
        if self.max_concurrent is not None:
            return self.max_concurrent
        return self.kind.concurrency_for(self)

    @property
    def max_tokens_key(self) -> str:
        """The body's name for the reply's budget (see `max_tokens_field`)."""
        if self.max_tokens_field is not None:
            return self.max_tokens_field
        return "max_completion_tokens" if is_reasoning_model(self.model) else "max_tokens"

    @property
    def reasoning_judge(self) -> str | None:
        """Why this endpoint's model reasons before it answers (None: it does not, as far
        as its name and settings tell): what keeps its log-probability verdicts off."""
        if is_reasoning_model(self.model):
            return f"{self.model} is a reasoning model (its API refuses logprobs)"
        if self.reasoning_tokens is not None or self.reasoning_effort is not None:
            return (
                f"{self.where} sets a reasoning budget (its verdict tokens follow hidden "
                "reasoning, so their probabilities are not the judgment's)"
            )
        return None

    @property
    def is_rate_limited(self) -> bool:
        """Whether per-minute limits are configured (`requests_per_minute`, `tokens_per_minute`)."""
        return self.requests_per_minute is not None or self.tokens_per_minute is not None

    @property
    def input_token_budget(self) -> int | None:
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        return self.kind.context_budget(self)

    @property
    def accepts_media(self) -> bool:
        """Whether the backend takes images and audio."""
        return self.kind.accepts_media

    @property
    def uses_batch_api(self) -> bool:
        """Whether misses go through a provider's Batch API (`mode: batch`)."""
        return self.kind.uses_batch_api(self)

    @property
    def uses_structured_output(self) -> bool:
        # llama.cpp, vLLM and OpenAI all enforce JSON schemas; other servers may not.
        return True if self.structured_output is None else self.structured_output

    def backoff_s(self, attempt: int, retry_after: float | None = None) -> float:
        """How long to wait before retry number `attempt + 1` of a call to this endpoint.

        Args:
            attempt: The failed attempt's number, from 0.
            retry_after: The wait the server asked for (Retry-After), if any.

        Returns:
            The server's wait capped at `backoff_max_s`, else exponential backoff from
            `backoff_base_s` with jitter, within `backoff_max_s`.
        """
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)  # jitter spreads out synchronized retries

    def reply_byte_limit(self, max_tokens: int) -> int:
        """The largest reply body accepted for a request of `max_tokens`.

        Args:
            max_tokens: The request's answer budget in tokens.

        Returns:
            `max_reply_bytes` when set, otherwise an envelope allowance plus a per-token one.
        """
        if self.max_reply_bytes is not None:
            return self.max_reply_bytes
        return REPLY_ENVELOPE_BYTES + REPLY_BYTES_PER_TOKEN * max(max_tokens, 1)

    def key_source(self) -> str:
        """Where this endpoint's key comes from, for messages (never the key itself)."""
        if self.credentials is not None:
            return f"credentials entry '{self.credentials}' in conf/local/credentials.yml"
        variables = self.options.key_variables
        if not variables:
            return "no key needed"
        present = [name for name in variables if os.environ.get(name)]
        return " / ".join(present or variables) + ("" if present else " (not set)")

    def api_key(self) -> str | None:
        """The secret for this endpoint, or None; never logged or stored."""
        if self.credentials is not None:
            entry = _registered_credentials[self.credentials]
            key = entry.get("api_key") or entry.get("key")
        else:
            key = next(
                (os.environ[name] for name in self.options.key_variables if os.environ.get(name)),
                None,
            )
        register_secrets([key])  # masked wherever a server echoes it back
        return key

    def describe(self) -> str:
        """The endpoint as messages name it: name, backend, URL, where its key comes from."""
        url = mask_url(self.options.public_url())
        return (
            f"endpoint '{self.name}' ({self.backend}, {url or 'in process'}, key from "
            f"{self.key_source()})"
        )

    def public_dict(self) -> dict[str, Any]:
        """What may be shown in logs, reports and datasets."""
        return {
            "name": self.name,
            "backend": self.backend,
            "model": self.model,
            "base_url": mask_url(self.options.public_url()),
            "max_concurrent": self.concurrency,
        }


_COMMON = frozenset(spec.name for spec in dataclasses.fields(EndpointConfig))


def _other_options(backend: str) -> frozenset[str]:
    names: set[str] = set()
    for other in BACKENDS:
        if other != backend:
            names |= option_names(kind_of(other).options_type)
    return frozenset(names)


# lmms-eval's judge model when MODEL_VERSION is not set.
DEFAULT_JUDGE_MODEL = "gpt-4o-2024-11-20"


def endpoint_from_env(overrides: Mapping[str, Any] | None = None) -> EndpointConfig:
    """A judge endpoint from the environment variables the seed evaluators used.

    MODEL_VERSION, API_TYPE (openai|azure), OPENAI_API_URL (a base URL or the full chat
    completions URL) / OPENAI_BASE_URL, OPENAI_API_KEY; for Azure AZURE_ENDPOINT or
    AZURE_OPENAI_ENDPOINT, AZURE_API_KEY or AZURE_OPENAI_API_KEY, and AZURE_API_VERSION,
    OPENAI_API_VERSION or API_VERSION. Without API_TYPE, the Azure SDK's own variables
    (an Azure endpoint and key, no OpenAI URL or key) select Azure. Without MODEL_VERSION the
    model is lmms-eval's default judge, `DEFAULT_JUDGE_MODEL`. Explicit overrides win.

    Args:
        overrides: Endpoint settings that replace those read from the environment.

    Returns:
        The endpoint.

    Raises:
        ConfigError: API_TYPE is neither 'openai' nor 'azure', or the settings are invalid.
    """
    api_type = os.environ.get("API_TYPE", _implied_api_type()).strip().lower()
    if api_type not in ("openai", "azure"):
        raise ConfigError(f"API_TYPE must be 'openai' or 'azure', got '{api_type}'")
    model = os.environ.get("MODEL_VERSION") or DEFAULT_JUDGE_MODEL
    definition: dict[str, Any] = {"backend": api_type, "name": "env", "model": model}
    definition.update(overrides or {})
    return EndpointConfig.from_dict(definition, name=str(definition["name"]))


def _implied_api_type() -> str:
    """ "azure" where only the Azure SDK's variables are set, else "openai"."""
    azure = any(os.environ.get(name) for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_ENDPOINT"))
    azure_key = any(os.environ.get(name) for name in AzureOptions.key_variables)
    openai = any(
        os.environ.get(name) for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_URL")
    )
    return "azure" if azure and azure_key and not openai else "openai"
