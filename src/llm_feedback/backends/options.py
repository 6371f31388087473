"""The settings each backend declares for itself, and the one checker for every setting.

An endpoint definition is flat YAML (`backend: local`, `parallel_slots: 4`): the keys every
endpoint has go to `EndpointConfig`, the rest to the options class its backend declares
(`options_type`). Each field's type comes from its annotation (a `Literal` lists the
allowed values) and its bounds from `bounds(...)`, so a setting is declared once: there is
no separate table of kinds to keep in step with the fields.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from llm_feedback.core.errors import ConfigError

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
# Requests per batch and bytes per input file: the OpenAI and Azure Batch API limits.
BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_BYTES = 200 * 1024 * 1024
# vLLM's own names for spreading one engine over GPUs and machines (checked when set).
_VLLM_PARALLEL_SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
_VLLM_EXECUTORS = ("ray", "mp", "uni", "external_launcher")
_DAY_S = 86_400.0


def bounds(low: float, high: float, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field whose number must lie in [low, high] (and be finite).

    Args:
        low: The smallest value allowed.
        high: The largest value allowed.
        default: The field's default; none when left out.

    Returns:
        The field, its bounds in its metadata (checked by `check_fields`).
    """
    return field(default=default, metadata={"bounds": (low, high)})


def _allowed(hint: Any) -> tuple[tuple[type, ...], tuple[Any, ...]]:
    """(types, literal values) an annotation admits; None stands for null."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        kinds: tuple[type, ...] = ()
        values: tuple[Any, ...] = ()
        for part in typing.get_args(hint):
            more_kinds, more_values = _allowed(part)
            kinds, values = kinds + more_kinds, values + more_values
        return kinds, values
    if origin is Literal:
        return (), typing.get_args(hint)
    if hint is type(None):
        return (type(None),), ()
    if hint is float:
        return (int, float), ()
    return (origin or hint,), ()


def _wanted(kinds: tuple[type, ...], values: tuple[Any, ...]) -> str:
    names = ["null" if kind is type(None) else kind.__name__ for kind in kinds]
    return " or ".join(names + [repr(value) for value in values])


def check_fields(settings: Any, prefix: str) -> None:
    """ConfigError naming `prefix.<field>` for a value of the wrong type, not among its
    literal values, not finite, or outside its bounds.

    Args:
        settings: A dataclass instance whose field types (and `bounds`) are checked.
        prefix: Where the settings stand in the configuration; fields are named below it.

    Raises:
        ConfigError: A field's value breaks its type, literal values or bounds.
    """
    hints = typing.get_type_hints(type(settings))
    for spec in dataclasses.fields(settings):
        kinds, values = _allowed(hints[spec.name])
        if not kinds and not values:
            continue
        value = getattr(settings, spec.name)
        where = f"{prefix}.{spec.name}" if prefix else spec.name
        is_bool = isinstance(value, bool)
        typed = any(
            isinstance(value, kind) and (is_bool == (kind is bool)) for kind in kinds if kind
        )
        literal = any(type(value) is type(option) and value == option for option in values)
        if not (typed or literal):
            raise ConfigError(f"{where} must be {_wanted(kinds, values)}, got {value!r}")
        low_high = spec.metadata.get("bounds")
        if low_high is None or is_bool or not isinstance(value, int | float):
            continue
        low, high = low_high
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(f"{where} must lie between {low:g} and {high:g}, got {value!r}")


@dataclass(frozen=True)
class BackendOptions:
    """A backend without settings of its own (the default for plugged-in backends)."""

    #: Environment variables holding the key, in the order they are read (none: no key).
    key_variables: ClassVar[tuple[str, ...]] = ()

    def check(self, where: str) -> None:
        """Rules across fields, beyond each field's type and bounds (`check_fields`).

        Args:
            where: Where the options stand in the configuration, for error messages.

        Raises:
            ConfigError: The fields break a rule (in subclasses that set some).
        """

    def public_url(self) -> str | None:
        """Where the model is reached, as messages and datasets may show it."""
        return None


def api_base(url: str | None) -> str | None:
    """A base URL from what users set: lmms-eval's OPENAI_API_URL is the full chat
    completions URL (".../v1/chat/completions"); the SDK wants ".../v1".

    Args:
        url: A base URL or a full (chat) completions URL; None or empty for none.

    Returns:
        The URL without its query and completions path (`url` itself when empty).
    """
    if not url:
        return url
    url = url.split("?", 1)[0].rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def azure_resource(url: str | None) -> str | None:
    """The Azure resource URL from a full deployment URL (".../openai/deployments/...").

    Args:
        url: A resource or deployment URL; None or empty for none.

    Returns:
        The URL up to `/openai/`, without its query (`url` itself when empty).
    """
    if not url:
        return url
    url = url.split("?", 1)[0].rstrip("/")
    return url.split("/openai/", 1)[0] if "/openai/" in url + "/" else url


def _openai_base(base_url: str | None) -> str | None:
    return api_base(
        base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_URL")
    )


@dataclass(frozen=True)
class OpenAIOptions(BackendOptions):
    """`openai`: any chat completions server (OpenAI, `vllm serve`, llama.cpp)."""

    key_variables: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)

    base_url: str | None = None
    # "lean" (our HTTP client, the default) or "sdk" (the openai SDK)
    transport: Literal["lean", "sdk"] = "lean"
    # "online" (one call per request) or "batch" (the Batch API: half price, answers
    # within 24 h). Batch ids are kept beside the request cache, so a run killed while
    # waiting resumes polling the same batches.
    mode: Literal["online", "batch"] = "online"
    # false: submit the batches and stop (the run fails, saying so); a later run collects.
    batch_wait: bool = True
    # Polling starts at batch_poll_seconds and backs off to batch_poll_max_seconds.
    batch_poll_seconds: float = bounds(0.001, _DAY_S, 30.0)
    batch_poll_max_seconds: float = bounds(0.001, _DAY_S, 600.0)
    # Requests a batch did not answer (failed, expired, cancelled): "retry" sends them
    # through the normal endpoint, "fail" records them as failed calls.
    batch_unanswered: Literal["retry", "fail"] = "retry"
    batch_max_requests: int = bounds(1, BATCH_MAX_REQUESTS, BATCH_MAX_REQUESTS)
    batch_max_bytes: int = bounds(1024, BATCH_MAX_BYTES, BATCH_MAX_BYTES)

    def check(self, where: str) -> None:
        """The batch polling interval is within its maximum, and batch mode uses the lean transport.

        Args:
            where: Where the options stand in the configuration, for error messages.

        Raises:
            ConfigError: Either rule is broken.
        """
        if self.batch_poll_seconds > self.batch_poll_max_seconds:
            raise ConfigError(
                f"{where}.batch_poll_seconds must be <= batch_poll_max_seconds "
                f"({self.batch_poll_seconds} > {self.batch_poll_max_seconds})"
            )
        if self.mode == "batch" and self.transport != "lean":
            raise ConfigError(f"{where}.mode: batch needs transport lean, got {self.transport}")

    def resolved_base_url(self) -> str | None:
        return _openai_base(self.base_url)

    def public_url(self) -> str | None:
        return self.resolved_base_url() or DEFAULT_OPENAI_URL


@dataclass(frozen=True)
class AzureOptions(OpenAIOptions):
    """`azure`: an Azure OpenAI resource (key auth), its deployment named by `model`."""

    key_variables: ClassVar[tuple[str, ...]] = ("AZURE_API_KEY", "AZURE_OPENAI_API_KEY")

    api_version: str | None = None
    azure_endpoint: str | None = None

    def resolved_endpoint(self) -> str | None:
        return azure_resource(
            self.azure_endpoint
            or self.base_url
            or os.environ.get("AZURE_ENDPOINT")
            or os.environ.get("AZURE_OPENAI_ENDPOINT")
        )

    def resolved_api_version(self) -> str:
        """The endpoint's API version, else the environment's, else a default."""
        for value in (
            self.api_version,
            os.environ.get("AZURE_API_VERSION"),
            os.environ.get("OPENAI_API_VERSION"),  # the Azure SDK's own name
            os.environ.get("API_VERSION"),  # lmms-eval's
        ):
            if value:
                return value
        return DEFAULT_AZURE_API_VERSION

    def public_url(self) -> str | None:
        return self.resolved_endpoint()


@dataclass(frozen=True)
class LocalOptions(BackendOptions):
    """`local`: the embedded llama.cpp model (see backends/local.py)."""

    model_path: str | None = None
    parallel_slots: int = bounds(1, 256, 4)
    context_per_slot: int = bounds(256, 1_048_576, 4096)
    threads: int | None = bounds(1, 1024, None)
    # llama.cpp keeps the prompts of past requests in memory to serve shared prefixes
    # (its own default, 8 GiB, grew a short run's RSS past 2 GB); 0 turns it off.
    prompt_cache_mib: int = bounds(0, 1_048_576, 256)


@dataclass(frozen=True)
class VLLMOptions(BackendOptions):
    """`vllm`: vllm.LLM's keyword arguments (tensor_parallel_size, data_parallel_size,
    distributed_executor_backend: ray, ...), and requests per LLM.generate call, so that a
    quarter of a million prompts never sit in one list."""

    engine_kwargs: dict = field(default_factory=dict)
    engine_chunk_size: int = bounds(1, 10_000_000, 4096)

    def check(self, where: str) -> None:
        """The engine's parallel sizes and executor are valid (`check_engine_kwargs`).

        Args:
            where: Where the options stand in the configuration, for error messages.

        Raises:
            ConfigError: An engine setting is invalid.
        """
        check_engine_kwargs(self.engine_kwargs, where)


def check_engine_kwargs(engine_kwargs: dict, where: str) -> None:
    """Check the vLLM engine's parallel sizes (integers >= 1) and distributed executor.

    Args:
        engine_kwargs: The keyword arguments for the vLLM engine.
        where: Where they stand in the configuration, for error messages.

    Raises:
        ConfigError: A parallel size is not an integer >= 1, or the executor is unknown.
    """
    for name in _VLLM_PARALLEL_SIZES:
        value = engine_kwargs.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}.engine_kwargs.{name} must be an integer >= 1")
    executor = engine_kwargs.get("distributed_executor_backend")
    if executor is not None and executor not in _VLLM_EXECUTORS:
        raise ConfigError(
            f"{where}.engine_kwargs.distributed_executor_backend must be one of "
            f"{', '.join(_VLLM_EXECUTORS)}, got {executor!r}"
        )


@dataclass(frozen=True)
class RayOptions(BackendOptions):
    """`ray`: a cluster address (null: RAY_ADDRESS, else a local Ray), "http" (our client
    in Ray actors, for base_url) or "vllm" (ray.data.llm on GPU nodes), the number of
    workers or engine replicas, the rows one replica takes at a time, a cap on requests
    per second across all workers, and how often rows that came back failed are handed
    to Ray again."""

    base_url: str | None = None
    # The vllm processor's engines: vllm.LLM's keyword arguments (see VLLMOptions).
    engine_kwargs: dict = field(default_factory=dict)
    ray_address: str | None = None
    ray_processor: Literal["http", "vllm"] = "http"
    ray_replicas: int = bounds(1, 10_000, 2)
    ray_batch_size: int = bounds(1, 1_000_000, 64)
    ray_qps: float | None = bounds(0.001, 1_000_000, None)
    ray_batch_retries: int = bounds(0, 100, 1)

    def check(self, where: str) -> None:
        """The engine's parallel sizes and executor are valid (`check_engine_kwargs`).

        Args:
            where: Where the options stand in the configuration, for error messages.

        Raises:
            ConfigError: An engine setting is invalid.
        """
        check_engine_kwargs(self.engine_kwargs, where)

    @property
    def key_variables(self) -> tuple[str, ...]:  # type: ignore[override]
        return OpenAIOptions.key_variables if self.ray_processor == "http" else ()

    def resolved_base_url(self) -> str | None:
        return _openai_base(self.base_url) if self.ray_processor == "http" else None

    def public_url(self) -> str | None:
        return self.resolved_base_url()


def option_names(options_type: type[BackendOptions]) -> frozenset[str]:
    """The settings a backend's options class takes.

    Args:
        options_type: The options dataclass.

    Returns:
        Its field names.
    """
    return frozenset(spec.name for spec in dataclasses.fields(options_type))
