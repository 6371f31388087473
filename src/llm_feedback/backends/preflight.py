"""Before the first paid call of a run: can each endpoint answer at all?

Each backend kind checks itself (`check_ready`): the embedded model that its file is
there, vLLM and Ray that they are installed, an HTTP endpoint that it answers one cheap
request through the endpoint's own transport (its models list, or a one-token chat
completion where a server has no models route). A wrong key (401/403), a wrong URL or
model (404), a refused connection or an unknown host stops the run at once, naming the
endpoint, its URL and where its key comes from (never the key). A busy or failing server
(429, 5xx, timeout) is only reported: the run's own retries and failure threshold deal
with it.
"""

from __future__ import annotations

import asyncio
import logging

from llm_feedback.backends.base import EndpointConfig, make_backend
from llm_feedback.core.errors import EndpointError

logger = logging.getLogger(__name__)

_FATAL = {401: "rejects the key", 403: "refuses access", 404: "has no such route or model"}


def preflight(config: EndpointConfig, timeout_s: float = 10.0) -> None:
    """Raise `EndpointError` (or `ConfigError`) when `config` cannot do its job; log when
    it may only be busy.

    Args:
        config: The endpoint (skipped when its `preflight` is off).
        timeout_s: The most seconds to wait (the endpoint's own timeout if shorter).

    Raises:
        ConfigError: The endpoint's settings cannot work.
        EndpointError: The endpoint cannot be reached or refuses to serve.
    """
    if config.preflight:
        config.kind.check_ready(config, min(timeout_s, config.timeout_s))


async def _ask(config: EndpointConfig, timeout_s: float):
    backend = make_backend(config)
    connection = backend.make_sdk_client()
    try:
        answer = await backend.ask(connection, "models", timeout_s)
        if answer.status == 404:
            # Some compatible servers have no models route: one token of chat instead.
            answer = await backend.ask(connection, "chat", timeout_s)
        return answer
    finally:
        await connection.close()


def probe_over_http(config: EndpointConfig, timeout_s: float) -> None:
    """The preflight of an HTTP endpoint, through the transport its calls use.

    A timeout or an answer that may be passing (such as a busy server's) is logged and let
    through.

    Args:
        config: The endpoint.
        timeout_s: Seconds to wait for its answer.

    Raises:
        EndpointError: The endpoint cannot be reached, or answered with a status a run
            cannot get past.
    """
    answer = asyncio.run(_ask(config, timeout_s))
    if answer.timed_out:
        logger.warning(
            "preflight: %s did not answer within %.0f s; going on", config.describe(), timeout_s
        )
        return
    if answer.status is None:
        raise EndpointError(f"{config.describe()} cannot be reached: {answer.message}")
    if answer.status != 200:
        message = f"HTTP {answer.status}: {answer.message}"
        reason = _FATAL.get(answer.status)
        if reason is None:
            logger.warning("preflight: %s answered %s; going on", config.describe(), message)
            return
        raise EndpointError(f"{config.describe()} {reason}: {message}")
    logger.info("preflight: %s answers", config.describe())
