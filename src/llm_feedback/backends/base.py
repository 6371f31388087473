"""What `LLMClient` needs from a model backend, and the registry that maps names to backends.

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
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.options import BackendOptions
from llm_feedback.errors import ConfigError

if TYPE_CHECKING:
    from llm_feedback.backends.config import EndpointConfig


class RetryableError(Exception):
    """A failure worth trying again; `retry_after` is the server's wish, in seconds.

    `timed_out` marks a request that ran past its timeout: an endpoint whose timeouts
    follow its load (backends/pacing.py) gives the retry more time.
    """

    def __init__(
        self, message: str, retry_after: float | None = None, timed_out: bool = False
    ) -> None:
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
        """Answer one request; raise `RetryableError` for a failure worth retrying."""
        ...

    async def probe(self, sdk: Any, timeout_s: float) -> bool:
        """A cheap health check: can the endpoint answer at all? Never raises."""
        ...


@runtime_checkable
class BatchBackend(Backend, Protocol):
    """A backend that takes every uncached request of a call at once."""

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order (blocking; the client runs it in a thread)."""
        ...

    def is_ready(self) -> bool:
        """Whether the backend is open and can generate."""
        ...


@runtime_checkable
class StreamingBatchBackend(BatchBackend, Protocol):
    """A batch backend that hands back answers as its batches finish, so that the client
    caches them at once and a killed job resumes where it stopped."""

    def generate_stream(self, requests: Sequence[ChatRequest]) -> Iterator[tuple[int, ChatResult]]:
        """(position in `requests`, result) pairs in any order, one per request (blocking)."""
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

    @classmethod
    def build(cls, config: EndpointConfig) -> Backend:
        return cls(config)  # type: ignore[call-arg, return-value]

    @classmethod
    def concurrency_for(cls, config: EndpointConfig) -> int:
        """Requests in flight at once when the endpoint sets no `max_concurrent`."""
        return cls.default_concurrency

    @classmethod
    def context_budget(cls, config: EndpointConfig) -> int | None:
        """Tokens one request may use when the endpoint sets no `max_input_tokens`."""
        return None

    @classmethod
    def chunk_size(cls, config: EndpointConfig) -> int:
        """Requests a batch backend is handed at a time (bounded memory for huge stages)."""
        return 4096

    @classmethod
    def sends_from_worker_processes(cls, config: EndpointConfig) -> bool:
        """Whether large streams may be sent from worker processes (backends/workers.py)."""
        return False

    @classmethod
    def uses_batch_api(cls, config: EndpointConfig) -> bool:
        """Whether misses go through a provider's Batch API (backends/batch_api.py)."""
        return False

    @classmethod
    def returns_logprobs(cls, config: EndpointConfig) -> bool:
        """Whether a request may ask for top log-probabilities and its reply keeps them
        (`ChatRequest.top_logprobs`, backends/token_logprobs.py)."""
        return False

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """The preflight: raise ConfigError / EndpointError when the endpoint cannot do its
        job; a plugged-in backend checks itself when it opens."""


#: Backend name (an endpoint's `backend:`) -> the class (or factory) that builds it.
#: A factory must carry the `is_batch` and `default_concurrency` class attributes.
BACKENDS: dict[str, BackendFactory] = {}
_PLUGIN_KINDS: dict[str, type[BackendTraits]] = {}


def register_backend(name: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make `backend: <name>` available to endpoint definitions."""
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
    """The traits of backend `name`: its class, or the defaults around a plain factory."""
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
    """The registered factory for `name`; ConfigError naming the known ones otherwise."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"unknown backend '{name}'; expected one of {', '.join(BACKENDS) or 'none'}"
        ) from None


def make_backend(config: EndpointConfig) -> Backend:
    """The backend for an endpoint, checked against the protocol of its kind."""
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
