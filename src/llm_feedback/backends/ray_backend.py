"""A stage's uncached requests spread over a Ray cluster (`pip install -e ".[ray]"`).

The endpoint's `ray_processor` picks how Ray answers them:

- `http` (the default), for any OpenAI-compatible `base_url`: Ray Data `map_batches` over
  a pool of `ray_replicas` actors, each running our own `LLMClient` (the lean transport,
  retries with backoff that honour Retry-After, timeouts, redacted errors) with its share
  of `max_concurrent` and of the `ray_qps` cap. Ray Data LLM's own HTTP processor is not
  used: it sends a batch's requests one after another unless `qps` is set, retries
  neither HTTP 500 nor by Retry-After, and a row that runs out of retries fails the
  whole dataset.
- `vllm`, for open models on GPU nodes: Ray Data LLM's vLLM engine processor
  (`ray.data.llm`) with `ray_replicas` engines of `engine_kwargs.tensor_parallel_size` x
  `pipeline_parallel_size` GPUs each, `ray_batch_size` rows per batch. The cluster needs
  `ray[llm]` (which brings its own vLLM).

The client's request cache stays in front: only misses reach Ray. Answers come back as
Ray finishes each batch, keyed by a row id (never by position), and the client caches
each one as it arrives, so a killed job resumes where it stopped. Ray restarts a worker
that dies and runs its batch again up to `ray_batch_retries` times; after that the rows
Ray did not answer come back failed, saying why.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import logging
import math
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from llm_feedback.backends.base import BackendTraits, EndpointConfig, register_credentials
from llm_feedback.backends.client import ClientStats, LLMClient
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.options import RayOptions
from llm_feedback.backends.preflight import probe_over_http
from llm_feedback.backends.secrets import redact
from llm_feedback.core.errors import ConfigError, EndpointError

logger = logging.getLogger(__name__)

# Our row id column: the vLLM stage writes a `request_id` column of its own.
ROW_ID = "lf_row_id"
_RESULT_COLUMNS = ("text", "finish_reason", "prompt_tokens", "completion_tokens", "latency_s")
# The name under which a worker registers the key the driver resolved for it.
_WORKER_CREDENTIALS = "ray-worker"


def _request_json(request: ChatRequest) -> str:
    """A request as one JSON string: one Arrow column, whatever its schema looks like."""
    return json.dumps(
        {
            "messages": list(request.messages),
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "stop": list(request.stop) if request.stop else None,
            "seed": request.seed,
            "json_schema": request.json_schema,
            "attempt": request.attempt,
        },
        ensure_ascii=False,
    )


def _request_from_json(payload: str) -> ChatRequest:
    fields = json.loads(payload)
    stop = fields.pop("stop")
    return ChatRequest(
        messages=tuple(fields.pop("messages")),
        stop=tuple(stop) if stop else None,
        **fields,
    )


class _Pacer:
    """At most `per_second` sends a second, retries included (one event loop, no lock)."""

    def __init__(self, per_second: float) -> None:
        self._interval = 1.0 / per_second
        self._next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        slot = max(now, self._next)
        self._next = slot + self._interval
        if slot > now:
            await asyncio.sleep(slot - now)


class _PacedBackend:
    """A request backend whose sends wait for the pacer; everything else is the inner one."""

    def __init__(self, inner: Any, pacer: _Pacer) -> None:
        self._inner = inner
        self._pacer = pacer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, sdk: Any, request: ChatRequest) -> ChatResult:
        await self._pacer.wait()
        return await self._inner.send(sdk, request)


class ChatWorker:
    """One Ray actor of the http processor: answers a batch of rows with our own client.

    Requests that fail after the client's retries come back as failed rows (with the
    error); a tripped circuit breaker fails only the rows not yet answered. The client's
    HTTP session lives for one batch.
    """

    def __init__(
        self, endpoint: dict[str, Any], api_key: str | None, concurrency: int, qps: float | None
    ) -> None:
        """A worker with its own client for the endpoint (no cache, no preflight).

        Args:
            endpoint: The endpoint's definition as the driver sent it.
            api_key: The endpoint's key, registered as this worker's credentials; None for none.
            concurrency: Requests in flight at once in this worker.
            qps: Requests a second this worker may send; None for no pacing.
        """
        if api_key:
            register_credentials({_WORKER_CREDENTIALS: {"api_key": api_key}})
        config = EndpointConfig.from_dict(
            {
                **endpoint,
                "max_concurrent": concurrency,
                "cache": False,  # the driver's cache is the one that counts
                "preflight": False,
                "credentials": _WORKER_CREDENTIALS if api_key else None,
            },
            name=endpoint["name"],
        )
        self._client = LLMClient(config, cache_path=None, progress=False)
        if qps is not None:
            self._client.backend = _PacedBackend(self._client.backend, _Pacer(qps))

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        requests = [_request_from_json(payload) for payload in batch["request"]]
        answered: dict[int, ChatResult] = {}
        # The breaker judges each batch on its own, as if it were a small run.
        self._client.stats = ClientStats()
        try:
            # Open for the batch and closed after it: Ray ends an actor without running its
            # finalisers, which left the HTTP session open ("Unclosed client session").
            with self._client:
                self._client.complete_many(requests, desc=None, on_result=answered.__setitem__)
        except EndpointError as error:
            failure = ChatResult.failure(str(error), model=self._client.model)
            answered = {index: answered.get(index, failure) for index in range(len(requests))}
        results = [answered[index] for index in range(len(requests))]
        columns: dict[str, list[Any]] = {ROW_ID: list(batch[ROW_ID])}
        for name in (*_RESULT_COLUMNS, "error"):
            columns[name] = [getattr(result, name) for result in results]
        return columns


def _result_from_http_row(row: dict[str, Any], model: str) -> ChatResult:
    return ChatResult(
        text=row["text"],
        finish_reason=row["finish_reason"],
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        latency_s=float(row["latency_s"]),
        error=row["error"],
        model=model,
    )


def _vllm_row(row: dict[str, Any]) -> dict[str, Any]:
    """The vLLM processor's input columns from our request (runs on the cluster)."""
    request = _request_from_json(row["request"])
    schema = request.json_schema
    return {
        ROW_ID: row[ROW_ID],
        "lf_max_tokens": request.max_tokens,
        "messages": list(request.messages),
        "sampling_params": {
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            # Empty rather than null: the rows of a batch share one Arrow column each.
            "stop": list(request.stop or ()),
            "seed": request.seed,
            # A JSON string: schemas of different shapes must share one Arrow column.
            "structured_outputs": {"json": json.dumps(schema)} if schema else None,
        },
    }


def _result_from_vllm_row(row: dict[str, Any], model: str) -> ChatResult:
    error = row.get("__inference_error__") or None
    if error:
        return ChatResult.failure(redact(f"vLLM on Ray: {error}"), model=model)
    generated = int(row["num_generated_tokens"])
    return ChatResult(
        text=row["generated_text"],
        # The processor does not report vLLM's finish reason; a full budget means cut off.
        finish_reason="length" if generated >= int(row["lf_max_tokens"]) else "stop",
        prompt_tokens=int(row["num_input_tokens"]),
        completion_tokens=generated,
        latency_s=float(row.get("time_taken_llm") or 0.0),
        model=model,
    )


def _http_endpoint(config: EndpointConfig) -> dict[str, Any]:
    """The definition each http worker's own `openai` endpoint is built from."""
    endpoint = {
        name: getattr(config, name)
        for name in (
            "name",
            "model",
            "timeout_s",
            "max_retries",
            "backoff_base_s",
            "backoff_max_s",
            "structured_output",
            "max_tokens_field",
            "max_reply_bytes",
        )
    }
    return {**endpoint, "backend": "openai", "base_url": config.options.resolved_base_url()}


def _worker_config(config: EndpointConfig, endpoint: dict[str, Any]) -> EndpointConfig:
    return EndpointConfig.from_dict(
        {**endpoint, "credentials": config.credentials}, name=endpoint["name"]
    )


def check_ray_installed(config: EndpointConfig) -> None:
    """ConfigError, naming the extra to install, when this machine cannot drive Ray.

    Args:
        config: The endpoint.

    Raises:
        ConfigError: Ray is missing, or vLLM is missing for the vllm processor.
    """
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(
            f"endpoint '{config.name}' uses the ray backend, which needs the ray extra: "
            'pip install -e ".[ray]"'
        )
    # ray.data.llm imports vLLM and torch as it builds the processor, here on the driver.
    if config.options.ray_processor == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            f"endpoint '{config.name}' uses the ray backend's vllm processor, which needs "
            'ray[llm] (and with it vLLM) here and on the cluster: pip install -e ".[ray-gpu]"'
        )


class RayBackend(BackendTraits):
    """Ray Data over a Ray cluster (a `StreamingBatchBackend`)."""

    is_batch = True
    # Requests reach the workers as JSON strings (`_request_json`), which have no form for
    # images or audio: rows with media are refused before any call (EndpointConfig).
    accepts_media = False
    default_concurrency = 32  # http: requests in flight across all workers
    options_type: ClassVar[type] = RayOptions

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """Ray (and vLLM for its processor) is installed; the http processor's server answers.

        Args:
            config: The endpoint.
            timeout_s: Seconds to wait for the server's answer.

        Raises:
            ConfigError: A needed package is missing.
            EndpointError: The http processor's server cannot be reached or refuses to serve.
        """
        check_ray_installed(config)
        if config.options.ray_processor == "http":
            # The workers' own transport, asked from here.
            probe_over_http(_worker_config(config, _http_endpoint(config)), timeout_s)

    def __init__(self, config: EndpointConfig) -> None:
        """A backend over Ray Data; Ray itself is started when the backend opens.

        Args:
            config: The endpoint.

        Raises:
            ConfigError: The http processor has no base URL to call.
        """
        self.config = config
        self.model = config.model
        self.options: RayOptions = config.options
        if self.options.ray_processor == "http" and not self.options.resolved_base_url():
            raise ConfigError(
                f"endpoint '{config.name}': the ray backend's http processor needs "
                "'base_url' (or OPENAI_BASE_URL): the OpenAI-compatible server to call"
            )
        self._ray: Any = None

    @property
    def cache_namespace(self) -> str:
        # The same server or weights as the openai / vllm backends: answers are shared.
        if self.options.ray_processor == "http":
            return f"openai:{self.options.resolved_base_url()}"
        return "vllm"

    def open(self) -> None:
        if self._ray is not None:
            return
        check_ray_installed(self.config)
        ray = importlib.import_module("ray")
        importlib.import_module("ray.data")
        if not ray.is_initialized():
            # Ray stays up for the rest of the process (it stops at exit): the next stage
            # starts only its worker pool.
            address = _current_cluster(self.options.ray_address or os.environ.get("RAY_ADDRESS"))
            logger.info("Ray: %s", f"connecting to {address}" if address else "starting locally")
            _use_token_if_needed(self.config, address)
            try:
                ray.init(address=address, include_dashboard=False)
            except ConnectionError as error:
                raise EndpointError(_join_failure(self.config, address, error)) from None
        # The client's own bar counts answers; Ray's bars would print over it.
        ray.data.DataContext.get_current().enable_progress_bars = False
        self._ray = ray

    def close(self) -> None:
        self._ray = None

    def is_ready(self) -> bool:
        return self._ray is not None and self._ray.is_initialized()

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        """One result per request, in order (`generate_stream`, gathered).

        Args:
            requests: The requests.

        Returns:
            One result per request, in the order of `requests`.
        """
        results: list[ChatResult | None] = [None] * len(requests)
        for position, result in self.generate_stream(requests):
            results[position] = result
        return results  # type: ignore[return-value]

    def generate_stream(self, requests: Sequence[ChatRequest]) -> Iterator[tuple[int, ChatResult]]:
        """Answer the requests as one Ray dataset spread over the replicas, as rows finish.

        When Ray gives up on a batch, every row not yet answered fails, saying why.

        Args:
            requests: The requests.

        Yields:
            (position in `requests`, result) for each request, in any order.
        """
        if not requests:
            return
        rows = [
            {ROW_ID: position, "request": _request_json(request)}
            for position, request in enumerate(requests)
        ]
        # A small call still spreads over every replica.
        per_replica = math.ceil(len(rows) / self.options.ray_replicas)
        batch_size = min(self.options.ray_batch_size, per_replica)
        blocks = math.ceil(len(rows) / batch_size)
        dataset = self._ray.data.from_items(rows, override_num_blocks=blocks)
        if self.options.ray_processor == "http":
            answered, to_result = self._http(dataset, batch_size), _result_from_http_row
        else:
            answered, to_result = self._vllm(dataset, batch_size), _result_from_vllm_row
        unanswered = set(range(len(requests)))
        try:
            for row in answered.iter_rows():
                position = int(row[ROW_ID])
                if position in unanswered:  # a batch Ray ran twice answers once
                    unanswered.discard(position)
                    yield position, to_result(row, self.model)
        except Exception as error:
            # Ray gave up on a batch: every row it has not answered fails, saying why.
            message = redact(
                f"Ray did not answer this row (its batch failed, retries spent): "
                f"{type(error).__name__}: {error}"
            )[:2000]
            logger.error("%s: %s", self.config.describe(), message)
            for position in sorted(unanswered):
                yield position, ChatResult.failure(message, model=self.model)

    def _http(self, dataset: Any, batch_size: int) -> Any:
        replicas, qps = self.options.ray_replicas, self.options.ray_qps
        endpoint = _http_endpoint(self.config)
        with warnings.catch_warnings():
            # Ray 2.60 names no parameter for an actor's restarts and task retries but these
            # keywords (its `ray_remote_args`), and warns that they will be renamed.
            warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
            return dataset.map_batches(
                ChatWorker,
                fn_constructor_kwargs={
                    "endpoint": endpoint,
                    "api_key": self.config.api_key(),
                    "concurrency": max(1, math.ceil(self.config.concurrency / replicas)),
                    "qps": qps / replicas if qps is not None else None,
                },
                batch_size=batch_size,
                compute=self._ray.data.ActorPoolStrategy(size=replicas),
                # Network-bound workers: a CPU each would leave a small cluster idle.
                num_cpus=0.25,
                max_restarts=-1,
                max_task_retries=self.options.ray_batch_retries,
            )

    def _vllm(self, dataset: Any, batch_size: int) -> Any:
        llm = importlib.import_module("ray.data.llm")
        processor_config = llm.vLLMEngineProcessorConfig(
            model_source=self.model,
            engine_kwargs=dict(self.options.engine_kwargs),
            # A fixed pool: an int would let Ray start with one engine and scale up.
            concurrency=(self.options.ray_replicas, self.options.ray_replicas),
            batch_size=batch_size,
            should_continue_on_error=True,  # a failed row comes back with its error
        )
        return llm.build_processor(processor_config, preprocess=_vllm_row)(dataset)


# Where Ray 2.60 looks for a cluster's token, in its order (the file is what `ray.init()`
# and `ray get-auth-token --generate` write).
TOKEN_VARIABLES = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def ray_token_source() -> str | None:
    """Where this process would find a Ray token: the variable that holds it or names its
    file, or the default file `~/.ray/auth_token`; None when there is none.

    Returns:
        The source in words, or None.
    """
    for name in TOKEN_VARIABLES:
        if os.environ.get(name):
            return name
    path = os.path.expanduser("~/.ray/auth_token")
    return path if os.path.isfile(path) else None


def _current_cluster(address: str | None) -> str | None:
    """`auto` as Ray documents it: the cluster `ray start` last started on this machine
    (its `ray_current_cluster` file), else Ray's own search.

    Ray's search alone joins whichever cluster it sees running when it finds one it did not
    expect (e.g. a notebook's local `ray.init()`), not the one `ray start` named.

    Args:
        address: The configured address (`ray_address` or RAY_ADDRESS), or None.

    Returns:
        The head's address when `auto` finds the file, else `address` unchanged.
    """
    if address != "auto":
        return address
    try:
        recorded = importlib.import_module("ray._private.utils").read_ray_address(None)
    except (AttributeError, OSError):  # another Ray layout: its own search decides
        return address
    return recorded or address


def _use_token_if_needed(config: EndpointConfig, address: str | None) -> None:
    """Join a cluster that asks for a token in token mode, when RAY_AUTH_MODE is unset.

    Since Ray 2.60 a local `ray.init()` writes ~/.ray/auth_token, and a plain `ray start
    --head` then turns token authentication on; a driver joining by an explicit address
    (`auto` takes Ray's own default) stays unauthenticated and is refused only after a long
    time-out. The cluster is asked first (one unauthenticated call to its GCS, answered at
    once), so a cluster without authentication is joined as before. No token at hand: the
    run stops here, saying what to export.
    """
    if not address or address == "auto" or "://" in address or os.environ.get("RAY_AUTH_MODE"):
        return
    raylet = importlib.import_module("ray._raylet")
    try:
        raylet.GcsClient(address=address)
    except raylet.AuthenticationError:
        pass  # the cluster wants a token
    except Exception:  # noqa: BLE001 - unreachable or unknown: ray.init reports it
        return
    else:
        return
    source = ray_token_source()
    if source is None:
        raise EndpointError(
            f"{config.describe()}: the Ray cluster at {address} uses token authentication "
            "and this process has no token: export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN "
            "(or RAY_AUTH_TOKEN_PATH; the head's token is in its ~/.ray/auth_token, or "
            "`ray get-auth-token` there prints it)"
        )
    os.environ["RAY_AUTH_MODE"] = "token"
    raylet.Config.initialize("")  # Ray caches its settings: re-read the mode, as ray.init does
    logger.info(
        "Ray: the cluster at %s uses token authentication: joining with RAY_AUTH_MODE=token "
        "and the token from %s",
        address,
        source,
    )


def _join_failure(config: EndpointConfig, address: str | None, error: Exception) -> str:
    """Why joining a cluster failed; Ray 2.60 reports a token mismatch as a bare timeout."""
    message = f"{config.describe()}: cannot join the Ray cluster at {address} ({error})"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        message += (
            "; a cluster started with token authentication is joined only with "
            "RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
            "~/.ray/auth_token) in this process's environment"
        )
    return message
