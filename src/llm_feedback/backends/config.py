"""Endpoint definitions: parsed and checked before anything starts or is paid for.

Secrets are never part of an endpoint definition. A definition names a credentials entry
(from `conf/local/credentials.yml`, registered by the project's hook) or falls back to the
usual environment variables; keys are looked up only when a client is opened.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from llm_feedback.backends.base import BACKENDS, backend_factory
from llm_feedback.errors import ConfigError

_registered_credentials: dict[str, dict[str, Any]] = {}


def register_credentials(credentials: Mapping[str, Any]) -> None:
    """Make named credentials entries available to endpoints (called by the Kedro hook)."""
    _registered_credentials.clear()
    for name, entry in (credentials or {}).items():
        if isinstance(entry, Mapping):
            _registered_credentials[name] = dict(entry)


DEFAULT_AZURE_API_VERSION = "2024-10-21"
#: The backends that reach their model over HTTP: only these can send from worker processes.
HTTP_BACKENDS = ("openai", "azure")

# The type each setting must have (None: may be null), checked before anything starts.
_FIELD_KINDS: dict[str, tuple[type | None, ...]] = {
    "max_concurrent": (int, None),
    "timeout_s": (int, float),
    "max_retries": (int,),
    "backoff_base_s": (int, float),
    "backoff_max_s": (int, float),
    "structured_output": (bool, None),
    "max_string_chars": (int, None),
    "cache": (bool,),
    "preflight": (bool,),
    "transport": (str,),
    "max_failure_share": (int, float),
    "max_input_tokens": (int, None),
    "max_media_bytes": (int,),
    "parallel_slots": (int,),
    "context_per_slot": (int,),
    "threads": (int, None),
    "prompt_cache_mib": (int,),
    "base_url": (str, None),
    "credentials": (str, None),
    "api_version": (str, None),
    "azure_endpoint": (str, None),
    "model_path": (str, None),
    "mode": (str,),
    "batch_wait": (bool,),
    "batch_poll_seconds": (int, float),
    "batch_poll_max_seconds": (int, float),
    "batch_unanswered": (str,),
    "batch_max_requests": (int,),
    "batch_max_bytes": (int,),
    "engine_kwargs": (dict,),
    "engine_chunk_size": (int,),
    "ray_address": (str, None),
    "ray_processor": (str,),
    "ray_replicas": (int,),
    "ray_batch_size": (int,),
    "ray_qps": (int, float, None),
    "ray_batch_retries": (int,),
    "workers": (int, str),
}

# Requests per batch and bytes per input file: the OpenAI and Azure Batch API limits.
BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_BYTES = 200 * 1024 * 1024
# vLLM's own names for spreading one engine over GPUs and machines (checked when set).
_VLLM_PARALLEL_SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
_VLLM_EXECUTORS = ("ray", "mp", "uni", "external_launcher")

RAY_PROCESSORS = ("http", "vllm")


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to reach one model."""

    backend: str
    model: str
    name: str = ""
    base_url: str | None = None
    credentials: str | None = None
    api_version: str | None = None
    azure_endpoint: str | None = None
    max_concurrent: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 60.0
    structured_output: bool | None = None
    max_string_chars: int | None = None
    max_tokens_field: str = "max_tokens"
    cache: bool = True
    # openai/azure: "lean" (our HTTP client, the default) or "sdk" (the openai SDK)
    transport: str = "lean"
    # Before the first paid call of a run, ask the endpoint one cheap question.
    preflight: bool = True
    # A node whose calls fail more often than this stops the run (answered calls are cached).
    max_failure_share: float = 0.05
    # Prompts estimated above this many tokens are not sent (status skipped_too_long);
    # None: the local model's context per slot, unlimited elsewhere.
    max_input_tokens: int | None = None
    # The largest image or audio file sent to this endpoint (OpenAI takes 20 MB an image).
    max_media_bytes: int = 20 * 1024 * 1024
    # Processes that send a stage's requests: "auto" (several for an openai/azure endpoint on
    # the lean transport once a stream has thousands of uncached calls, on machines with 4
    # cores or more) or an int >= 1.
    workers: int | str = "auto"
    # local backend
    model_path: str | None = None
    parallel_slots: int = 4
    context_per_slot: int = 4096
    threads: int | None = None
    # llama.cpp keeps the prompts of past requests in memory to serve shared prefixes
    # (its own default, 8 GiB, grew a short run's RSS past 2 GB); 0 turns it off.
    prompt_cache_mib: int = 256
    # openai/azure: "online" (one call per request) or "batch" (the Batch API: half price,
    # answers within 24 h). Batch ids are kept beside the request cache, so a run killed
    # while waiting resumes polling the same batches.
    mode: str = "online"
    # false: submit the batches and stop (the run fails, saying so); a later run collects.
    batch_wait: bool = True
    # Polling starts at batch_poll_seconds and backs off to batch_poll_max_seconds.
    batch_poll_seconds: float = 30.0
    batch_poll_max_seconds: float = 600.0
    # Requests a batch did not answer (failed, expired, cancelled): "retry" sends them
    # through the normal endpoint, "fail" records them as failed calls.
    batch_unanswered: str = "retry"
    batch_max_requests: int = BATCH_MAX_REQUESTS
    batch_max_bytes: int = BATCH_MAX_BYTES
    # vllm backend (and the ray backend's vllm processor): vllm.LLM's keyword arguments
    # (tensor_parallel_size, data_parallel_size, distributed_executor_backend: ray, ...),
    # and requests per LLM.generate call, so that a quarter of a million prompts never sit
    # in one list.
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    engine_chunk_size: int = 4096
    # ray backend: a cluster address (null: RAY_ADDRESS, else a local Ray), "http" (our
    # client in Ray actors, for base_url) or "vllm" (ray.data.llm on GPU nodes), the
    # number of workers or engine replicas, the rows one replica takes at a time, a cap
    # on requests per second across all workers, and how often rows that came back
    # failed are handed to Ray again.
    ray_address: str | None = None
    ray_processor: str = "http"
    ray_replicas: int = 2
    ray_batch_size: int = 64
    ray_qps: float | None = None
    ray_batch_retries: int = 1

    def __post_init__(self) -> None:
        where = f"endpoint '{self.name}'" if self.name else "endpoint"
        self._check_types(where)
        if not isinstance(self.backend, str) or self.backend not in BACKENDS:
            # The registry (llm_feedback.backends.base) is filled when the package loads.
            raise ConfigError(
                f"{where}: unknown backend '{self.backend}'; "
                f"expected one of {', '.join(BACKENDS) or 'none registered'}"
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"{where}: 'model' must be a non-empty string")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ConfigError(f"{where}: 'max_concurrent' must be >= 1")
        if self.timeout_s <= 0:
            raise ConfigError(f"{where}: 'timeout_s' must be > 0")
        if self.max_retries < 0:
            raise ConfigError(f"{where}: 'max_retries' must be >= 0")
        if self.max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ConfigError(
                f"{where}: 'max_tokens_field' must be max_tokens or max_completion_tokens"
            )
        if self.max_string_chars is not None and self.max_string_chars < 1:
            raise ConfigError(f"{where}: 'max_string_chars' must be >= 1 or null")
        if self.max_media_bytes < 1:
            raise ConfigError(f"{where}: 'max_media_bytes' must be >= 1")
        if self.parallel_slots < 1 or self.context_per_slot < 256:
            raise ConfigError(
                f"{where}: 'parallel_slots' must be >= 1 and 'context_per_slot' >= 256"
            )
        if self.prompt_cache_mib < 0:
            raise ConfigError(f"{where}: 'prompt_cache_mib' must be >= 0")
        self._check_ray(where)
        if self.credentials is not None and self.credentials not in _registered_credentials:
            known = ", ".join(sorted(_registered_credentials)) or "none registered"
            raise ConfigError(
                f"{where}: credentials entry '{self.credentials}' not found in "
                f"conf/local/credentials.yml ({known})"
            )

    def _check_types(self, where: str) -> None:
        for name, kinds in _FIELD_KINDS.items():
            value = getattr(self, name)
            if value is None and None in kinds:
                continue
            if isinstance(value, bool) != (bool in kinds) or not isinstance(
                value, tuple(kind for kind in kinds if kind is not None)
            ):
                wanted = " or ".join("null" if k is None else k.__name__ for k in kinds)
                dotted = f"endpoints.{self.name}.{name}" if self.name else name
                raise ConfigError(f"{dotted} must be {wanted}, got {value!r}")
        if self.transport not in ("lean", "sdk"):
            raise ConfigError(f"{where}: 'transport' must be lean or sdk, got {self.transport!r}")
        if not 0 <= self.max_failure_share <= 1:
            raise ConfigError(f"{where}: 'max_failure_share' must lie between 0 and 1")
        dotted = f"endpoints.{self.name}.workers" if self.name else "workers"
        if isinstance(self.workers, str) and self.workers != "auto":
            raise ConfigError(f"{dotted} must be auto or an int >= 1, got {self.workers!r}")
        if isinstance(self.workers, int) and self.workers < 1:
            raise ConfigError(f"{dotted} must be auto or an int >= 1, got {self.workers!r}")
        if self.workers not in ("auto", 1) and self.backend not in HTTP_BACKENDS:
            raise ConfigError(
                f"{dotted}: worker processes send to HTTP endpoints (openai, azure); "
                f"backend '{self.backend}' runs its model in one process: use 1 or auto"
            )
        self._check_batch(where)
        self._check_engine(where)

    def _check_batch(self, where: str) -> None:
        if self.mode not in ("online", "batch"):
            raise ConfigError(f"{where}: 'mode' must be online or batch, got {self.mode!r}")
        if self.batch_unanswered not in ("retry", "fail"):
            raise ConfigError(
                f"{where}: 'batch_unanswered' must be retry or fail, got {self.batch_unanswered!r}"
            )
        if not 0 < self.batch_poll_seconds <= self.batch_poll_max_seconds:
            raise ConfigError(
                f"{where}: 'batch_poll_seconds' must be > 0 and <= 'batch_poll_max_seconds'"
            )
        if not 1 <= self.batch_max_requests <= BATCH_MAX_REQUESTS:
            raise ConfigError(
                f"{where}: 'batch_max_requests' must lie between 1 and {BATCH_MAX_REQUESTS}"
            )
        if not 1024 <= self.batch_max_bytes <= BATCH_MAX_BYTES:
            raise ConfigError(
                f"{where}: 'batch_max_bytes' must lie between 1024 and {BATCH_MAX_BYTES}"
            )
        if self.mode == "batch" and (
            self.backend not in ("openai", "azure") or self.transport != "lean"
        ):
            raise ConfigError(
                f"{where}: 'mode: batch' needs backend openai or azure with transport lean "
                f"(got backend {self.backend}, transport {self.transport})"
            )

    def _check_engine(self, where: str) -> None:
        if self.engine_chunk_size < 1:
            raise ConfigError(f"{where}: 'engine_chunk_size' must be >= 1")
        for name in _VLLM_PARALLEL_SIZES:
            value = self.engine_kwargs.get(name, 1)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{where}: 'engine_kwargs.{name}' must be an integer >= 1")
        executor = self.engine_kwargs.get("distributed_executor_backend")
        if executor is not None and executor not in _VLLM_EXECUTORS:
            raise ConfigError(
                f"{where}: 'engine_kwargs.distributed_executor_backend' must be one of "
                f"{', '.join(_VLLM_EXECUTORS)}, got {executor!r}"
            )

    def _check_ray(self, where: str) -> None:
        if self.ray_processor not in RAY_PROCESSORS:
            raise ConfigError(
                f"{where}: 'ray_processor' must be one of {', '.join(RAY_PROCESSORS)}, "
                f"got {self.ray_processor!r}"
            )
        for name in ("ray_replicas", "ray_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{where}: '{name}' must be >= 1")
        if self.ray_qps is not None and self.ray_qps <= 0:
            raise ConfigError(f"{where}: 'ray_qps' must be > 0 or null")
        if self.ray_batch_retries < 0:
            raise ConfigError(f"{where}: 'ray_batch_retries' must be >= 0")

    @classmethod
    def from_dict(cls, definition: Mapping[str, Any], name: str = "") -> EndpointConfig:
        if not isinstance(definition, Mapping):
            raise ConfigError(f"endpoint '{name}' must be a mapping, got {definition!r}")
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(definition) - allowed)
        if unknown:
            raise ConfigError(
                f"endpoint '{name}': unknown setting(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        values = dict(definition)
        values.setdefault("name", name)
        if "backend" not in values or "model" not in values:
            raise ConfigError(f"endpoint '{name}': 'backend' and 'model' are required")
        return cls(**values)

    @property
    def concurrency(self) -> int:
        if self.max_concurrent is not None:
            return self.max_concurrent
        if self.backend == "local":
            return self.parallel_slots  # one request per llama.cpp slot
        return backend_factory(self.backend).default_concurrency

    @property
    def input_token_budget(self) -> int | None:
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        return self.context_per_slot if self.backend == "local" else None

    @property
    def accepts_media(self) -> bool:
        """Whether the backend takes images and audio (a text-only one says `accepts_media
        = False`)."""
        return getattr(backend_factory(self.backend), "accepts_media", True)

    @property
    def uses_structured_output(self) -> bool:
        # llama.cpp, vLLM and OpenAI all enforce JSON schemas; other servers may not.
        return True if self.structured_output is None else self.structured_output

    @property
    def is_openai_http(self) -> bool:
        """Sent to an OpenAI-compatible URL: `openai`, or `ray` with its HTTP processor."""
        return self.backend == "openai" or (self.backend == "ray" and self.ray_processor == "http")

    def resolved_base_url(self) -> str | None:
        if self.is_openai_http:
            return api_base(
                self.base_url
                or os.environ.get("OPENAI_BASE_URL")
                or os.environ.get("OPENAI_API_URL")
            )
        return self.base_url

    def resolved_azure_endpoint(self) -> str | None:
        return azure_resource(
            self.azure_endpoint
            or self.base_url
            or os.environ.get("AZURE_ENDPOINT")
            or os.environ.get("AZURE_OPENAI_ENDPOINT")
        )

    def resolved_api_version(self) -> str:
        """Azure's API version: the endpoint's, else the environment's, else a default."""
        for value in (
            self.api_version,
            os.environ.get("AZURE_API_VERSION"),
            os.environ.get("OPENAI_API_VERSION"),  # the Azure SDK's own name
            os.environ.get("API_VERSION"),  # lmms-eval's
        ):
            if value:
                return value
        return DEFAULT_AZURE_API_VERSION

    def key_source(self) -> str:
        """Where this endpoint's key comes from, for messages (never the key itself)."""
        if self.credentials is not None:
            return f"credentials entry '{self.credentials}' in conf/local/credentials.yml"
        if self.backend == "azure":
            return "AZURE_API_KEY / AZURE_OPENAI_API_KEY"
        if self.is_openai_http:
            return "OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else "no key set"
        return "no key needed"

    def api_key(self) -> str | None:
        """The secret for this endpoint, or None; never logged or stored."""
        if self.credentials is not None:
            entry = _registered_credentials[self.credentials]
            return entry.get("api_key") or entry.get("key")
        if self.backend == "azure":
            return os.environ.get("AZURE_API_KEY") or os.environ.get("AZURE_OPENAI_API_KEY")
        if self.is_openai_http:
            return os.environ.get("OPENAI_API_KEY")
        return None

    def describe(self) -> str:
        """The endpoint as messages name it: name, backend, URL, where its key comes from."""
        url = self.public_dict()["base_url"]
        if url is None and self.is_openai_http:
            url = "https://api.openai.com/v1"
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
            "base_url": self.resolved_base_url()
            if self.is_openai_http
            else self.resolved_azure_endpoint()
            if self.backend == "azure"
            else None,
            "max_concurrent": self.concurrency,
        }


def api_base(url: str | None) -> str | None:
    """A base URL from what users set: lmms-eval's OPENAI_API_URL is the full chat
    completions URL (".../v1/chat/completions"); the SDK wants ".../v1"."""
    if not url:
        return url
    url = url.split("?", 1)[0].rstrip("/")
    for suffix in ("/chat/completions", "/completions"):
        if url.endswith(suffix):
            return url[: -len(suffix)]
    return url


def azure_resource(url: str | None) -> str | None:
    """The Azure resource URL from a full deployment URL (".../openai/deployments/...")."""
    if not url:
        return url
    url = url.split("?", 1)[0].rstrip("/")
    return url.split("/openai/", 1)[0] if "/openai/" in url + "/" else url


def endpoint_from_env(overrides: Mapping[str, Any] | None = None) -> EndpointConfig:
    """A judge endpoint from the environment variables the seed evaluators used.

    MODEL_VERSION, API_TYPE (openai|azure), OPENAI_API_URL (a base URL or the full chat
    completions URL) / OPENAI_BASE_URL, OPENAI_API_KEY; for Azure AZURE_ENDPOINT or
    AZURE_OPENAI_ENDPOINT, AZURE_API_KEY or AZURE_OPENAI_API_KEY, and AZURE_API_VERSION,
    OPENAI_API_VERSION or API_VERSION. Explicit overrides win.
    """
    api_type = os.environ.get("API_TYPE", "openai").strip().lower()
    if api_type not in ("openai", "azure"):
        raise ConfigError(f"API_TYPE must be 'openai' or 'azure', got '{api_type}'")
    definition: dict[str, Any] = {"backend": api_type, "name": "env"}
    if os.environ.get("MODEL_VERSION"):
        definition["model"] = os.environ["MODEL_VERSION"]
    definition.update(overrides or {})
    if "model" not in definition:
        raise ConfigError("no judge model: set MODEL_VERSION or pass a 'model'")
    return EndpointConfig.from_dict(definition, name=str(definition["name"]))
