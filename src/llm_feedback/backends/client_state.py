"""What `LLMClient` keeps while it streams requests: the per-call state, the counters,
the retry log, and how requests are keyed and cut into chunks."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from typing import Any

from llm_feedback.backends.base import Backend, EndpointConfig
from llm_feedback.backends.contract import ChatRequest, ChatResult

logger = logging.getLogger("llm_feedback.backends.client")

ResultCallback = Callable[[int, ChatResult], None]
# Requests hashed and looked up per step while earlier ones are in flight. Building a
# chunk holds the loop (a judge stage reads each text for injections as it builds its
# requests): at 256 those pauses cost 1.2 s of a 43 s judge window, at 64 none measured.
CHUNK = 64


def ignore_result(index: int, result: ChatResult) -> None:
    """The default `on_result`: callers that only want the list.

    Args:
        index: The answered request's index (ignored).
        result: Its result (ignored).
    """


def length_of(requests: Iterable[ChatRequest]) -> int | None:
    """The number of requests, when the iterable can tell it without being consumed.

    Args:
        requests: The requests, a collection or a lazy iterable.

    Returns:
        Their number, or None for an iterable without a length.
    """
    return len(requests) if isinstance(requests, Sized) else None


def chunks(requests: Iterable[ChatRequest]) -> Iterator[list[ChatRequest]]:
    """The requests, taken from the iterable only as each chunk is asked for: 1, 2, 4, ...
    then `CHUNK` at a time, so that the first call goes out as soon as it is built.

    Args:
        requests: The requests, a collection or a lazy iterable.

    Yields:
        Lists of up to `CHUNK` requests, in order.
    """
    iterator = iter(requests)
    size = 1
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
        size = min(2 * size, CHUNK)


def sent_form(config: EndpointConfig, request: ChatRequest) -> ChatRequest:
    """The request as this endpoint sends it: with its JSON schema's strings capped and
    its reasoning budget (`reasoning_tokens`, `reasoning_effort`) where it sets one.

    Args:
        config: The endpoint.
        request: The request as made.

    Returns:
        The request to send (and to key the cache by).
    """
    # Before the cache key: a different cap or budget is a different request.
    if config.reasoning_tokens is not None or config.reasoning_effort is not None:
        request = dataclasses.replace(
            request,
            reasoning_tokens=config.reasoning_tokens or request.reasoning_tokens,
            reasoning_effort=config.reasoning_effort or request.reasoning_effort,
        )
    if config.max_string_chars is None:
        return request
    return request.with_bounded_strings(config.max_string_chars)


def request_key(config: EndpointConfig, backend: Backend, request: ChatRequest) -> str:
    """The request cache's key for a request in its sent form (see `sent_form`).

    Args:
        config: The endpoint.
        backend: Its backend (whose `cache_namespace` is part of the key).
        request: The request in its sent form.

    Returns:
        The cache key.
    """
    return request.cache_key(backend.cache_namespace, config.model)


@dataclass
class StreamState:
    """The state of one `stream` call, filled in as requests are admitted and emptied as
    they are answered: at a million calls a stream holds what is in flight (and, when it
    keeps results, the results), not every request's key and answer."""

    deliver: ResultCallback
    bar: Any = None
    admitted: int = 0  # requests taken so far; each request's index is its rank
    sent: int = 0  # distinct requests the cache did not answer
    failed: int = 0  # of those, answered with a failure
    requests: dict[int, ChatRequest] = field(default_factory=dict)  # until answered
    keys: dict[int, str] = field(default_factory=dict)  # of the requests to send
    results: dict[int, ChatResult] = field(default_factory=dict)  # see `keep`
    first_index: dict[str, int] = field(default_factory=dict)  # key -> first index sent
    # First index sent -> the later identical requests that share its answer, until it comes.
    waiting: dict[int, list[int]] = field(default_factory=dict)
    deduplicated: int = 0
    # Answers the cache holds are not kept once delivered (see `LLMClient.stream`).
    drop_cached: bool = False
    # ... nor their keys, when every admitted request is looked up in the cache.
    forget_answered: bool = False

    def keep(self, index: int, result: ChatResult) -> None:
        """Keep a delivered result for the stream's list, unless the stream drops answers
        the cache holds (a successful result, with `drop_cached`).

        Args:
            index: The request's index in the stream.
            result: Its result.
        """
        if not (self.drop_cached and result.ok):
            self.results[index] = result

    def forget(self, index: int, result: ChatResult) -> None:
        """An answered request that later duplicates need not share: the cache holds its
        answer, and a lookup sees every answer already written (`RequestCache.get_many`
        flushes first), so a later identical request is a cache hit.

        Args:
            index: The answered request's index in the stream.
            result: Its result (only a successful one is forgotten).
        """
        if self.forget_answered and result.ok:
            del self.first_index[self.keys.pop(index)]

    def result_list(self) -> list[ChatResult | None]:
        return [self.results.get(index) for index in range(self.admitted)]


RETRY_LOG_EVERY_S = 5.0


async def cancel_pending_tasks() -> None:
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


class RetryLog:
    """Retries at WARNING, a summary line every few seconds rather than one per retry."""

    def __init__(self, describe: Callable[[], str]) -> None:
        """A retry log for one endpoint.

        Args:
            describe: Gives the endpoint's description for the log lines.
        """
        self._describe = describe
        self._count = 0
        self._last_error = ""
        self._since = time.monotonic()

    def note(self, error: str) -> None:
        """Count a retry; log a summary at the first one and then every `RETRY_LOG_EVERY_S`.

        Args:
            error: Why the request is retried.
        """
        self._count += 1
        self._last_error = error
        now = time.monotonic()
        if self._count == 1 or now - self._since >= RETRY_LOG_EVERY_S:
            logger.warning(
                "%s: %d retr%s in the last %.0f s (last: %s)",
                self._describe(),
                self._count,
                "y" if self._count == 1 else "ies",
                max(now - self._since, 0.0),
                self._last_error,
            )
            self._count, self._since = 0, now


@dataclass
class ClientStats:
    requests: int = 0
    cache_hits: int = 0
    deduplicated: int = 0
    calls: int = 0
    retries: int = 0
    failures: int = 0
    too_long: int = 0  # refused by the endpoint for context length (not failures)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0  # of completion_tokens, a reasoning model's thinking
    # Answered with nothing after the thinking, cut off by the token budget.
    cut_off_thinking: int = 0
