"""Before the first paid call of a run: can each endpoint answer at all?

One cheap request per endpoint (its models list, or a one-token chat completion where a
server has no models route). A wrong key (401/403), a wrong URL or model (404), a refused
connection or an unknown host stops the run at once, naming the endpoint, its URL and
where its key comes from (never the key). A busy or failing server (429, 5xx, timeout) is
only reported: the run's own retries and failure threshold deal with it.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import openai

from llm_feedback.backends.config import EndpointConfig
from llm_feedback.backends.local import embedded_model_path
from llm_feedback.backends.openai_backend import redact
from llm_feedback.backends.ray_backend import check_ray_installed
from llm_feedback.errors import ConfigError, EndpointError

logger = logging.getLogger(__name__)

_FATAL = {401: "rejects the key", 403: "refuses access", 404: "has no such route or model"}


def _sdk_client(config: EndpointConfig, timeout_s: float) -> openai.OpenAI:
    key = config.api_key()
    if config.backend == "azure":
        return openai.AzureOpenAI(
            azure_endpoint=config.resolved_azure_endpoint(),
            api_key=key,
            api_version=config.resolved_api_version(),
            max_retries=0,
            timeout=timeout_s,
        )
    return openai.OpenAI(
        base_url=config.resolved_base_url(),
        api_key=key or "not-needed",
        max_retries=0,
        timeout=timeout_s,
    )


def _ask(client: openai.OpenAI, config: EndpointConfig) -> None:
    try:
        client.models.list()
    except openai.NotFoundError:
        # Some compatible servers have no models route: one token of chat instead.
        client.chat.completions.create(
            model=config.model,
            messages=[{"role": "user", "content": "ping"}],
            **{config.max_tokens_field: 1},
        )


def preflight(config: EndpointConfig, timeout_s: float = 10.0) -> None:
    """Raise `EndpointError` when `config` cannot do its job; log when it may be busy."""
    if not config.preflight:
        return
    if config.backend == "local":
        path = Path(config.model_path) if config.model_path else embedded_model_path()
        if not path.is_file():
            raise ConfigError(f"endpoint '{config.name}': model file {path} not found")
        return
    if config.backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ConfigError(
                f"endpoint '{config.name}' uses the vllm backend, which needs a GPU and the "
                'gpu extra: pip install -e ".[gpu]"'
            )
        return
    if config.backend == "ray":
        check_ray_installed(config)
    if config.backend != "azure" and not config.is_openai_http:
        return  # a plugged-in backend checks itself when it opens
    client = _sdk_client(config, min(timeout_s, config.timeout_s))
    try:
        _ask(client, config)
    except openai.APIStatusError as error:
        reason = _FATAL.get(error.status_code)
        message = redact(f"HTTP {error.status_code}: {error.message}")
        if reason is None:
            logger.warning("preflight: %s answered %s; going on", config.describe(), message)
            return
        raise EndpointError(f"{config.describe()} {reason}: {message}") from None
    except openai.APITimeoutError:
        logger.warning(
            "preflight: %s did not answer within %.0f s; going on", config.describe(), timeout_s
        )
    except openai.APIConnectionError as error:
        cause = error.__cause__ or error
        raise EndpointError(
            f"{config.describe()} cannot be reached: {redact(str(cause))}"
        ) from None
    finally:
        client.close()
    logger.info("preflight: %s answers", config.describe())
