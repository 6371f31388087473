"""The ways `LLMClient.stream` sends what the cache did not answer, beside its own
concurrent sends: a batch backend in process, a streaming batch backend (Ray), and a
provider's Batch API."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from llm_feedback.backends.batch_api import BatchJobs, BatchLedger
from llm_feedback.backends.client_state import StreamState, chunks
from llm_feedback.backends.contract import ChatRequest, ChatResult
from llm_feedback.errors import ConfigError

if TYPE_CHECKING:
    from llm_feedback.backends.client import LLMClient

logger = logging.getLogger("llm_feedback.backends.client")


async def run_in_process(
    client: LLMClient, batch: StreamState, requests: Iterable[ChatRequest]
) -> None:
    """A `BatchBackend` gets the misses `chunk_size` at a time (vLLM: `engine_chunk_size`):
    each chunk is answered, cached and released before later requests are even built."""
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
    through the normal endpoint or recorded as failed (`batch_unanswered`)."""
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

    jobs = BatchJobs(
        client.config,
        client.sdk,
        BatchLedger(client.cache.path),
        client.backend.cache_namespace,
        client.backend.request_body,
        route=client.backend.batch_route,
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
    thread."""
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
