"""One client for every backend: cache first, bounded concurrency, retries, accounting.

All network I/O runs on an event loop owned by the client, in its own thread. Synchronous
callers (Kedro nodes from the CLI or any runner, notebooks with a running loop) block on
that loop; async callers await it. Each SDK connection pool therefore lives on one loop.
What the cache does not answer is sent concurrently from here, from worker processes
(backends/workers.py), by a batch backend in process, by a streaming batch backend (Ray),
or through a provider's Batch API (the functions at the end of this module).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm  # text bars: tqdm.auto warns in notebooks without ipywidgets

from llm_feedback.backends.base import (
    BatchBackend,
    EndpointConfig,
    RetryableError,
    StreamingBatchBackend,
    make_backend,
)
from llm_feedback.backends.batch_api import BatchJobs, BatchLedger
from llm_feedback.backends.cache import RequestCache
from llm_feedback.backends.client_state import (
    ClientStats,
    ResultCallback,
    RetryLog,
    StreamState,
    cancel_pending_tasks,
    chunks,
    ignore_result,
    length_of,
    request_key,
    sent_form,
)
from llm_feedback.backends.context_length import is_context_length_error
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.backends.rate_limit import RateLimiter
from llm_feedback.backends.workers import WorkerPool
from llm_feedback.core.errors import ConfigError, EndpointError, InputError

__all__ = ["ClientStats", "LLMClient", "make_backend", "request_key", "sent_form"]

logger = logging.getLogger(__name__)

# The circuit breaker (see LLMClient._trip_breaker_if_failing).
BREAKER_FIRST_CALLS = 10
BREAKER_MIN_CALLS = 50
BREAKER_SHARE = 0.25


class LLMClient:
    """Use as a context manager: `with LLMClient(config, cache_path) as client: ...`."""

    def __init__(
        self,
        config: EndpointConfig,
        cache_path: str | Path | None = None,
        progress: bool = True,
        refresh: bool = False,
    ) -> None:
        """A client for one endpoint; it opens its backend when entered as a context manager.

        Args:
            config: The endpoint.
            cache_path: The request cache's file; None (or the endpoint's `cache: false`) for no
                cache.
            progress: Whether to show a progress bar for multi-request calls.
            refresh: Ignore cached answers (and replace them): a deliberate redo.
        """
        self.config = config
        self.backend = make_backend(config)
        self.cache = RequestCache(cache_path) if cache_path and config.cache else None
        self.progress = progress
        self.refresh = refresh
        self.stats = ClientStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.sdk: Any = None
        self._semaphore: asyncio.Semaphore | None = None
        self._last_failure: str | None = None
        self._retry_log = RetryLog(config.describe)
        # Large streams of an HTTP endpoint are sent from worker processes (backends/workers.py).
        self.worker_pool = WorkerPool.for_endpoint(config, self.stats, LLMClient)
        # Per-minute limits and the server's rate-limit headers pace every send.
        self.rate_limiter: RateLimiter | None = None
        if not self.backend.is_batch:
            self.rate_limiter = RateLimiter.for_endpoint(config)
            self.backend.on_headers = self.rate_limiter.observe

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> LLMClient:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> None:
        if self._loop is not None:
            return
        self.backend.open()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"llm-client-{self.config.name}", daemon=True
        )
        self._thread.start()
        self._run(self._init_on_loop())

    async def _init_on_loop(self) -> None:
        self._semaphore = asyncio.Semaphore(self.config.concurrency)
        if not self.backend.is_batch:
            self.sdk = self.backend.make_sdk_client()

    def close(self) -> None:
        if self._loop is None:
            return
        # After Ctrl-C or a tripped breaker, calls may still be in flight: end them here,
        # so nothing is left pending on a closed loop (and nothing prints a traceback).
        self._run(cancel_pending_tasks())
        if self.worker_pool is not None:
            self.worker_pool.close()
        if self.sdk is not None:
            self._run(self.sdk.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = None
        self.backend.close()
        if self.cache is not None:
            self.cache.close()

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def supports_json_schema(self) -> bool:
        return self.config.uses_structured_output

    def _run(self, coroutine: Any) -> Any:
        if self._loop is None:
            raise RuntimeError("the client is not open; use it as a context manager")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            # Ctrl-C or an error in the caller: stop the in-flight work, keep what is cached.
            future.cancel()
            raise

    # -- public API ------------------------------------------------------------------
    def call(self, coroutine: Any) -> Any:
        """Run `coroutine` on the client's loop and wait for it (any thread, any runner).

        Args:
            coroutine: The coroutine to run.

        Returns:
            What the coroutine returns.

        Raises:
            RuntimeError: The client is not open.
        """
        return self._run(coroutine)

    async def acall(self, coroutine: Any) -> Any:
        """Await `coroutine` run on the client's loop, from another event loop.

        Args:
            coroutine: The coroutine to run.

        Returns:
            What the coroutine returns.

        Raises:
            RuntimeError: The client is not open.
        """
        if self._loop is None:
            raise RuntimeError("the client is not open; use it as a context manager")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self._loop))

    def complete(self, request: ChatRequest) -> ChatResult:
        """Answer one request (from the cache when it holds the answer).

        Args:
            request: The request.

        Returns:
            Its result.
        """
        return self.complete_many([request], desc=None)[0]

    def complete_many(
        self,
        requests: Iterable[ChatRequest],
        desc: str | None = "requests",
        on_result: ResultCallback | None = None,
        total: int | None = None,
    ) -> list[ChatResult]:
        """Answer every request, in order; cached answers cost nothing.

        `on_result(index, result)` runs as each answer arrives (on the client's loop thread),
        so callers can parse replies while the rest are still in flight. `requests` may be
        a lazy iterable (give `total` for the progress bar): sending starts at once.

        Args:
            requests: The requests, a list or a lazy iterable.
            desc: The progress bar's and log line's label; None for neither.
            on_result: Called with (index, result) as each answer arrives.
            total: The number of requests, when `requests` cannot tell it.

        Returns:
            One result per request, in order.

        Raises:
            EndpointError: The circuit breaker stopped a failing endpoint.
        """
        return self._run(self.stream(requests, desc, on_result, total))

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """`complete` for a caller on another event loop.

        Args:
            request: The request.

        Returns:
            Its result.
        """
        return (await self.acomplete_many([request], desc=None))[0]

    async def acomplete_many(
        self, requests: Iterable[ChatRequest], desc: str | None = None
    ) -> list[ChatResult]:
        """`complete_many` for a caller on another event loop.

        Args:
            requests: The requests.
            desc: The progress bar's and log line's label; None for neither.

        Returns:
            One result per request, in order.
        """
        return await self.acall(self.stream(list(requests), desc))

    def is_available(self, timeout_s: float = 10.0) -> bool:
        """A cheap health check: can the endpoint answer at all?

        Args:
            timeout_s: Seconds a request backend's probe may wait (a batch backend says whether
                it is ready).

        Returns:
            Whether the endpoint can answer.
        """
        if isinstance(self.backend, BatchBackend):
            return self.backend.is_ready()
        return self._run(self.backend.probe(self.sdk, timeout_s))

    # -- machinery -------------------------------------------------------------------
    async def stream(
        self,
        requests: Iterable[ChatRequest],
        desc: str | None = "requests",
        on_result: ResultCallback | None = None,
        total: int | None = None,
        *,
        keep_results: bool = True,
    ) -> list[ChatResult | None]:
        """`complete_many` for code running on the client's loop (see `call`): look up,
        deduplicate and send requests chunk by chunk as they are produced.

        `requests` may be a lazy iterable: the first calls are in flight while later
        requests are still being built, hashed and looked up in the cache.
        `keep_results=False`, for a caller that takes each answer in `on_result`: answers
        the cache holds are not kept after delivery (a quarter of a million judge replies
        would otherwise stay in memory to the end), and come back as None.

        Args:
            requests: The requests, a list or a lazy iterable.
            desc: The progress bar's and log line's label; None for neither.
            on_result: Called with (index, result) as each answer arrives.
            total: The number of requests, when `requests` cannot tell it (the bar
                grows past it when more are admitted).
            keep_results: Whether to keep every result for the returned list.

        Returns:
            One result per request, in order (None for those not kept).

        Raises:
            EndpointError: The circuit breaker stopped a failing endpoint.
        """
        batch = StreamState(
            deliver=on_result or ignore_result,
            drop_cached=not keep_results and self.cache is not None,
            forget_answered=not keep_results and self.cache is not None and not self.refresh,
        )
        cut_off_before = self.stats.cut_off_thinking
        size = total if total is not None else length_of(requests)
        show = self.progress and desc is not None and size != 1
        batch.bar = tqdm(total=size, desc=desc, disable=not show, unit="req", mininterval=0.5)
        try:
            if self.config.uses_batch_api:
                for chunk in chunks(requests):
                    self.admit(batch, chunk)
                await run_batch_api(self, batch)
            elif isinstance(self.backend, StreamingBatchBackend):
                for chunk in chunks(requests):
                    self.admit(batch, chunk)
                await run_streaming(self, batch)
            elif self.backend.is_batch:
                await run_in_process(self, batch, requests)
            else:
                await self._run_concurrently(batch, requests)
        finally:
            batch.bar.close()
        sent = batch.sent
        cut_off = self.stats.cut_off_thinking - cut_off_before
        if cut_off:
            logger.warning(
                "%s: %d replies ran out of tokens before any answer (still thinking): give "
                "the endpoint a thinking budget of its own (reasoning_tokens)",
                self.config.describe(),
                cut_off,
            )
        self.stats.requests += batch.admitted
        self.stats.cache_hits += batch.admitted - sent - batch.deduplicated
        self.stats.deduplicated += batch.deduplicated
        if sent and desc is not None:
            logger.info(
                "%s: %d requests, %d from cache, %d sent, %d failed, %d retries",
                desc,
                batch.admitted,
                batch.admitted - sent,
                sent,
                batch.failed,
                self.stats.retries,
            )
        return batch.result_list()

    def admit(self, batch: StreamState, chunk: list[ChatRequest]) -> list[int]:
        """Register a chunk of requests; return the indices that must be sent.

        Cached answers are delivered at once, and a request identical to an earlier one waits
        for that one's answer.

        Args:
            batch: The stream's state.
            chunk: The next requests of the stream.

        Returns:
            The stream indices of the requests to send.

        Raises:
            InputError: A request carries images or audio and the endpoint reads text only.
        """
        chunk = [sent_form(self.config, request) for request in chunk]
        if not self.config.accepts_media:
            # The samples' checks refuse such rows earlier; this guards direct callers.
            if any(request.media for request in chunk):
                raise InputError(
                    f"{self.config.describe()} reads text only: a request with images or "
                    "audio cannot be sent to it"
                )
        keys = [request_key(self.config, self.backend, request) for request in chunk]
        use_cache = self.cache is not None and not self.refresh
        cached = self.cache.get_many(keys) if use_cache else {}
        to_send = []
        for request, key in zip(chunk, keys, strict=True):
            index = batch.admitted
            batch.admitted += 1
            if key in cached:
                batch.deliver(index, cached[key])
                batch.keep(index, cached[key])
                batch.bar.update(1)
            elif key in batch.first_index:
                # Identical requests share one answer: only the first is sent.
                self._share(batch, index, batch.first_index[key], key)
            else:
                batch.requests[index] = request
                batch.keys[index] = key
                batch.first_index[key] = index
                batch.sent += 1
                to_send.append(index)
        if batch.bar.total is not None and batch.admitted > batch.bar.total:
            # A lazy stream's total may leave out calls its producer finds as it goes (a
            # suspected injection's extra calls): the bar grows to what was admitted.
            batch.bar.total = batch.admitted
        return to_send

    def _share(self, batch: StreamState, index: int, first: int, key: str) -> None:
        """Request `index` is `first` again: it gets that answer when it comes, or now if
        it came already (kept, or in the cache when the stream keeps no answer)."""
        batch.deduplicated += 1
        batch.bar.update(1)
        if first in batch.requests:  # still to be answered
            batch.waiting.setdefault(first, []).append(index)
            return
        result = batch.results.get(first) or self.cache.get_many([key])[key]
        batch.deliver(index, result)
        batch.keep(index, result)

    async def _run_concurrently(self, batch: StreamState, requests: Iterable[ChatRequest]) -> None:
        workers = self.config.concurrency
        queue: asyncio.Queue[int | None] = asyncio.Queue(maxsize=4 * workers)

        async def produce() -> None:
            for chunk in chunks(requests):
                for index in self.admit(batch, chunk):
                    await queue.put(index)
                await asyncio.sleep(0)  # let the workers send what is queued
            # Only after a normal end: on an error every task is cancelled below, and a put
            # into a full queue that nobody drains any more would never return.
            for _ in range(workers):
                await queue.put(None)

        async def work() -> None:
            while (index := await queue.get()) is not None:
                result = await self.fetch(batch.requests[index], batch.keys[index], batch.sent)
                self.deliver_answer(batch, index, result)
                batch.forget(index, result)

        tasks = [asyncio.ensure_future(produce())]
        tasks += [asyncio.ensure_future(work()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        finally:
            # A tripped breaker (or the caller's Ctrl-C) ends every worker: nothing more is
            # sent, and every answer received so far is already in the cache.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def deliver_answer(self, batch: StreamState, index: int, result: ChatResult) -> None:
        """Hand an answer to its request and to every identical request waiting on it.

        Args:
            batch: The stream's state.
            index: The stream index of the request that was sent.
            result: Its answer.
        """
        batch.requests.pop(index, None)  # answered: its prompt need not stay in memory
        batch.failed += not result.ok
        for shared in (index, *batch.waiting.pop(index, ())):
            batch.deliver(shared, result)
            batch.keep(shared, result)
        batch.bar.update(1)

    async def fetch(self, request: ChatRequest, key: str, misses: int) -> ChatResult:
        """Send one uncached request (through the worker pool for a large stream) and record it.

        Args:
            request: The request.
            key: Its cache key.
            misses: The stream's uncached requests so far (decides whether workers send it).

        Returns:
            Its result.

        Raises:
            EndpointError: The circuit breaker stopped a failing endpoint.
        """
        async with self._semaphore:
            if self.cache is not None:  # until its answer: a kill leaves it as unseen
                self.cache.mark_sent(
                    key,
                    endpoint=self.config.name,
                    backend=self.config.backend,
                    model=self.config.model,
                    prompt_tokens=request.estimated_input_tokens(),
                    max_tokens=request.token_budget,
                )
            pool = self.worker_pool
            if pool is not None and pool.takes(misses):
                result = await pool.send(key, request)
            else:
                result = await self._send_with_retries(request)
        self.record_answer(key, result)
        return result

    def record_answer(self, key: str, result: ChatResult) -> None:
        """Count an answer in the stats and cache it when it succeeded; trip the breaker on too
        many failures.

        Args:
            key: The request's cache key.
            result: Its answer.

        Raises:
            EndpointError: Too many calls failed (the circuit breaker).
        """
        if self.cache is not None:
            self.cache.mark_answered(key)
        self.stats.calls += 1
        self.stats.prompt_tokens += result.prompt_tokens
        self.stats.completion_tokens += result.completion_tokens
        self.stats.reasoning_tokens += result.reasoning_tokens
        if result.text == "" and result.finish_reason == "length":
            self.stats.cut_off_thinking += 1
        if not result.ok:
            if is_context_length_error(result.error):
                # This request's own error (too long for the model), not the endpoint's.
                self.stats.too_long += 1
                return
            self.stats.failures += 1
            self._last_failure = result.error
            self._trip_breaker_if_failing()
        elif self.cache is not None:
            self.cache.put(key, result)

    def _trip_breaker_if_failing(self) -> None:
        """Stop sending when the endpoint is plainly not doing its job.

        It trips when the first `BREAKER_FIRST_CALLS` calls all failed, or when, after at
        least `BREAKER_MIN_CALLS` calls, more than `max(2 x max_failure_share,
        BREAKER_SHARE)` of them failed: grinding through every row would only pay for
        more failures. What was answered is cached, so a rerun resumes.
        """
        # Calls refused for context length tell nothing about the endpoint's health.
        calls, failures = self.stats.calls - self.stats.too_long, self.stats.failures
        share_limit = max(2 * self.config.max_failure_share, BREAKER_SHARE)
        if (calls == failures and calls >= BREAKER_FIRST_CALLS) or (
            calls >= BREAKER_MIN_CALLS and failures > share_limit * calls
        ):
            raise EndpointError(
                f"{self.config.describe()}: {failures} of {calls} calls failed, stopping "
                f"(last error: {self._last_failure}); {calls - failures} answered calls are "
                "cached: fix the endpoint and run the same command to resume"
            )

    async def send_uncached(self, request: ChatRequest) -> ChatResult:
        """One request straight to the backend with the endpoint's retries, and nothing else
        (no cache, deduplication or breaker): what a worker process does for its parent.

        Args:
            request: The request.

        Returns:
            Its result.
        """
        return await self._send_with_retries(request)

    async def _send_with_retries(self, request: ChatRequest) -> ChatResult:
        started = time.perf_counter()
        last_error = ""
        attempts = self.config.max_retries + 1
        limiter = self.rate_limiter
        estimate = RateLimiter.estimate(request)
        for attempt in range(attempts):
            if limiter is not None:
                await limiter.acquire(estimate)
            try:
                result = await self.backend.send(self.sdk, request)
            except RetryableError as error:
                last_error = str(error)
                if limiter is not None:
                    limiter.settle(estimate, None)
                    if error.retry_after is not None:
                        # Every send waits, not only this retry: no storm of refusals.
                        limiter.pause(min(error.retry_after, self.config.backoff_max_s))
                if attempt + 1 == attempts:
                    break
                self.stats.retries += 1
                self._retry_log.note(last_error)
                await asyncio.sleep(self.config.backoff_s(attempt, error.retry_after))
            else:
                if limiter is not None:
                    limiter.settle(estimate, result)
                return result
        return ChatResult.failure(
            f"gave up after {attempts} attempt{'' if attempts == 1 else 's'}: {last_error}",
            latency_s=time.perf_counter() - started,
            model=self.config.model,
        )


# -- the ways `stream` sends misses besides its own concurrent sends: a batch backend in
# process, a streaming batch backend (Ray), and a provider's Batch API ------------------
async def run_in_process(
    client: LLMClient, batch: StreamState, requests: Iterable[ChatRequest]
) -> None:
    """A `BatchBackend` gets the misses `chunk_size` at a time (vLLM: `engine_chunk_size`):
    each chunk is answered, cached and released before later requests are even built.

    Args:
        client: The client whose backend answers.
        batch: The stream's state.
        requests: The stream's requests, a list or a lazy iterable.
    """
    size = client.config.kind.chunk_size(client.config)
    todo: list[int] = []

    async def generate(indices: list[int]) -> None:
        outputs = await asyncio.to_thread(
            client.backend.generate, [batch.requests[index] for index in indices]
        )
        for index, result in zip(indices, outputs, strict=True):
            client.record_answer(batch.keys[index], result)
            client.deliver_answer(batch, index, result)
            batch.forget(index, result)

    for chunk in chunks(requests):
        todo += client.admit(batch, chunk)
        while len(todo) >= size:
            await generate(todo[:size])
            del todo[:size]
    if todo:
        await generate(todo)


async def run_batch_api(client: LLMClient, batch: StreamState) -> None:
    """Misses go through the endpoint's Batch API; what no batch answered is retried
    through the normal endpoint or recorded as failed (`batch_unanswered`).

    Args:
        client: The client whose endpoint's Batch API answers.
        batch: The stream's state, every request admitted.

    Raises:
        ConfigError: The client has no request cache (batch ids are kept beside it).
    """
    if client.cache is None:
        raise ConfigError(
            f"{client.config.describe()}: mode batch needs the request cache (batch ids and "
            "answers are kept beside it); set request_cache and leave cache: true"
        )
    pending = {key: batch.requests[index] for key, index in batch.first_index.items()}
    if not pending:
        return

    def on_answer(key: str, result: ChatResult) -> None:
        client.record_answer(key, result)
        if key in pending:
            client.deliver_answer(batch, batch.first_index[key], result)

    ledger = BatchLedger(client.cache.path)
    # A backend with a batch API of its own (anthropic, gemini) builds its jobs; OpenAI's
    # and Azure's share BatchJobs.
    own_jobs = getattr(client.backend, "batch_jobs", None)
    jobs = (
        own_jobs(client.sdk, ledger)
        if own_jobs is not None
        else BatchJobs(
            client.config,
            client.sdk,
            ledger,
            client.backend.cache_namespace,
            client.backend.request_body,
            route=client.backend.batch_route,
        )
    )
    unanswered = await jobs.answer(pending, on_answer)
    if not unanswered:
        return
    retry = client.config.options.batch_unanswered == "retry"
    logger.warning(
        "%s: %d requests were not answered by their batch (first: %s); %s",
        client.config.describe(),
        len(unanswered),
        next(iter(unanswered.values())),
        "sending them one by one" if retry else "recording them as failed",
    )

    async def settle(key: str, reason: str) -> None:
        index = batch.first_index[key]
        if retry:
            result = await client.fetch(batch.requests[index], key, len(unanswered))
        else:
            result = ChatResult.failure(reason, model=client.config.model)
            client.record_answer(key, result)
        client.deliver_answer(batch, index, result)

    await asyncio.gather(*(settle(key, reason) for key, reason in unanswered.items()))


async def run_streaming(client: LLMClient, batch: StreamState) -> None:
    """Hand every uncached request to a streaming batch backend (Ray); record each
    answer (cache included) as it arrives, on this loop, while the backend works in a
    thread.

    Args:
        client: The client whose backend answers.
        batch: The stream's state, every request admitted.
    """
    todo = list(batch.first_index.values())
    requests = [batch.requests[index] for index in todo]
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[Any] = asyncio.Queue()
    stop = threading.Event()

    def produce() -> None:
        answers = client.backend.generate_stream(requests)
        try:
            for answer in answers:
                loop.call_soon_threadsafe(arrived.put_nowait, answer)
                if stop.is_set():
                    break
            loop.call_soon_threadsafe(arrived.put_nowait, None)
        except BaseException as error:
            loop.call_soon_threadsafe(arrived.put_nowait, error)
        finally:
            close = getattr(answers, "close", None)
            if close is not None:
                close()  # a stopped stream ends the backend's work too

    producer = asyncio.ensure_future(asyncio.to_thread(produce))
    try:
        while (answer := await arrived.get()) is not None:
            if isinstance(answer, BaseException):
                raise answer
            position, result = answer
            index = todo[position]
            client.record_answer(batch.keys[index], result)
            client.deliver_answer(batch, index, result)
    finally:
        stop.set()
        await asyncio.gather(producer, return_exceptions=True)
